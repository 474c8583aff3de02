package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

// kindOf makes the Mutex of one lock kind of name on c.
type kindOf struct {
	name  string
	rw    bool // the read-write layout ('mode' in the hash)
	mutex func(c *lock.Client, name string) *lock.Mutex
}

var lockKinds = []kindOf{
	{"read", true, func(c *lock.Client, n string) *lock.Mutex { return c.ReadWriteMutex(n).ReadLock() }},
	{"plain", false, func(c *lock.Client, n string) *lock.Mutex { return c.Mutex(n) }},
	{"fair", false, func(c *lock.Client, n string) *lock.Mutex { return c.FairMutex(n) }},
}

// TestMixedKindsOneOwner: one owner takes one name as two kinds of lock
// whose hashes are laid out differently (a read-write lock's has 'mode'),
// the first time with every reply of its acquire lost, so that the
// acquire runs in Redis and is left to settle, and with every settlement
// lost until the settler gives up: a hold of the first kind that nobody
// has (a stray). Then the same owner asks for the second kind. Per pair of
// kinds (first, second) of different layouts, RLOCK_FAILOVERS rounds
// (default 1). What must hold:
//   - the second kind is never granted beside another owner's live hold
//     it excludes (a plain or fair lock beside a reader);
//   - a Held's kind matches the hash it holds: a read Held in a hash with
//     'mode', a plain or fair one in a hash without.
//
// At 841bfb0 the stray was adopted as the second kind in every pair.
func TestMixedKindsOneOwner(t *testing.T) {
	rounds := failovers(t, 1)
	srv := integration.Redis(t, integration.Options{})
	const lease = time.Second
	for _, first := range lockKinds {
		for _, second := range lockKinds {
			if first.rw == second.rw {
				continue
			}
			t.Run(first.name+"-then-"+second.name, func(t *testing.T) {
				for r := range rounds {
					out, err := mixedRound(t, srv, first, second, lease, r)
					if err != nil {
						t.Errorf("round %d: %v", r, err)
						continue
					}
					t.Logf("round %d: the %s Lock after a %s stray: %s", r, second.name, first.name, out)
				}
			})
		}
	}
}

// mixedRound runs one round of TestMixedKindsOneOwner and returns what
// the second Lock did, or what went wrong.
func mixedRound(t *testing.T, srv *integration.Server, first, second kindOf, lease time.Duration, r int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("%s:%d:%d", t.Name(), time.Now().UnixNano(), r)
	c, err := lock.New(ctx, lock.Config{Addrs: []string{srv.Addr()}, WatchdogTimeout: lease, CommandTimeout: 100 * time.Millisecond})
	if err != nil {
		return "", err
	}
	defer closeClient(c)
	others, err := lock.New(ctx, lock.Config{Addrs: []string{srv.DirectAddr()}})
	if err != nil {
		return "", err
	}
	defer closeClient(others)
	rc := rawClient(t, srv)

	// Another owner holds the first kind where it can share (a reader);
	// beside a plain or fair stray nobody else can hold.
	var y *lock.Held
	if first.rw {
		if y, err = first.mutex(others, name).Lock(ctx); err != nil {
			return "", fmt.Errorf("the other owner's %s: %w", first.name, err)
		}
		defer unlock(ctx, y)
	}

	acq, err := srv.Inject(integration.Rule{Match: acquireOf(name), Action: integration.DropReply, Times: math.MaxInt})
	if err != nil {
		return "", err
	}
	set, err := srv.Inject(integration.Rule{Match: settleOf(name), Action: integration.DropReply, Times: math.MaxInt})
	if err != nil {
		acq.Remove()
		return "", err
	}
	x := lock.WithOwner(ctx)
	sent := time.Now()
	fctx, fcancel := context.WithTimeout(x, lease/2)
	_, ferr := first.mutex(c, name).Lock(fctx)
	fcancel()
	acq.Remove()
	// The settler works on the request until its lease must have run out,
	// plus one CommandTimeout; it has no signal of its own.
	time.Sleep(time.Until(sent.Add(lease + 300*time.Millisecond)))
	set.Remove()
	if ferr == nil {
		return "", fmt.Errorf("the %s Lock was granted with every reply lost", first.name)
	}

	sctx, scancel := context.WithTimeout(x, lease)
	defer scancel()
	h, err := second.mutex(c, name).Lock(sctx)
	if err != nil {
		if errors.Is(err, lock.ErrNotAcquired) || errors.Is(err, lock.ErrUnavailable) {
			return "refused: " + err.Error(), nil // or waited out its ctx: safe
		}
		return "", fmt.Errorf("the %s Lock: %w", second.name, err)
	}
	defer unlock(ctx, h)
	var problems []string
	if y != nil && y.Context().Err() == nil && !second.rw {
		problems = append(problems, fmt.Sprintf("double grant: a %s lock was granted while another owner's %s Held is live", second.name, first.name))
	}
	mode, err := rc.Do(ctx, rc.B().Hget().Key(name).Field("mode").Build()).ToString()
	hasMode := err == nil
	if err != nil && !rueidis.IsRedisNil(err) {
		return "", err
	}
	if hasMode != second.rw {
		problems = append(problems, fmt.Sprintf("a %s Held on a hash laid out for another kind (mode %q)", second.name, mode))
	}
	if len(problems) > 0 {
		return "", errors.New(strings.Join(problems, "; "))
	}
	return "granted, alone on a hash of its own layout", nil
}

// acquireOf matches an acquire script of the lock called name: an EVALSHA
// that names it and is neither a renewal, a settlement nor a release.
func acquireOf(name string) integration.MatchFunc {
	return func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && slices.Contains(cmd, name) &&
			cmd[1] != reentrant.RenewScript.SHA1() && cmd[1] != reentrant.SettleScript.SHA1() &&
			!slices.Contains(cmd, "PUBLISH") && !slices.Contains(cmd, "SPUBLISH")
	}
}

// settleOf matches a settlement of a request on the lock called name.
func settleOf(name string) integration.MatchFunc {
	return func(cmd []string) bool {
		return len(cmd) > 3 && strings.EqualFold(cmd[0], "EVALSHA") && cmd[1] == reentrant.SettleScript.SHA1() && slices.Contains(cmd, name)
	}
}
