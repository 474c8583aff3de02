package lock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// The checks that guard exclusion fail closed: a missing or refused answer
// is never read as "nothing to wait for" (replica sync), and a hold of one
// kind is never taken or counted as another kind's.

// detachReplica makes replica follow a port nobody listens on, so that
// its master lists no replica: a master cut off from its only replica.
// The replica keeps what it had, and can be promoted.
func detachReplica(t *testing.T, master, replica *integration.Server) {
	t.Helper()
	must(t, do(t, raw(t, replica), "REPLICAOF", "127.0.0.1", "1").Error())
	waitReplicas(t, raw(t, master), 0)
}

// One lost reply to ROLE must not turn replica sync off for a master that
// had a replica: a grant no replica has would be returned as a Held, and a
// failover would then grant the lock to another Client while the holder is
// not told (safety-3 R3-1).
func TestReplicaSyncALostRoleReplyDoesNotSkipTheWait(t *testing.T) {
	master, replica := withReplica(t)
	c := newClient(t, lock.Config{ReplicaSyncTimeout: 100 * time.Millisecond, CommandTimeout: 300 * time.Millisecond}, master)
	mrc := raw(t, master)
	n := name(t)
	h, err := c.Mutex(n).TryLock(bg())
	must(t, err)
	must(t, h.Unlock(bg()))

	detachReplica(t, master, replica)
	// The first attempt's WAIT answers 0: the grant is given back and
	// the count asked again, and that ROLE's reply is lost.
	inject(t, master, integration.Rule{Match: integration.Command("ROLE"), Action: integration.DropReply, Times: math.MaxInt})
	h, err = c.Mutex(n).TryLock(bg())
	if err == nil {
		// What the finding does next: the master dies and its replica,
		// which never had the grant, is promoted.
		must(t, do(t, raw(t, replica), "REPLICAOF", "NO", "ONE").Error())
		other := newClient(t, lock.Config{}, replica)
		g, gerr := other.Mutex(n).TryLock(bg())
		if gerr == nil {
			_ = g.Unlock(bg())
			if h.Context().Err() == nil {
				t.Fatalf("double grant: TryLock was granted on a master whose only replica acknowledged nothing, and the promoted replica granted %q to another Client while the holder's context is live", n)
			}
		}
		_ = h.Unlock(bg())
		t.Fatal("TryLock was granted on a master whose only replica acknowledged nothing")
	}
	if !errors.Is(err, lock.ErrUnavailable) || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("TryLock with the replica cut off and ROLE unanswered = %v, want ErrUnavailable naming the replicas", err)
	}
	if exists(t, mrc, n) {
		t.Fatal("the unacknowledged hold was not given back")
	}
}

// A master whose count of replicas could never be asked (every ROLE reply
// lost) is not taken for one without replicas: the acquire carries a WAIT,
// and its grant counts once a replica acknowledged it.
func TestReplicaSyncAMasterNeverAskedStillWaits(t *testing.T) {
	master, _ := withReplica(t)
	mrc := raw(t, master)
	inject(t, master, integration.Rule{Match: integration.Command("ROLE"), Action: integration.DropReply, Times: math.MaxInt})
	rc := integration.NewClient(t, master.Addr())
	c, err := lock.FromClient(rc, lock.Config{CommandTimeout: 300 * time.Millisecond})
	must(t, err)
	t.Cleanup(func() { _ = c.Close(bg()) })
	before := waits(t, mrc)
	h, err := c.Mutex(name(t)).Lock(bg())
	must(t, err)
	must(t, h.Unlock(bg()))
	if w := waits(t, mrc) - before; w < 2 {
		t.Fatalf("%d WAITs for a Lock+Unlock on a master whose replicas could not be counted, want 2", w)
	}
}

// aclUser adds an ACL user on srv that may run everything but the
// commands named, and returns its name and password.
func aclUser(t *testing.T, srv *integration.Server, deny ...string) (user, pass string) {
	t.Helper()
	user, pass = "u"+strings.ToLower(strings.ReplaceAll(t.Name(), "/", "")), "pw"
	args := []string{"ACL", "SETUSER", user, "reset", "on", ">" + pass, "~*", "&*", "+@all"}
	for _, d := range deny {
		args = append(args, "-"+d)
	}
	must(t, do(t, raw(t, srv), args...).Error())
	return user, pass
}

// A Client whose ACL user may not run ROLE cannot tell whether its master
// has replicas. With replica sync on (the default) that is refused at New
// as ErrAuth naming ROLE, rather than silently sending no WAIT (safety-3
// R3-2). With replica sync off the user is fine.
func TestReplicaSyncRoleRefusedIsErrAuth(t *testing.T) {
	master, _ := withReplica(t)
	mrc := raw(t, master)
	user, pass := aclUser(t, master, "role")

	t.Run("New", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
		defer cancel()
		c, err := lock.New(ctx, lock.Config{Addrs: []string{master.Addr()}, Username: user, Password: pass})
		if err == nil {
			before := waits(t, mrc)
			for range 3 {
				h, err := c.Mutex(name(t)).Lock(bg())
				must(t, err)
				must(t, h.Unlock(bg()))
			}
			w := waits(t, mrc) - before
			_ = c.Close(bg())
			t.Fatalf("New accepted a user that may not run ROLE with replica sync on: %d WAITs in 3 Lock+Unlock with an online replica", w)
		}
		if !errors.Is(err, lock.ErrAuth) || !strings.Contains(err.Error(), "ROLE") {
			t.Fatalf("New with ROLE refused = %v, want ErrAuth naming ROLE", err)
		}
	})
	t.Run("FromClient", func(t *testing.T) {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{master.Addr()}, Username: user, Password: pass, ForceSingleClient: true, DisableCache: true})
		must(t, err)
		t.Cleanup(rc.Close)
		c, err := lock.FromClient(rc, lock.Config{})
		must(t, err)
		t.Cleanup(func() { _ = c.Close(bg()) })
		before := waits(t, mrc)
		h, err := c.Mutex(name(t)).Lock(bg())
		if err == nil {
			_ = h.Unlock(bg())
			t.Fatalf("Lock by a user that may not run ROLE was granted with replica sync on (%d WAITs)", waits(t, mrc)-before)
		}
		if !errors.Is(err, lock.ErrAuth) || !strings.Contains(err.Error(), "ROLE") {
			t.Fatalf("Lock with ROLE refused = %v, want ErrAuth naming ROLE", err)
		}
	})
	t.Run("sync off", func(t *testing.T) {
		c := newClient(t, lock.Config{Addrs: []string{master.Addr()}, Username: user, Password: pass, ReplicaSyncTimeout: -1}, master)
		h, err := c.Mutex(name(t)).Lock(bg())
		must(t, err)
		must(t, h.Unlock(bg()))
	})
}

// A stray read hold of an owner (a read acquire that ran after its caller
// gave up, settled later) is not adopted by the same owner's plain Lock:
// the plain lock would be granted beside another owner's read, and its
// release would delete the read-write hash under that reader (safety-3
// R3-3).
func TestAStrayReadHoldIsNotAdoptedAsAPlainLock(t *testing.T) {
	srv := integrationRedis(t)
	lease := time.Second
	c := newClient(t, lock.Config{WatchdogTimeout: lease, CommandTimeout: 100 * time.Millisecond}, srv)
	others := newClient(t, lock.Config{Addrs: []string{srv.DirectAddr()}}, srv)
	n := name(t)
	y, err := others.ReadWriteMutex(n).ReadLock().Lock(bg())
	must(t, err)
	defer func() { _ = y.Unlock(bg()) }()

	// X's read acquire runs, and no reply reaches X; nor can its
	// settlement be answered until the settler has given up.
	acq := inject(t, srv, integration.Rule{Match: isAcquire(n), Action: integration.DropReply, Times: math.MaxInt})
	set := inject(t, srv, integration.Rule{Match: isSettle(n), Action: integration.DropReply, Times: math.MaxInt})
	x := lock.WithOwner(bg())
	sent := time.Now()
	rctx, cancel := context.WithTimeout(x, lease/2)
	_, err = c.ReadWriteMutex(n).ReadLock().Lock(rctx)
	cancel()
	if !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("read Lock with every reply lost = %v, want ErrNotAcquired", err)
	}
	acq.Remove()
	// The settler works on it until the request's lease must have run
	// out, plus one CommandTimeout; it has no signal of its own.
	time.Sleep(time.Until(sent.Add(lease + 300*time.Millisecond)))
	set.Remove()

	pctx, cancel := context.WithTimeout(x, 2*time.Second)
	defer cancel()
	p, err := c.Mutex(n).Lock(pctx)
	if err == nil {
		defer func() { _ = p.Unlock(bg()) }()
		if y.Context().Err() == nil {
			t.Fatalf("double grant: a plain Lock of %q was granted while another owner's read Held is live", n)
		}
	}
	if y.Context().Err() != nil {
		t.Fatalf("the other owner's read hold ended: %v", context.Cause(y.Context()))
	}
	// The stray itself was released, with the read lock's script, before
	// the owner took the name as a plain lock: not left to its lease.
	owner, _ := lock.OwnerFrom(x)
	if got := hgetInt(t, raw(t, srv), n, reentrant.Field(c.ID(), owner)); got != 0 {
		t.Fatalf("the owner's stray read hold is still in Redis (count %d) after it asked for the plain lock", got)
	}
	if g, err := others.ReadWriteMutex(n).WriteLock().TryLock(bg()); err == nil {
		_ = g.Unlock(bg())
		t.Fatalf("double grant: a writer was granted %q while a read Held is live", n)
	}
}

// A server that does not know ROLE (renamed away, or a stand-in that
// lacks it) cannot say whether it has replicas. With replica sync on, New
// says so, naming ROLE and the way out, instead of a Client whose every
// acquire waits for a replica that may not exist; with replica sync off
// the server is fine.
func TestReplicaSyncWithoutRoleCommandIsRefusedAtNew(t *testing.T) {
	srv := integrationRedis(t, integration.Options{Args: []string{"--rename-command", "ROLE", ""}})
	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	c, err := lock.New(ctx, lock.Config{Addrs: []string{srv.Addr()}})
	if err == nil {
		_, lerr := c.Mutex(name(t)).TryLock(bg())
		_ = c.Close(bg())
		t.Fatalf("New accepted a server without ROLE with replica sync on; then TryLock = %v", lerr)
	}
	if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), "ROLE") || !strings.Contains(err.Error(), "ReplicaSyncTimeout") {
		t.Fatalf("New on a server without ROLE = %v, want ErrInvalid naming ROLE and ReplicaSyncTimeout", err)
	}
	off := newClient(t, lock.Config{Addrs: []string{srv.Addr()}, ReplicaSyncTimeout: -1}, srv)
	h, err := off.Mutex(name(t)).TryLock(bg())
	must(t, err)
	must(t, h.Unlock(bg()))
}
