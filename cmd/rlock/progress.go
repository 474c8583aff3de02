package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

// What rlock run says while it waits for a lock.
//
// A waitWatch starts with the Lock call and wakes when the first attempt
// failed (observe.Observer.Waiting for one master, a failed round for
// several). It then reads the holders and their TTL (lookAt: HGETALL and
// PTTL, one round trip per master) at once and every progressInterval:
// with --verbose it prints a line each time, and the looks let the busy
// message say whether the holder's lease is renewed (leaseNote). It is
// read-only and never takes part in acquiring: the lock still waits on
// Redisson's unlock channel.

// progressInterval is how often a waiting rlock reads the holder again,
// and with --verbose says it still waits.
const progressInterval = 5 * time.Second

// lookTimeout bounds one look at the holders.
const lookTimeout = 2 * time.Second

// waitHook passes the Waiting events of every Client of the run to the
// current waitWatch, if any. The Observer is fixed when the Clients are
// made, the watch only later.
type waitHook struct {
	w atomic.Pointer[waitWatch]
}

// observer returns base with Waiting also reported to h.
func (h *waitHook) observer(base *observe.Observer) *observe.Observer {
	var o observe.Observer
	if base != nil {
		o = *base
	}
	prev := o.Waiting
	o.Waiting = func(ctx context.Context, e observe.Waiting) {
		if prev != nil {
			prev(ctx, e)
		}
		if w := h.w.Load(); w != nil {
			w.waiting(e)
		}
	}
	return &o
}

// waitWatch watches one wait for the lock. The Observer's callbacks
// (waiting) must not block: they only signal the watch's goroutine or
// print a line.
type waitWatch struct {
	name    string
	lk      locker
	verbose bool
	out     io.Writer
	start   time.Time

	startOnce sync.Once
	started   chan struct{} // closed when the first attempt failed
	done      chan struct{} // closed by stop
	ctx       context.Context
	cancel    context.CancelFunc // ends a look in flight at stop
	wg        sync.WaitGroup

	// abort ends the wait when a look finds the key is not a lock
	// (waiting cannot make it one); nil for several masters, whose
	// quorum decides.
	abort func(error)

	mu    sync.Mutex
	first []look // the first look, once taken
}

// startWatch starts watching a wait for lk's lock; stop ends it.
func startWatch(name string, lk locker, verbose bool, out io.Writer, abort func(error)) *waitWatch {
	w := &waitWatch{
		name: name, lk: lk, verbose: verbose, out: out, start: time.Now(), abort: abort,
		started: make(chan struct{}), done: make(chan struct{}),
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.run()
	}()
	return w
}

// waiting is observe.Observer.Waiting: the first one starts the watch; one
// with Err (a blocking wait riding out an outage) is said at once.
func (w *waitWatch) waiting(e observe.Waiting) {
	if e.Err != nil {
		if w.verbose {
			fmt.Fprintln(w.out, prefixed(fmt.Sprintf("lock %q: %s unreachable, trying again in %v: %v", w.name, e.Addr, roundDur(e.TTL), e.Err)))
		}
		return
	}
	w.began()
}

// began marks the first failed attempt.
func (w *waitWatch) began() { w.startOnce.Do(func() { close(w.started) }) }

// stop ends the watch and waits for its goroutine.
func (w *waitWatch) stop() {
	w.cancel()
	close(w.done)
	w.wg.Wait()
}

// firstLooks returns the first looks, nil if none was taken.
func (w *waitWatch) firstLooks() []look {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

func (w *waitWatch) run() {
	select {
	case <-w.started:
	case <-w.done:
		return
	}
	ctx := w.ctx
	first := w.look(ctx)
	w.mu.Lock()
	w.first = first
	w.mu.Unlock()
	if err := notLockError(w.name, first); err != nil && w.abort != nil {
		w.abort(err)
		return
	}
	if w.verbose {
		fmt.Fprintln(w.out, prefixed(fmt.Sprintf("waiting for lock %q: %s", w.name, holdersLine(first, first))))
	}
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			now := w.look(ctx)
			if err := notLockError(w.name, now); err != nil && w.abort != nil {
				w.abort(err)
				return
			}
			if w.verbose {
				fmt.Fprintln(w.out, prefixed(fmt.Sprintf("still waiting for lock %q after %v: %s",
					w.name, roundDur(time.Since(w.start)), holdersLine(first, now))))
			}
		case <-w.done:
			return
		}
	}
}

func (w *waitWatch) look(ctx context.Context) []look {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	return w.lk.looks(ctx)
}

// holdersLine says who holds the lock and what its lease means, from a
// first and a last look on each master.
func holdersLine(first, last []look) string {
	var parts []string
	for i, l := range last {
		var s string
		switch {
		case l.err != nil:
			s = "holder unknown: " + l.err.Error()
		default:
			s = "held by " + l.holders()
			f := l
			if i < len(first) && first[i].addr == l.addr {
				f = first[i]
			}
			if note := leaseNote(f, l); note != "" {
				s += "; " + note
			}
		}
		if len(last) > 1 {
			s = "on " + l.addr + ": " + s
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// notLockError is lock.ErrNotLock, saying why, when the one look says
// the key is not a lock; nil otherwise (and for several masters, whose
// quorum error says what each master did).
func notLockError(name string, looks []look) error {
	if len(looks) != 1 || looks[0].notLock == "" {
		return nil
	}
	return fmt.Errorf("%w: %q is %s: it holds other data under this name; lock another name", lock.ErrNotLock, name, looks[0].notLock)
}

// sayMasterMoves returns base with Renew also saying on out, once per
// change, that the master the watchdog renews on is another (a Sentinel
// failover moved it): for --verbose with one Sentinel Client, whose
// renewals follow the master. The master it compares with first is the
// one given to from (the Client's when it was made), so a failover
// before the first renewal is said too. It must not block: it prints a
// line.
func sayMasterMoves(base *observe.Observer, name string, out io.Writer) (o *observe.Observer, from func(addr string)) {
	o = new(observe.Observer)
	if base != nil {
		*o = *base
	}
	prev := o.Renew
	var mu sync.Mutex
	last := ""
	from = func(addr string) {
		mu.Lock()
		if last == "" {
			last = addr
		}
		mu.Unlock()
	}
	o.Renew = func(e observe.Renew) {
		if prev != nil {
			prev(e)
		}
		mu.Lock()
		was := last
		last = e.Addr
		mu.Unlock()
		if was != "" && e.Addr != was {
			fmt.Fprintln(out, prefixed(fmt.Sprintf("lock %q: master moved from %s to %s (a Sentinel failover); the watchdog renews it there", name, was, e.Addr)))
		}
	}
	return o, from
}
