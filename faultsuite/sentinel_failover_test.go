package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

// The fault kinds of TestFailoverSentinel.
const (
	// sentinelKill kills the master (SIGKILL) the moment Lock returns.
	sentinelKill = "kill"
	// sentinelPause stops the master (SIGSTOP) the moment Lock returns.
	sentinelPause = "pause"
	// sentinelMinority partitions the master away; a client on its side
	// of the partition (its DirectAddr, no sentinel) then asks for the
	// lock, and so does one through the sentinels once a replica is
	// promoted.
	sentinelMinority = "partition-acquire"
	// sentinelHold partitions the master away while a client through the
	// sentinels holds the lock with a short lease; another asks for the
	// lock on the promoted replica.
	sentinelHold = "partition-hold"
)

const (
	// sentinelDownAfter is the sentinels' DownAfter here: a second, so
	// that a failover takes about three; the harness's default of 2s
	// guards against failovers nobody asked for, which cost a round
	// nothing here (the suite judges what the clients saw).
	sentinelDownAfter = time.Second
	// sentinelLease is the lease of every hold but sentinelHold's: long
	// enough to outlast a failover, so that a hold is kept or granted
	// twice, never simply expired.
	sentinelLease = 10 * time.Second
	// holdLease is sentinelHold's: about as long as a failover, so that
	// the holder either renews on the promoted replica in time or is
	// told of its loss.
	holdLease = 3 * time.Second
)

// TestFailoverSentinel is TestFailover on a Sentinel deployment: one
// master, two replicas, three sentinels on loopback, each server behind
// a fault proxy that the sentinels, the replicas and the clients go
// through. Per fault kind and replica sync setting, RLOCK_FAILOVERS
// rounds (default 1):
//
//   - kill, pause: the master is learnt from the sentinels before Lock
//     and killed or paused the moment Lock returns; once the sentinels
//     promote a replica, another client asks for the lock there.
//   - partition-acquire: the master is partitioned away from the
//     sentinels, its replicas and the clients behind its proxy; a client
//     on its side (its DirectAddr), which has used it before, asks for
//     the lock there. With replica sync, it must be refused (the master
//     had replicas and reaches none); then a client through the
//     sentinels takes the lock on the promoted replica.
//   - partition-hold: a client through the sentinels holds the lock with
//     a lease of 3s when its master is partitioned away; another client
//     waits for the lock on the promoted replica. The holder must be told
//     of its loss (ErrLockLost) before the other's winning attempt was
//     even sent, or renew on the promoted replica and keep the hold.
//
// Every round ends with the old master healed, restarted or resumed and
// made a replica of the new one (Rejoin). Double grants with replica sync
// fail the test; without it they are counted and reported.
func TestFailoverSentinel(t *testing.T) {
	rounds := failovers(t, 1)
	for _, kind := range []string{sentinelKill, sentinelPause, sentinelMinority, sentinelHold} {
		for _, sync := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/sync=%v", kind, sync), func(t *testing.T) {
				g := integration.RedisSentinel(t, integration.SentinelOptions{Proxied: true, DownAfter: sentinelDownAfter})
				var tally failoverTally
				start := time.Now()
				for r := range rounds {
					if err := sentinelRound(t, g, kind, sync, r, &tally); err != nil {
						t.Fatalf("failover %d: %v%s", r, err, g.Logs(30))
					}
				}
				t.Logf("%s, sync=%v: %d failovers in %v: %d double grants, %d losses told before the other grant, %d holds kept, %d minority attempts refused",
					kind, sync, tally.rounds, time.Since(start).Round(time.Second), tally.doubleGrants, tally.toldFirst, tally.kept, tally.refused)
				if sync && tally.doubleGrants > 0 {
					t.Errorf("%d double grants across %d failovers with replica sync", tally.doubleGrants, tally.rounds)
				}
			})
		}
	}
}

// sentinelRound runs one failover of the given kind, from a healthy group
// back to one.
func sentinelRound(t *testing.T, g *integration.SentinelGroup, kind string, sync bool, r int, tally *failoverTally) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := g.WaitHealthy(ctx); err != nil {
		return err
	}
	name := fmt.Sprintf("%s:%d:%d", t.Name(), time.Now().UnixNano(), r)
	switch kind {
	case sentinelMinority:
		return minorityRound(ctx, t, g, sync, name, r, tally)
	case sentinelHold:
		return holdRound(ctx, t, g, sync, name, r, tally)
	default:
		return crashRound(ctx, t, g, kind == sentinelKill, sync, name, r, tally)
	}
}

// sentinelConfig is a Client's configuration through g's sentinels.
func sentinelConfig(g *integration.SentinelGroup, sync bool, lease time.Duration) lock.Config {
	cfg := lock.Config{MasterSet: g.MasterSet(), Addrs: g.SentinelAddrs(), WatchdogTimeout: lease}
	if !sync {
		cfg.ReplicaSyncTimeout = -1
	}
	return cfg
}

// closeClient closes c with a fresh, bounded context.
func closeClient(c *lock.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// lockOnMaster makes a holder Client with cfg, learns the master, and
// takes the lock: the master is known before Lock, so that nothing comes
// between the grant and a fault on it. The Client is returned (to close)
// whenever it was made.
func lockOnMaster(ctx context.Context, g *integration.SentinelGroup, cfg lock.Config, name string) (*lock.Client, *integration.Server, *lock.Held, error) {
	holder, err := lock.New(ctx, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := g.Master(ctx)
	if err != nil {
		return holder, nil, nil, err
	}
	h, err := holder.Mutex(name).Lock(ctx)
	if err != nil {
		return holder, nil, nil, fmt.Errorf("holder: %w", err)
	}
	return holder, m, h, nil
}

// unlock releases h with a bounded context, whatever became of it.
func unlock(ctx context.Context, h *lock.Held) {
	if h == nil {
		return
	}
	uctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_ = h.Unlock(uctx)
}

// crashRound kills (kill) or pauses the master the moment Lock returns,
// and judges another client's attempt on the promoted replica.
func crashRound(ctx context.Context, t *testing.T, g *integration.SentinelGroup, kill, sync bool, name string, r int, tally *failoverTally) error {
	holder, m, h, err := lockOnMaster(ctx, g, sentinelConfig(g, sync, sentinelLease), name)
	if holder != nil {
		defer closeClient(holder)
	}
	if err != nil {
		return err
	}
	if kill {
		err = m.Kill(ctx)
	} else {
		err = m.Pause(ctx)
	}
	if err != nil {
		return err
	}
	if _, err := g.WaitNewMaster(ctx, m); err != nil {
		return err
	}
	other, err := lock.New(ctx, sentinelConfig(g, true, sentinelLease))
	if err != nil {
		return err
	}
	defer closeClient(other)
	if err := tally.judge(ctx, t, h, other.Mutex(name), r); err != nil {
		return err
	}
	unlock(ctx, h)
	if kill {
		err = m.Restart(ctx, integration.RestartOptions{KeepData: true})
	} else {
		err = m.Resume(ctx)
	}
	if err != nil {
		return err
	}
	_, err = g.Rejoin(ctx, m)
	return err
}

// minorityRound partitions the master away; a client on its side, which
// has used it with its replicas, asks for the lock there, then a client
// through the sentinels asks on the promoted replica.
func minorityRound(ctx context.Context, t *testing.T, g *integration.SentinelGroup, sync bool, name string, r int, tally *failoverTally) error {
	m, err := g.Master(ctx)
	if err != nil {
		return err
	}
	var loss lossClock
	cfg := lock.Config{Addrs: []string{m.DirectAddr()}, WatchdogTimeout: sentinelLease, Observer: loss.observer()}
	if !sync {
		cfg.ReplicaSyncTimeout = -1
	}
	minority, err := lock.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeClient(minority)
	// A Client that ran before the partition: it has seen the master
	// with its replicas.
	before, err := minority.Mutex(name + ":before").Lock(ctx)
	if err != nil {
		return fmt.Errorf("minority, before the partition: %w", err)
	}
	if err := before.Unlock(ctx); err != nil {
		return fmt.Errorf("minority, before the partition: %w", err)
	}
	if old, err := g.PartitionMaster(ctx); err != nil || old != m {
		return fmt.Errorf("partitioned %v (%v), want the master %s", old, err, m.Addr())
	}
	mh, merr := minority.Mutex(name).TryLock(ctx)
	defer unlock(ctx, mh)
	if _, err := g.WaitNewMaster(ctx, m); err != nil {
		return err
	}
	majority, err := lock.New(ctx, sentinelConfig(g, sync, sentinelLease))
	if err != nil {
		return err
	}
	defer closeClient(majority)
	oh, err := majority.Mutex(name).TryLock(ctx)
	if err != nil {
		return fmt.Errorf("majority, on the promoted replica: %w", err)
	}
	tally.rounds++
	switch {
	case merr == nil:
		// Granted on the minority side: it counts unless the holder was
		// told of its loss before the majority's grant was sent.
		if !loss.before(oh.AcquiredAt()) {
			tally.doubleGrants++
			t.Logf("failover %d: double grant: the minority side's acquire was sent at %s, the majority's at %s; the minority was %v",
				r, mh.AcquiredAt().Format(time.StampMicro), oh.AcquiredAt().Format(time.StampMicro), &loss)
		} else {
			tally.toldFirst++
		}
	case errors.Is(merr, lock.ErrUnavailable):
		tally.refused++
	default:
		return fmt.Errorf("minority: %w", merr)
	}
	unlock(ctx, oh)
	if err := m.Heal(ctx); err != nil {
		return err
	}
	_, err = g.Rejoin(ctx, m)
	return err
}

// holdRound partitions the master away while a client through the
// sentinels holds the lock with holdLease, and judges another client's
// wait for the lock on the promoted replica.
func holdRound(ctx context.Context, t *testing.T, g *integration.SentinelGroup, sync bool, name string, r int, tally *failoverTally) error {
	var loss lossClock
	cfg := sentinelConfig(g, sync, holdLease)
	cfg.Observer = loss.observer()
	holder, m, h, err := lockOnMaster(ctx, g, cfg, name)
	if holder != nil {
		defer closeClient(holder)
	}
	if err != nil {
		return err
	}
	defer unlock(ctx, h)
	if old, err := g.PartitionMaster(ctx); err != nil || old != m {
		return fmt.Errorf("partitioned %v (%v), want the master %s", old, err, m.Addr())
	}
	if _, err := g.WaitNewMaster(ctx, m); err != nil {
		return err
	}

	other, err := lock.New(ctx, sentinelConfig(g, true, holdLease))
	if err != nil {
		return err
	}
	defer closeClient(other)
	// Two leases: a hold the holder could not renew has run out by then.
	wctx, cancel := context.WithTimeout(ctx, 2*holdLease)
	oh, oerr := other.Mutex(name).Lock(wctx)
	granted, alive := time.Now(), h.Context().Err()
	cancel()
	tally.rounds++
	switch {
	case oerr == nil && loss.before(oh.AcquiredAt()):
		if cause := context.Cause(h.Context()); !errors.Is(cause, lock.ErrLockLost) {
			return fmt.Errorf("the holder was told, with cause %v, not ErrLockLost", cause)
		}
		tally.toldFirst++
	case oerr == nil:
		tally.doubleGrants++
		t.Logf("failover %d: double grant: the holder's acquire was sent at %s (lease %v), the other's winning attempt at %s, returned at %s with the holder's context %v; the holder was %v",
			r, h.AcquiredAt().Format(time.StampMicro), holdLease, oh.AcquiredAt().Format(time.StampMicro), granted.Format(time.StampMicro), alive, &loss)
	case errors.Is(oerr, lock.ErrNotAcquired) && wctx.Err() != nil && h.Context().Err() == nil:
		tally.kept++ // renewed on the promoted replica throughout
	default:
		return fmt.Errorf("other: %w; the holder's context: %v", oerr, context.Cause(h.Context()))
	}
	unlock(ctx, oh)
	if err := m.Heal(ctx); err != nil {
		return err
	}
	_, err = g.Rejoin(ctx, m)
	return err
}

// lossClock records when a Client's Observer heard of its first loss. The
// Loss event comes after the Held's context was cancelled, so the time is
// never earlier than the holder was told.
type lossClock struct {
	mu sync.Mutex
	t  time.Time
	e  observe.Loss
}

func (l *lossClock) observer() *observe.Observer {
	return &observe.Observer{Loss: func(_ context.Context, e observe.Loss) {
		now := time.Now()
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.t.IsZero() {
			l.t, l.e = now, e
		}
	}}
}

// String describes the first loss, for a log line.
func (l *lossClock) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.t.IsZero() {
		return "not told yet"
	}
	return fmt.Sprintf("told at %s (%s: %s)", l.t.Format(time.StampMicro), l.e.Kind, l.e.Reason)
}

// at returns when the first loss was heard of, and whether one was.
func (l *lossClock) at() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t, !l.t.IsZero()
}

// before reports whether a loss was heard of before t.
func (l *lossClock) before(t time.Time) bool {
	at, ok := l.at()
	return ok && at.Before(t)
}
