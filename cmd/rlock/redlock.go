package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/observe"
)

// A lock over several independent masters: a RedLock (a majority of
// them) or, with --all, a MultiLock (every one), one lock.Client per
// master, all with the same credentials and TLS settings.
//
// Connecting: every master is dialled in parallel, each bounded by
// dialTimeout (a stopped master that accepts the connection but never
// answers takes that long). The masters that could not be reached are
// named on stderr, and the lock goes on without them as long as the
// quorum of ALL the masters given is still reachable: a RedLock on 5
// masters needs 3 reachable, a MultiLock all 5. Otherwise rlock exits 69
// (77 if a master refused the credentials) before trying the lock: the
// quorum could not be had.
//
// Going on without some masters must not weaken the quorum: it stays a
// majority of all the masters given, not of those reached. With r of n
// masters reached and q = n/2+1 needed, the lock is a RedLock on the r
// when its own majority, r/2+1, is still q (r = n, or r = n-1 with n odd),
// and a MultiLock on the r otherwise — every reached master must grant,
// which is q or more. (For 5 masters: 4 reached need 3 of them, 3 reached
// need all 3.) Either way a holder holds a majority of the n, so two
// holders cannot coexist, and the fencing token written back to that
// majority keeps tokens increasing for every later quorum. Masters that
// come back during the run are not used: this run has no Client for them.

// multiCommandTimeout is each master's lock.Config.CommandTimeout. A
// round counts only the answers that come within its per-master timeout
// (at most 200ms), so waiting longer for one helps nothing; but an attempt
// still out on a stopped master holds its Client's Close — and so rlock's
// exit — for up to twice this (the attempt, then the release that undoes
// it), against lock.Config.CommandTimeout (3s by default) for one master.
const multiCommandTimeout = time.Second

// masterNeed returns how many of n masters must grant the lock.
func masterNeed(n int, all bool) int {
	if all {
		return n
	}
	return n/2 + 1
}

// lockKind names the lock for messages.
func lockKind(n int, all bool) string {
	switch {
	case n == 1:
		return "lock"
	case all:
		return "MultiLock"
	}
	return "RedLock"
}

// newMultiLocker connects to the masters of cfg and builds the lock.
//
// May return errors matching lock.ErrUnavailable or lock.ErrAuth (too few
// masters reached: the joined errors of those that were not), or
// lock.ErrInvalid.
func newMultiLocker(ctx context.Context, cfg lockerConfig) (locker, error) {
	n := len(cfg.masters)
	need, kind := masterNeed(n, cfg.all), lockKind(n, cfg.all)
	cs := make([]*lock.Client, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range cfg.masters {
		lc := cfg.clientConfig(i)
		// At most multiCommandTimeout, and less for a short lease (the
		// Client's own default then applies).
		if wd := lc.WatchdogTimeout; wd == 0 || multiCommandTimeout+max(lc.RenewInterval, wd/3) < wd {
			lc.CommandTimeout = multiCommandTimeout
		}
		wg.Go(func() { cs[i], errs[i] = lock.New(ctx, lc) })
	}
	wg.Wait()

	var up []*lock.Client
	var failed []error
	for i, c := range cs {
		if errs[i] != nil {
			failed = append(failed, errs[i])
			continue
		}
		up = append(up, c)
	}
	m := &multiLocker{cs: up, name: cfg.name}
	if len(up) < need {
		_ = m.Close(context.Background()) // nothing is held: closing is prompt
		return nil, fmt.Errorf("%s on %d masters needs %d of them reachable, %d are: %w",
			kind, n, need, len(up), errors.Join(failed...))
	}
	ms := make([]*lock.Mutex, len(up))
	for i, c := range up {
		ms[i] = cfg.mutex(c)
	}
	switch {
	case cfg.all || len(up)/2+1 < need:
		m.l = multilock.NewMultiLock(ms...)
	default:
		m.l = multilock.NewRedLock(ms...)
	}
	if len(failed) > 0 {
		for _, err := range failed {
			fmt.Fprintln(errOut, prefixed("unreachable, going on without it: "+err.Error()))
		}
		fmt.Fprintln(errOut, prefixed(fmt.Sprintf(
			"%s on %d of %d masters: %d of them must grant it (a majority of all %d needs %d)",
			kind, len(up), n, m.l.Quorum(), n, need)))
	}
	return m, nil
}

// multiLocker is a locker on several masters (package multilock).
type multiLocker struct {
	cs       []*lock.Client // the masters reached, one Client each
	name     string
	l        *multilock.Lock
	held     *multilock.Held
	lease    time.Duration
	unlocked bool
}

func (m *multiLocker) Lock(ctx context.Context, o lockOptions) error {
	var opts []lock.Option
	if !o.noFence {
		opts = append(opts, lock.Fenced())
	}
	if o.lease > 0 {
		opts = append(opts, lock.Lease(o.lease))
	}
	if o.began != nil {
		opts = append(opts, multilock.Observe(&observe.Observer{Round: func(_ context.Context, e observe.Round) {
			if !e.Acquired {
				o.began()
			}
		}}))
	}
	var h *multilock.Held
	var err error
	if o.forever {
		h, err = m.l.Lock(ctx, opts...)
	} else {
		h, err = m.l.TryLock(ctx, append(opts, lock.Wait(o.wait))...)
	}
	if err != nil {
		return err
	}
	m.held, m.lease = h, o.lease
	return nil
}

// Deadline is the end of the lock's validity: AcquiredAt (when the round
// that took it began) plus the validity computed then, lease − the
// round's duration − the clock drift allowance. It comes before any
// master's lease ends.
func (m *multiLocker) Deadline() time.Time {
	if m.held == nil || m.lease == 0 {
		return time.Time{}
	}
	return m.held.AcquiredAt().Add(m.held.Validity())
}

func (m *multiLocker) Done() <-chan struct{} {
	if m.held == nil {
		return nil
	}
	return m.held.Done()
}

// Lost returns the *lock.LostError naming the masters lost once fewer
// than the quorum still hold the lock.
func (m *multiLocker) Lost() error {
	if m.held == nil || m.unlocked {
		return nil
	}
	return lostCause(m.held.Context())
}

func (m *multiLocker) Fence() uint64 {
	if m.held == nil {
		return 0
	}
	return m.held.Fence()
}

// Unlock releases the lock on every master still holding it, in
// parallel; its error names the masters where that failed (the lock
// expires there after its lease).
func (m *multiLocker) Unlock(ctx context.Context) error {
	if m.held == nil {
		return lock.ErrNotHeld
	}
	err := m.held.Unlock(ctx)
	if err == nil {
		m.unlocked = true
	}
	return err
}

// Close closes every master's Client in parallel, each releasing what
// it still holds (bounded by ctx).
func (m *multiLocker) Close(ctx context.Context) error {
	errs := make([]error, len(m.cs))
	var wg sync.WaitGroup
	for i, c := range m.cs {
		wg.Go(func() {
			if err := c.Close(ctx); err != nil && !errors.Is(err, lock.ErrClosed) {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (m *multiLocker) Clients() []*lock.Client { return m.cs }

func (m *multiLocker) looks(ctx context.Context) []look {
	ls := make([]look, len(m.cs))
	var wg sync.WaitGroup
	for i, c := range m.cs {
		wg.Go(func() { ls[i] = lookAt(ctx, c.Redis(), c.Addr(), m.name) })
	}
	wg.Wait()
	return ls
}
