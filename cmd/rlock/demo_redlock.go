package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/observe"
)

// The demo's RedLock section: five embedded masters, every worker with a
// Client on each (like a separate process), contending for a RedLock.
// During the acquisition in the middle of the run, the worker holding the
// lock kills one master (miniredis Close: its listener and every
// connection close). It picks the master so that it keeps a majority: one
// of its own when it holds more than the quorum, else one it does not
// hold. The later acquisitions are granted by the four left.
const (
	redLockMasters = 5
	// demoReleaseTimeout bounds what waits on the killed master: the
	// release of the hold it had, and closing the Clients on it (a
	// release to a dead master is retried until its context ends).
	demoReleaseTimeout = 250 * time.Millisecond
	demoCloseTimeout   = 5 * time.Second
)

// demoKill is the fault of the RedLock section.
type demoKill struct {
	at  int // the acquisition (1-based, across workers) during which it happens
	mrs []*miniredis.Miniredis

	// Set by the killer before killed; read by others after it.
	index  int // the master killed, 1-based
	addr   string
	killed atomic.Bool

	mu    sync.Mutex
	after []int // masters holding each acquisition after the kill
}

// victim reports whether the master at addr was killed.
func (k *demoKill) victim(addr string) bool { return k.killed.Load() && addr == k.addr }

// redLockDemo runs the workers on a RedLock over redLockMasters embedded
// masters and kills one of them midway.
func redLockDemo(ctx context.Context, tl *timeline, o demoOptions, st *demoStats) (err error) {
	addrs := make([]string, redLockMasters)
	mrs := make([]*miniredis.Miniredis, redLockMasters)
	for i := range mrs {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil { // listens on 127.0.0.1, a free port
			return fmt.Errorf("starting miniredis %d: %w", i+1, err)
		}
		defer mr.Close() // a second Close, after the kill, does nothing
		mrs[i], addrs[i] = mr, mr.Addr()
	}
	tl.note("%d miniredis masters listening on %s; a RedLock needs %d of them",
		redLockMasters, strings.Join(addrs, ", "), redLockMasters/2+1)
	k := &demoKill{at: (o.workers*o.rounds + 1) / 2, mrs: mrs}

	// Every worker connects before any contends: all masters are up then.
	var rounds, retried atomic.Int64
	mobs := &observe.Observer{
		Round: func(_ context.Context, e observe.Round) {
			rounds.Add(1)
			if !e.Acquired {
				retried.Add(1)
			}
		},
		WakeUp: func(_ context.Context, e observe.WakeUp) { st.wakeUp(e.Reason) },
	}
	ws := make([]*redLockWorker, o.workers)
	defer func() {
		for _, w := range ws {
			if w != nil {
				err = errors.Join(err, w.close(k))
			}
		}
	}()
	for i := range ws {
		w, err := newRedLockWorker(ctx, i+1, addrs, o.observer)
		if err != nil {
			return err
		}
		w.obs = mobs
		ws[i] = w
	}

	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() { errs[i] = w.run(ctx, tl, st, o, k) })
	}
	wg.Wait()

	st.note("masters: %d, quorum %d; rounds of attempts: %d, of which %d short of the quorum were retried (the lock still held on some masters, or a split vote between waiters)",
		redLockMasters, redLockMasters/2+1, rounds.Load(), retried.Load())
	if k.killed.Load() {
		k.mu.Lock()
		after := "none came after it"
		if len(k.after) > 0 {
			after = fmt.Sprintf("the %d after it were held on %s masters", len(k.after), spread(k.after))
			if len(k.after) == 1 {
				after = fmt.Sprintf("the one after it was held on %s masters", spread(k.after))
			}
		}
		st.note("master %d killed during acquisition %d of %d; %s", k.index, k.at, o.workers*o.rounds, after)
		k.mu.Unlock()
	}
	return errors.Join(errs...)
}

// spread renders how many masters held the acquisitions: "4", or "3 to
// 4". ns is not empty.
func spread(ns []int) string {
	lo, hi := ns[0], ns[0]
	for _, n := range ns {
		lo, hi = min(lo, n), max(hi, n)
	}
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// redLockWorker is one worker: a Client on every master, one RedLock.
type redLockWorker struct {
	id  int
	cs  []*lock.Client
	ms  []*lock.Mutex
	l   *multilock.Lock
	obs *observe.Observer
}

func newRedLockWorker(ctx context.Context, id int, addrs []string, obs *observe.Observer) (*redLockWorker, error) {
	w := &redLockWorker{id: id}
	for _, addr := range addrs {
		c, err := lock.New(ctx, lock.Config{
			Addrs:              []string{addr},
			AlwaysRESP2:        true, // miniredis speaks RESP2 only
			ReplicaSyncTimeout: -1,   // miniredis has no replicas, nor ROLE to ask
			Observer:           obs,
		})
		if err != nil {
			return w, fmt.Errorf("worker %d: %w", id, err)
		}
		w.cs = append(w.cs, c)
		w.ms = append(w.ms, c.Mutex(demoLockName))
	}
	w.l = multilock.NewRedLock(w.ms...)
	return w, nil
}

// close closes the worker's Clients in parallel. On the killed master a
// Client may still count the hold whose release could not reach it: it
// gives up after demoReleaseTimeout, and that is no failure.
func (w *redLockWorker) close(k *demoKill) error {
	errs := make([]error, len(w.cs))
	var wg sync.WaitGroup
	for i, c := range w.cs {
		wg.Go(func() {
			dead := k.victim(c.Addr())
			d := demoCloseTimeout
			if dead {
				d = demoReleaseTimeout
			}
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			if err := c.Close(ctx); !dead {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (w *redLockWorker) run(ctx context.Context, tl *timeline, st *demoStats, o demoOptions, k *demoKill) error {
	rng := rand.New(rand.NewPCG(o.seed, uint64(w.id)))
	for range o.rounds {
		if err := w.round(ctx, tl, st, k, rng); err != nil {
			return fmt.Errorf("worker %d: %w", w.id, err)
		}
		// Time outside the lock, so that the others get a turn.
		time.Sleep(time.Duration(1+rng.IntN(4)) * time.Millisecond)
	}
	return nil
}

// round is one acquisition: lock with a fencing token, work, release.
// The acquisition k.at also kills a master while it holds the lock.
func (w *redLockWorker) round(ctx context.Context, tl *timeline, st *demoStats, k *demoKill, rng *rand.Rand) error {
	asked := time.Now()
	h, err := w.l.TryLock(ctx, lock.Wait(demoLockWait), lock.Fenced(), multilock.Observe(w.obs))
	if err != nil {
		return err
	}
	n := st.enter(w.id, h.Fence())
	tl.event(w.id, "acquired %v after asking, fence %d, held on %d of %d masters",
		round(time.Since(asked)), h.Fence(), h.Masters(), redLockMasters)
	killer := n == k.at
	hit := false // the killed master was one of ours
	switch {
	case killer:
		var kept int
		if hit, kept, err = w.kill(ctx, h, k); err != nil {
			st.leave()
			return errors.Join(err, h.Unlock(ctx))
		}
		tl.event(w.id, "killed master %d (%s), %s, while holding the lock: still held on %d, a majority",
			k.index, k.addr, map[bool]string{true: "one of its own", false: "not one of its own"}[hit], kept)
	case k.killed.Load():
		k.mu.Lock()
		k.after = append(k.after, h.Masters())
		k.mu.Unlock()
	}
	// The "work": what the lock protects.
	time.Sleep(time.Duration(2+rng.IntN(5)) * time.Millisecond)
	st.leave() // before Unlock: after it, another may hold

	if !hit {
		tl.event(w.id, "released")
		return h.Unlock(ctx)
	}
	// The release on the dead master is retried until this ends.
	uctx, cancel := context.WithTimeout(ctx, demoReleaseTimeout)
	defer cancel()
	tl.event(w.id, "releasing: the dead master %d cannot answer, the others do", k.index)
	err = h.Unlock(uctx)
	if err != nil && onlyOn(err, k.addr) {
		tl.event(w.id, "released on the %d masters alive; master %d took its copy with it", redLockMasters-1, k.index)
		return nil
	}
	return err
}

// kill kills one master while w holds h: one of the masters holding h
// when they are more than the quorum, else one not holding it, so that
// the holder keeps a majority either way. It reports whether the master
// killed held h, and on how many masters alive h is held.
//
// TryLock returned once a quorum granted; the other masters' grants join
// h as they come. kill chooses once h is settled (every master answered),
// so that no grant joins h between the hold counts read below and the
// kill: h is held on exactly the masters where its count is above 0.
func (w *redLockWorker) kill(ctx context.Context, h *multilock.Held, k *demoKill) (hit bool, kept int, err error) {
	select {
	case <-h.Settled():
	case <-ctx.Done():
		return false, 0, ctx.Err()
	}
	var mine, others []int
	for i, m := range w.ms {
		n, err := m.HoldCount(h.Context())
		if err != nil {
			return false, 0, err
		}
		if n > 0 {
			mine = append(mine, i)
		} else {
			others = append(others, i)
		}
	}
	i := -1
	switch {
	case len(mine) > w.l.Quorum():
		i, hit = mine[len(mine)-1], true
	case len(others) > 0:
		i = others[len(others)-1]
	default:
		return false, 0, fmt.Errorf("held on %d of %d masters, quorum %d: no master to kill", len(mine), len(w.ms), w.l.Quorum())
	}
	if len(mine) != h.Masters() {
		return false, 0, fmt.Errorf("held on %d masters, its hold counts found on %d: no safe choice", h.Masters(), len(mine))
	}
	k.mrs[i].Close()
	k.index, k.addr = i+1, w.cs[i].Addr()
	k.killed.Store(true)
	kept = len(mine)
	if hit {
		kept--
	}
	return hit, kept, nil
}

// onlyOn reports whether every error joined in err is a failure on the
// master at addr.
func onlyOn(err error, addr string) bool {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		me, ok := errors.AsType[*lock.MasterError](e)
		if !ok || me.Addr != addr {
			return false
		}
	}
	return len(errs) > 0
}
