package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// The fault kinds of TestFailoverROLE: replica sync asks the master for its
// replicas (ROLE) before it decides whether a request waits for one.
const (
	// roleLost: every ROLE reply is lost while the master is cut off from
	// its only replica, after the Client saw it with that replica.
	roleLost = "role-lost"
	// roleDenied: the Client's ACL user may not run ROLE.
	roleDenied = "role-denied"
)

// TestFailoverROLE is TestFailover with the question replica sync rests on
// unanswered: per kind, RLOCK_FAILOVERS rounds (default 2) on a master
// with one replica, the master behind a fault proxy. Each round cuts the
// master off from its replica (the replica follows a dead port, so it
// keeps what it had and a grant made now never reaches it), asks for the
// lock through the proxy with the kind's fault, then promotes the replica
// and has another Client ask there. A grant on both sides while the first
// holder was not told is a double grant, and fails the test: replica sync
// must fail closed (refuse, or fail New), not read a missing answer as "no
// replicas". At 841bfb0 every round of both kinds was a double grant.
func TestFailoverROLE(t *testing.T) {
	rounds := failovers(t, 2)
	for _, kind := range []string{roleLost, roleDenied} {
		t.Run(kind, func(t *testing.T) {
			master := integration.Redis(t, integration.Options{Args: []string{"--repl-diskless-sync-delay", "0"}})
			replica := integration.Redis(t, integration.Options{})
			var tally failoverTally
			refusedAtNew := 0
			for r := range rounds {
				atNew, err := roleRound(t, master, replica, kind, r, &tally)
				if err != nil {
					t.Fatalf("round %d: %v", r, err)
				}
				if atNew {
					refusedAtNew++
				}
			}
			t.Logf("%s: %d failovers: %d double grants, %d losses told before the other grant, %d refused on the cut-off master, %d refused at New",
				kind, rounds, tally.doubleGrants, tally.toldFirst, tally.refused, refusedAtNew)
			if tally.doubleGrants > 0 {
				t.Errorf("%d double grants across %d failovers with replica sync and %s", tally.doubleGrants, rounds, kind)
			}
		})
	}
}

// roleRound runs one round of kind (see TestFailoverROLE) and reports
// whether the holder's Client was refused at New.
func roleRound(t *testing.T, master, replica *integration.Server, kind string, r int, tally *failoverTally) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mrc, rrc := rawClient(t, master), rawClient(t, replica)
	if err := follow(ctx, rrc, master.DirectAddr()); err != nil {
		return false, err
	}
	if err := countReplicas(ctx, mrc, 1); err != nil {
		return false, err
	}
	name := fmt.Sprintf("%s:%d:%d", t.Name(), time.Now().UnixNano(), r)
	cfg := lock.Config{Addrs: []string{master.Addr()}, ReplicaSyncTimeout: 100 * time.Millisecond, CommandTimeout: 300 * time.Millisecond}
	if kind == roleDenied {
		user := "norole"
		if err := rawDo(ctx, mrc, "ACL", "SETUSER", user, "reset", "on", ">pw", "~*", "&*", "+@all", "-role"); err != nil {
			return false, err
		}
		cfg.Username, cfg.Password = user, "pw"
	}
	holder, err := lock.New(ctx, cfg)
	if kind == roleDenied && errors.Is(err, lock.ErrAuth) && strings.Contains(err.Error(), "ROLE") {
		tally.rounds++
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer closeClient(holder)
	// The holder's Client sees the master with its replica.
	before, err := holder.Mutex(name + ":before").Lock(ctx)
	if err != nil {
		return false, fmt.Errorf("holder, before the cut: %w", err)
	}
	if err := before.Unlock(ctx); err != nil {
		return false, fmt.Errorf("holder, before the cut: %w", err)
	}

	// The cut: the replica follows a port nobody listens on.
	if err := rawDo(ctx, rrc, "REPLICAOF", "127.0.0.1", "1"); err != nil {
		return false, err
	}
	if err := countReplicas(ctx, mrc, 0); err != nil {
		return false, err
	}
	if kind == roleLost {
		f, err := master.Inject(integration.Rule{Match: integration.Command("ROLE"), Action: integration.DropReply, Times: math.MaxInt})
		if err != nil {
			return false, err
		}
		defer f.Remove()
	}
	h, herr := holder.Mutex(name).TryLock(ctx)
	defer unlock(ctx, h)

	// The failover: the replica, which never had this round's grant, is
	// promoted, and another Client asks there.
	if err := rawDo(ctx, rrc, "REPLICAOF", "NO", "ONE"); err != nil {
		return false, err
	}
	other, err := lock.New(ctx, lock.Config{Addrs: []string{replica.DirectAddr()}})
	if err != nil {
		return false, err
	}
	defer closeClient(other)
	switch {
	case herr == nil:
		if err := tally.judge(ctx, t, h, other.Mutex(name), r); err != nil {
			return false, err
		}
	case errors.Is(herr, lock.ErrUnavailable):
		tally.rounds++
		tally.refused++
	default:
		return false, fmt.Errorf("holder, on the cut-off master: %w", herr)
	}
	return false, nil
}

// rawClient is a plain client on srv's own port, closed when the test ends.
func rawClient(t *testing.T, srv *integration.Server) rueidis.Client {
	return integration.NewClient(t, srv.DirectAddr())
}

// rawDo runs one command and returns its error.
func rawDo(ctx context.Context, rc rueidis.Client, args ...string) error {
	return rc.Do(ctx, rc.B().Arbitrary(args[0]).Args(args[1:]...).Build()).Error()
}

// follow makes rc's server a replica of the master at addr, afresh (a full
// sync replaces what it has).
func follow(ctx context.Context, rc rueidis.Client, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	return rawDo(ctx, rc, "REPLICAOF", host, port)
}

// countReplicas waits until the master lists n replicas, online ones when
// n > 0 (a replica counts for WAIT once its first sync is done).
func countReplicas(ctx context.Context, rc rueidis.Client, n int) error {
	want := fmt.Sprintf("connected_slaves:%d\r\n", n)
	for {
		info, err := rc.Do(ctx, rc.B().Info().Section("replication").Build()).ToString()
		if err != nil {
			return err
		}
		if strings.Contains(info, want) && (n == 0 || strings.Contains(info, "state=online")) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the master never listed %d replicas: %w", n, ctx.Err())
		case <-time.After(10 * time.Millisecond): // the server has no event for it
		}
	}
}
