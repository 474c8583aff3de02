package lock

import (
	"context"
	"sync"
	"time"

	"github.com/rlock-go/rlock/internal/line"
	"github.com/rlock-go/rlock/pubsub"
)

// A queue is the Client's line of waiters for one lock (one lock name,
// or a read-write lock's writers; its readers do not queue): they wait
// in arrival order, and only the head contends in Redis, so a process
// sends one contender per lock whatever the number of goroutines waiting
// (a call that finds no queue makes one attempt before it makes one:
// acquisition.alone).
// The head sleeps on the queue's one subscription to the lock's channel
// (an unlock message from anywhere), and is also woken at once by a
// release of this Client (kick), without waiting for its own message.
// The subscription observes the channel (pubsub.Hub.Observe): every
// message wakes it, whatever else of this Client waits on the channel
// (the queue of a name announced there too, "x" beside "{x}"; a
// multi-master lock's waiter; a read-write lock's readers), and it takes
// no wake-up from them.
// When the head leaves (acquired, gave up), the next waiter becomes head
// and makes an attempt at once, so a wake-up the old head took with it is
// never lost.
//
// Ownership: line and sub are guarded by mu; users by the waitQueues'
// mu. The subscription is opened by a head and closed by the last
// member to leave.
type queue struct {
	key   queueKey // its key in Client.queues
	name  string   // the lock's channel
	users int      // guarded by waitQueues.mu
	kick  chan struct{}

	mu   sync.Mutex
	line line.Line
	sub  *pubsub.Waiter
}

// waitQueues are a Client's queues of waiters, by lock, and what
// they wait with: the Client's subscriptions (hub), and its settlers'
// WaitGroup, which also counts the subscriptions being closed in the
// background (Close waits for them). hub and settling are set by newClient.
type waitQueues struct {
	hub      subscriber
	settling *tally
	spawn    func(f func()) // runs f on one of the Client's workers
	timeout  time.Duration  // one command's (Config.CommandTimeout)

	mu sync.Mutex
	m  map[queueKey]*queue
}

// join returns the queue of the lock name of kind p, with the caller as
// its last member.
func (qs *waitQueues) join(p *protocol, name string) (*queue, *line.Member) {
	k := p.queueKey(name)
	qs.mu.Lock()
	q := qs.m[k]
	if q == nil {
		q = &queue{key: k, name: p.channel(name), kick: make(chan struct{}, 1)}
		qs.m[k] = q
	}
	q.users++
	qs.mu.Unlock()
	q.mu.Lock()
	mb := q.line.Join()
	q.mu.Unlock()
	return q, mb
}

// leave removes mb; the next member becomes head. The last member
// out closes the subscription, off the caller's path.
func (qs *waitQueues) leave(q *queue, mb *line.Member) {
	q.mu.Lock()
	var sub *pubsub.Waiter
	if q.line.Leave(mb) {
		sub, q.sub = q.sub, nil
	}
	q.mu.Unlock()
	if sub != nil {
		qs.closeSub(sub)
	}
	qs.mu.Lock()
	q.users--
	if q.users == 0 && qs.m[q.key] == q {
		delete(qs.m, q.key)
	}
	qs.mu.Unlock()
}

// closeSub closes a subscription in the background: its UNSUBSCRIBE
// round trip is not the caller's to wait for.
func (qs *waitQueues) closeSub(w *pubsub.Waiter) {
	qs.settling.Add(1)
	qs.spawn(func() {
		defer qs.settling.Done()
		w.Close()
	})
}

// subscription returns the queue's subscription, the head observing the
// lock's channel first if needed (bounded by ctx). nil means none
// could be had: the head then sleeps on the holder's lease alone.
func (qs *waitQueues) subscription(ctx context.Context, q *queue) *pubsub.Waiter {
	q.mu.Lock()
	if q.sub != nil {
		w := q.sub
		q.mu.Unlock()
		return w
	}
	q.mu.Unlock()
	w, err := qs.hub.Observe(ctx, q.name)
	if err != nil {
		return nil
	}
	q.mu.Lock()
	if q.sub == nil {
		q.sub = w
		q.mu.Unlock()
		return w
	}
	old := q.sub
	q.mu.Unlock()
	qs.closeSub(w)
	return old
}

// has reports whether this Client has the queue k: waiters, or a call
// about to join as its head.
func (qs *waitQueues) has(k queueKey) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.m[k] != nil
}

// kick wakes the head of the queue k: this Client just released the
// lock.
func (qs *waitQueues) kick(k queueKey) {
	qs.mu.Lock()
	q := qs.m[k]
	qs.mu.Unlock()
	if q == nil {
		return
	}
	select {
	case q.kick <- struct{}{}:
	default:
	}
}
