package faultsuite

import (
	"context"
	"fmt"
	"time"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
	"github.com/rlock-go/rlock/observe"
)

// The multi topology: Redisson's getMultiLock(a, b, c), a
// multilock.NewMultiLock over nNames lock names of one lock.Client on one
// master, all or nothing. Every worker but the last takes the MultiLock
// over the round's names; the last takes a plain fenced lock.Mutex of one
// of them (the next name at each hold), since a MultiLock's name is also
// the plain lock of that name, on a Client of its own. Worker modes (shared
// owners, re-entries, owner contexts, tight timeouts, Clients closed while
// holding) and the proxy's lost and delayed commands act on either.
//
// The history records one holding per name a hold covers: a MultiLock's
// acquisition is nNames holdings of one owner, one per name, with that
// name's own token (Held.FenceOf), which share its writes (one per name,
// each checked against that name's resource), its loss signal and its
// Unlock. The checks then run per name, as on a single master: no two
// live holders of any one name (double grants), no loss of a name
// unsignalled, fencing per name, hold counts per name read from Redis,
// and each name's history linearizable in the model of a lock.
const nNames = 3

// lockNames returns the names a round of topo locks, from the round's
// unique name: nNames for the multi topology, the name itself otherwise.
func lockNames(name string, topo topology) []string {
	if !topo.multi {
		return []string{name}
	}
	ns := make([]string, nNames)
	for i := range ns {
		ns[i] = fmt.Sprintf("%s:%c", name, 'a'+i)
	}
	return ns
}

// names are the round's lock names.
func (r *round) names() []string { return lockNames(r.name, r.topo) }

// span is one name a hold covers: its index in the round's names and the
// token the hold has for it.
type span struct {
	lock  int
	token uint64
}

// plainWorker reports whether worker id takes plain Mutexes of single
// names in the multi topology.
func plainWorker(id int) bool { return id == nWorkers-1 }

// multiLocker is the multi topology's locker on the Client c: the
// MultiLock over the names of name, or, for the plain worker, a fenced
// Mutex of one of them (each call the next).
func (w *worker) multiLocker(c *lock.Client, name string) locker {
	ns := lockNames(name, topology{multi: true})
	if plainWorker(w.id) {
		i := int(w.turn.Add(1) % nNames)
		return single{m: c.Mutex(ns[i]), idx: i}
	}
	ms := make([]*lock.Mutex, len(ns))
	for i, n := range ns {
		ms[i] = c.Mutex(n)
	}
	return multi{l: multilock.NewMultiLock(ms...), names: ns, obs: w.sink.roundObserver(w.id)}
}

// multi is a MultiLock over the round's names of one Client.
type multi struct {
	l     *multilock.Lock
	names []string
	obs   *observe.Observer
}

func (m multi) lock(ctx context.Context, blocking bool, lease time.Duration) (held, error) {
	return redlock{l: m.l, obs: m.obs}.lock(ctx, blocking, lease)
}

func (multi) multilock() bool { return true }

// spans are every name with its own token.
func (m multi) spans(h held) []span {
	mh := h.(*multilock.Held)
	out := make([]span, len(m.names))
	for i, n := range m.names {
		out[i] = span{lock: i, token: mh.FenceOf(n)}
	}
	return out
}

// byLock returns the holdings and reads of the round's name i: the part
// of the history the checks of a lock of one name see.
func byLock(hs []holding, reads []countRead, i int) ([]holding, []countRead) {
	var ph []holding
	for _, h := range hs {
		if h.lock == i {
			ph = append(ph, h)
		}
	}
	var pr []countRead
	for _, r := range reads {
		if r.lock == i {
			pr = append(pr, r)
		}
	}
	return ph, pr
}
