package multilock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlock-go/rlock/internal/line"
	"github.com/rlock-go/rlock/lock"
)

// The local queue.
//
// Waiters of this process for one multi-master lock — the same lock names
// on the same Clients, whatever *Lock value they call, in whatever order
// its Mutexes were given — wait in one FIFO queue, an entry of the
// package's registry keyed by those (Client, name) pairs. Only the head
// runs rounds, so the process sends one contender per name to every
// master, however many goroutines wait, and its own waiters never split
// the votes among themselves. The head sleeps on the queue's one
// subscription to the masters' unlock channels (see wait.go).
//
// The entry also counts this process's live acquisitions of the lock
// (Helds, re-entries and TryLocks that did not queue included). While one
// is live the head of a lock whose members are not all read halves runs
// no round, which could only be refused (readers share: their head runs
// its rounds as another process's reader would, R3-4): it waits
// for the last of them to end (Unlock, or loss) and then runs one at
// once, without waiting for the masters' unlock messages. So the next
// local waiter takes the lock one round after the local holder let it go.
//
// When the head leaves (acquired, gave up, its ctx ended), the next
// member becomes head and runs a round at once: a wake-up the old head
// took with it is not lost. The queue's waiters take no wake-up from other
// waiters of the same channels on the same Client (a plain lock's, another
// queue's: pubsub.Hub.Observe), so nothing is passed on.
//
// A re-entry (the call's owner holds the lock on some master) and a
// TryLock without Wait do not queue: the first holds the lock already,
// the second asks only whether it is free now.
//
// An entry lives while it has members or live acquisitions, and is
// dropped from the registry with the last of them; the last member out
// closes the subscription (in the background).

// registry holds the entries of the locks that have waiters or live
// acquisitions in this process.
var registry = struct {
	mu sync.Mutex
	m  map[string]*entry
}{m: make(map[string]*entry)}

// entry is one multi-master lock's queue and live acquisitions in this
// process. refs is guarded by registry.mu, the rest by mu.
type entry struct {
	key    string
	shared bool // its members are read halves: a live acquisition does not hold the head back
	refs   int  // members and live acquisitions

	mu    sync.Mutex
	line  line.Line
	ws    *watches      // the queue's subscription, opened by a head
	holds int           // live acquisitions of this process
	freed chan struct{} // while holds > 0: closed when it falls to 0
	kick  chan struct{} // a local release, for a sleeping head (buffer 1)
}

// keyOf computes the registry key of the Lock's masters and their
// canonical order: sorted by Client, kind and name, so that Locks given
// the same Mutexes in another order share one queue, and Locks of other
// kinds on the same names (a read and a write half) do not. It also
// notes whether every member is shared (read halves).
func (l *Lock) keyOf() {
	type km struct {
		k string
		i int
	}
	ks := make([]km, len(l.ms))
	for i, m := range l.ms {
		d := core.Describe(m)
		kind, shared := d.Kind, d.Shared
		ks[i] = km{fmt.Sprintf("%p %s %d:%s", m.Client(), kind, len(m.Name()), m.Name()), i}
		if i == 0 || !shared {
			l.shared = shared
		}
	}
	slices.SortFunc(ks, func(a, b km) int { return cmp.Compare(a.k, b.k) })
	l.canon = make([]int, len(l.ms))
	l.cms = make([]*lock.Mutex, len(l.ms))
	l.caddrs = make([]string, len(l.ms))
	keys := make([]string, len(l.ms))
	for pos, x := range ks {
		l.canon[x.i] = pos
		l.cms[pos] = l.ms[x.i]
		l.caddrs[pos] = l.addrs[x.i]
		keys[pos] = x.k
	}
	l.key = strings.Join(keys, "\n")
}

// ref returns the Lock's entry, creating it, with one more reference.
func (l *Lock) ref() *entry {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	e := registry.m[l.key]
	if e == nil {
		e = &entry{key: l.key, shared: l.shared, kick: make(chan struct{}, 1)}
		registry.m[l.key] = e
	}
	e.refs++
	return e
}

// unref drops a reference; the last one drops the entry.
func (e *entry) unref() {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	e.refs--
	if e.refs == 0 && registry.m[e.key] == e {
		delete(registry.m, e.key)
	}
}

// join queues the caller last.
func (l *Lock) join() (*entry, *line.Member) {
	e := l.ref()
	e.mu.Lock()
	mb := e.line.Join()
	e.mu.Unlock()
	return e, mb
}

// leave removes mb; the next member becomes head. The last member out
// closes the subscription.
func (e *entry) leave(mb *line.Member) {
	e.mu.Lock()
	var ws *watches
	if e.line.Leave(mb) {
		ws, e.ws = e.ws, nil
	}
	e.mu.Unlock()
	ws.close()
	e.unref()
}

// errWaitOver ends a queued TryLock whose wait ran out before its turn.
var errWaitOver = errors.New("wait over")

// turn waits until mb heads the queue and no acquisition of this process
// holds the lock (a read lock's: only until mb heads the queue, since
// readers share). It reports whether it waited for such an acquisition
// to end, and returns ctx's error, or errWaitOver when expired fires
// first.
func (e *entry) turn(ctx context.Context, mb *line.Member, expired <-chan time.Time) (bool, error) {
	if !mb.IsHead() {
		select {
		case <-mb.Head():
		case <-ctx.Done():
			return false, ctx.Err()
		case <-expired:
			return false, errWaitOver
		}
	}
	waited := false
	for !e.shared {
		e.mu.Lock()
		freed := e.freed
		e.mu.Unlock()
		if freed == nil {
			return waited, nil
		}
		waited = true
		select {
		case <-freed:
		case <-ctx.Done():
			return waited, ctx.Err()
		case <-expired:
			return waited, errWaitOver
		}
	}
	return false, nil
}

// subscription returns the queue's subscription, opening it (bounded by
// timeout, see Lock.watch) when the head is the first to need it.
func (e *entry) subscription(ctx context.Context, l *Lock, timeout time.Duration) *watches {
	e.mu.Lock()
	ws := e.ws
	e.mu.Unlock()
	if ws != nil {
		return ws
	}
	ws = l.watch(ctx, timeout)
	e.mu.Lock()
	if old := e.ws; old != nil { // not expected: only the head subscribes
		e.mu.Unlock()
		ws.close() // does not block: its UNSUBSCRIBEs go out on workers
		return old
	}
	e.ws = ws
	e.mu.Unlock()
	return ws
}

// current returns the queue's subscription, nil before a head opened it.
func (e *entry) current() *watches {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ws
}

// hold records h, an acquisition of l by this process, until h's context
// ends (Unlock, loss) or Unlock drops it.
func (l *Lock) hold(h *Held) {
	e := l.ref()
	e.mu.Lock()
	if e.holds == 0 {
		e.freed = make(chan struct{})
	}
	e.holds++
	e.mu.Unlock()
	var once sync.Once
	drop := func() { once.Do(e.unhold) }
	stop := context.AfterFunc(h.ctx, drop)
	h.unhold = func() {
		stop()
		drop()
	}
}

// unhold ends one live acquisition; the last one wakes the head.
func (e *entry) unhold() {
	e.mu.Lock()
	e.holds--
	if e.holds == 0 {
		close(e.freed)
		e.freed = nil
		select {
		case e.kick <- struct{}{}:
		default:
		}
	}
	e.mu.Unlock()
	e.unref()
}
