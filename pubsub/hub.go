package pubsub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/rueidis"
)

// ErrClosed is returned by Subscribe after Close.
var ErrClosed = errors.New("rlock: pubsub hub closed")

// Reason tells a Waiter why it was woken.
type Reason int

const (
	// Message: an unlock message arrived on the channel.
	Message Reason = iota + 1
	// Reconnect: the subscription connection broke, or the channel's
	// subscription was (re-)established after a break or a slot move, or
	// restored after a Subscribe that was cut short. A message may have
	// been missed, so every waiter tries again. After a break a waiter is
	// woken twice: at the break and once the server has confirmed the
	// re-subscription; a release between the two is seen by the second.
	Reconnect
)

func (r Reason) String() string {
	switch r {
	case Message:
		return "message"
	case Reconnect:
		return "reconnect"
	}
	return "unknown"
}

// Options configure a Hub. The zero value subscribes with SUBSCRIBE.
type Options struct {
	// Sharded subscribes with SSUBSCRIBE (Redis >= 7 sharded pub/sub),
	// matching a publisher that uses SPUBLISH.
	Sharded bool
	// OnReconnect, when set, is called after the connection broke and
	// before it is re-established, with the error that broke it.
	OnReconnect func(err error)
	// UnsubscribeTimeout bounds each round trip of the Hub's background
	// work: the UNSUBSCRIBE sent when a channel's last waiter left, and a
	// re-subscription. Default 2s.
	UnsubscribeTimeout time.Duration

	// moved, set by Shards, takes the waiters of a channel whose slot
	// moved to the master at addr (a MOVED answer to SSUBSCRIBE).
	moved func(name, addr string, ws []*Waiter)
}

// Hub is one Redis master's subscription connection, shared by every
// waiter of a Client. It is safe for concurrent use.
//
// Besides the goroutine that watches the connection, a Hub has one
// background goroutine, started with its first connection and ended by
// Close, for the work that must not wait on a caller: unsubscribing a
// channel whose last waiter left (Waiter.Close returns at once), and
// settling a channel whose subscription is in doubt (a Subscribe cut
// short by its ctx after it sent SUBSCRIBE; a server that dropped the
// channel on its own, as a cluster node does for a slot it gave away).
type Hub struct {
	c    rueidis.Client
	opts Options

	// sub serialises everything that talks to the connection (subscribe,
	// unsubscribe, reconnect). It is a channel so that waits on it can
	// end with a context.
	sub chan struct{}

	// ctx is cancelled by Close: it bounds the background work.
	ctx    context.Context
	cancel context.CancelFunc

	// mu guards the fields below. It is never held across I/O: the
	// message hooks run on the connection's reader goroutine and take it.
	mu       sync.Mutex
	conn     rueidis.DedicatedClient
	gen      uint64 // connection generation, bumped on every reconnect
	channels map[string]*channel
	dirty    map[string]bool // channels for the background goroutine
	worker   bool            // the background goroutine was started
	// wantConn: a Subscribe waits for a connection, which the background
	// goroutine opens; connWait is closed when one is set.
	wantConn bool
	connWait chan struct{}
	// reconnecting: the connection broke and its watch goroutine will
	// reconnect and re-subscribe, unless a Subscribe connects first.
	reconnecting bool
	closed       bool
	bo           *backoff.ExponentialBackOff // reconnect delays, reset on success

	// beforeConnect, set only by tests, runs at the start of every
	// subscribeLocked, before it connects.
	beforeConnect func()

	kick chan struct{} // there is background work; capacity 1
	soon chan struct{} // Reconnect: cut a reconnect's delay short; capacity 1
	stop chan struct{}
	wg   sync.WaitGroup
}

type channel struct {
	name       string
	waiters    []*Waiter // in arrival order
	subscribed bool      // confirmed on the current connection
}

// New returns a Hub on c. It connects on the first Subscribe.
func New(c rueidis.Client, opts Options) *Hub {
	if opts.UnsubscribeTimeout <= 0 {
		opts.UnsubscribeTimeout = 2 * time.Second
	}
	// The options, not fields set afterwards: NewExponentialBackOff
	// computes the first interval from InitialInterval before it returns
	// (500ms by default).
	bo := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(20*time.Millisecond),
		backoff.WithMaxInterval(2*time.Second),
		backoff.WithMaxElapsedTime(0),
	)
	ctx, cancel := context.WithCancel(context.Background())
	return &Hub{
		bo:       bo,
		c:        c,
		opts:     opts,
		sub:      make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
		channels: map[string]*channel{},
		dirty:    map[string]bool{},
		kick:     make(chan struct{}, 1),
		soon:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
}

func (h *Hub) lockSub(ctx context.Context) error {
	select {
	case h.sub <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-h.stop:
		return ErrClosed
	}
}

func (h *Hub) unlockSub() { <-h.sub }

// Subscribe adds a waiter to the channel named name. It returns once the
// server has confirmed the subscription, so every message published after
// it returns reaches the Waiter. Close the Waiter when done.
//
// When ctx ends first, Subscribe returns ctx's error and the Hub settles
// the channel in the background: a SUBSCRIBE the server still carries out
// is followed by UNSUBSCRIBE, unless other waiters need the channel.
//
// With no connection yet (the first Subscribe, or one after a break),
// the background goroutine opens it, and Subscribe waits for it within
// ctx: rueidis's Dedicate, which opens it, takes no ctx, and on a client
// given to FromClient it waits for the application's blocking pool
// (R3-10).
//
// May return ErrClosed, ctx's error, or the subscription's error.
func (h *Hub) Subscribe(ctx context.Context, name string) (*Waiter, error) {
	return h.subscribe(ctx, name, false)
}

// Observe is Subscribe for an observer of the channel: every message wakes
// it, and it takes no wake-up from the channel's other waiters (a "0"
// still wakes one of them, as if the observer were not there; its Pass and
// Close hand nothing on). It is for a waiter that decides by itself who
// of its process attempts and shares the channel with others that do
// too: package lock's queues (one per lock; "x" and "{x}" announce on one
// channel) and package multilock's waiters. As an ordinary waiter it
// could take the one wake-up of a release that another sleeping on the
// same channel needed, leaving that one asleep until the holder's lease
// would have ended.
func (h *Hub) Observe(ctx context.Context, name string) (*Waiter, error) {
	return h.subscribe(ctx, name, true)
}

func (h *Hub) subscribe(ctx context.Context, name string, all bool) (*Waiter, error) {
	if err := h.connected(ctx); err != nil {
		return nil, err
	}
	if err := h.lockSub(ctx); err != nil {
		return nil, err
	}
	defer h.unlockSub()

	w := &Waiter{h: h, name: name, c: make(chan Reason, 1), all: all}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	ch := h.channels[name]
	if ch == nil {
		ch = &channel{name: name}
		h.channels[name] = ch
	}
	ch.waiters = append(ch.waiters, w)
	ready := ch.subscribed && h.conn != nil
	h.mu.Unlock()
	if ready {
		return w, nil
	}
	if err := h.subscribeLocked(ctx, w)[name]; err != nil {
		h.mu.Lock()
		h.removeWaiterLocked(w)
		h.mu.Unlock()
		return nil, err
	}
	return w, nil
}

// connected waits, within ctx, until the Hub has a connection, having
// the background goroutine open one when it has none.
func (h *Hub) connected(ctx context.Context) error {
	h.mu.Lock()
	for h.conn == nil {
		if h.closed {
			h.mu.Unlock()
			return ErrClosed
		}
		if h.connWait == nil {
			h.connWait = make(chan struct{})
		}
		c := h.connWait
		h.wantConn = true
		h.wakeLocked()
		h.mu.Unlock()
		select {
		case <-c:
		case <-ctx.Done():
			return ctx.Err()
		case <-h.stop:
			return ErrClosed
		}
		h.mu.Lock()
	}
	h.mu.Unlock()
	return nil
}

// subscribeLocked connects when needed and subscribes every channel with
// waiters that the connection has not confirmed, one command per channel:
// the reply to each SUBSCRIBE is the server's confirmation of its
// channel, so a command's success means that channel is subscribed, and a late confirmation of an earlier, abandoned command is
// never taken for it. It returns the error of each channel that failed.
// The caller holds h.sub.
//
// A confirmed channel's waiters, except self (whose Subscribe is the
// caller and which tries next anyway), are woken with Reconnect: messages
// published while the channel was not subscribed were lost. A channel
// whose slot moved (MOVED) goes, with its waiters but self, to its new
// owner through opts.moved. A channel whose outcome is unknown (ctx
// ended, connection broke) is left to the background goroutine.
func (h *Hub) subscribeLocked(ctx context.Context, self *Waiter) map[string]error {
	if h.beforeConnect != nil {
		h.beforeConnect()
	}
	errs := map[string]error{}
	// The connection is the one connectLocked returns, not h.conn read
	// again: its watch goroutine may already have detached it (a
	// connection that broke at once), and then the DoMulti below fails
	// on it and the watcher reconnects.
	conn, err := h.connectLocked()
	if err != nil {
		for _, n := range h.pendingNames() {
			errs[n] = err
		}
		return errs
	}
	// The names are read once connected, not before: a connection made
	// here, after the old one broke, carries none of the channels, and
	// the watch goroutine leaves them to whoever connected first.
	names := h.pendingNames()
	if len(names) == 0 {
		return errs
	}
	cmds := make(rueidis.Commands, len(names))
	for i, n := range names {
		if h.opts.Sharded {
			cmds[i] = conn.B().Ssubscribe().Channel(n).Build()
		} else {
			cmds[i] = conn.B().Subscribe().Channel(n).Build()
		}
	}
	res := conn.DoMulti(ctx, cmds...)

	var moves []move
	h.mu.Lock()
	for i, n := range names {
		err := res[i].Error()
		if err == nil {
			h.confirmedLocked(conn, n, self)
			continue
		}
		errs[n] = fmt.Errorf("rlock: subscribe: %w", err)
		if m, ok := h.refusedLocked(n, err, self); ok {
			moves = append(moves, m)
		}
	}
	h.mu.Unlock()
	for _, m := range moves {
		h.opts.moved(m.name, m.addr, m.ws)
	}
	return errs
}

// move is a channel whose slot moved, with the waiters that go with it.
type move struct {
	name, addr string
	ws         []*Waiter
}

// confirmedLocked marks channel n subscribed on conn, and wakes its
// waiters but self with Reconnect. The caller holds h.mu.
func (h *Hub) confirmedLocked(conn rueidis.DedicatedClient, n string, self *Waiter) {
	ch := h.channels[n]
	if ch == nil {
		h.dirtyLocked(n) // its waiters left meanwhile
		return
	}
	if h.conn == conn {
		ch.subscribed = true
	}
	for _, w := range ch.waiters {
		if w != self {
			w.signal(Reconnect)
		}
	}
}

// refusedLocked handles channel n's failed subscription: an unknown
// outcome is left to the background; a MOVED answer takes the channel's
// waiters but self away, to be moved to the new owner. The caller holds
// h.mu.
func (h *Hub) refusedLocked(n string, err error, self *Waiter) (move, bool) {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		h.dirtyLocked(n) // sent or not: the background settles it
		return move{}, false
	}
	// The server refused: nothing is subscribed.
	ch := h.channels[n]
	addr, ok := re.IsMoved()
	if !ok || h.opts.moved == nil || ch == nil {
		return move{}, false
	}
	var ws, stay []*Waiter
	for _, w := range ch.waiters {
		if w == self {
			stay = append(stay, w)
		} else {
			ws = append(ws, w)
		}
	}
	ch.waiters = stay
	if len(stay) == 0 {
		delete(h.channels, n)
	}
	return move{n, addr, ws}, len(ws) > 0
}

// dirtyLocked leaves the channel name to the background goroutine: it
// unsubscribes the channel when it has no waiters, and subscribes it when
// it has waiters but is not subscribed. The caller holds h.mu.
func (h *Hub) dirtyLocked(name string) {
	if h.closed {
		return
	}
	h.dirty[name] = true
	h.wakeLocked()
}

// wakeLocked starts the background goroutine if needed and gives it
// work. The caller holds h.mu.
func (h *Hub) wakeLocked() {
	if !h.worker {
		h.worker = true
		h.wg.Add(1)
		go h.background()
	}
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// background does the work left by dirtyLocked until Close.
func (h *Hub) background() {
	defer h.wg.Done()
	for {
		select {
		case <-h.kick:
		case <-h.stop:
			return
		}
		_ = h.settle(h.ctx)
	}
}

// settle does the work queued by dirtyLocked and connected: a connection
// a Subscribe waits for, UNSUBSCRIBE for channels
// left without waiters, and a subscription of every channel with waiters
// that is not subscribed when one of them was queued. When that
// subscription fails other than by a moved slot, it closes the connection:
// its watch goroutine then reconnects with backoff and re-subscribes.
func (h *Hub) settle(ctx context.Context) error {
	if err := h.lockSub(ctx); err != nil {
		return err
	}
	defer h.unlockSub()
	h.mu.Lock()
	want := h.wantConn && h.conn == nil
	h.wantConn = false
	h.mu.Unlock()
	if want {
		_, _ = h.connectLocked() // for the Subscribes that wait (connected)
	}
	h.mu.Lock()
	var unsub []string
	resub := false
	for n := range h.dirty {
		if ch := h.channels[n]; ch == nil {
			unsub = append(unsub, n)
		} else if !ch.subscribed {
			resub = true
		}
	}
	clear(h.dirty)
	conn := h.conn
	h.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, h.opts.UnsubscribeTimeout)
	defer cancel()
	if conn != nil && len(unsub) > 0 {
		// A connection made after the channel was last subscribed does
		// not carry it; unsubscribing there does no harm.
		cmds := make(rueidis.Commands, len(unsub))
		for i, n := range unsub {
			if h.opts.Sharded {
				cmds[i] = conn.B().Sunsubscribe().Channel(n).Build()
			} else {
				cmds[i] = conn.B().Unsubscribe().Channel(n).Build()
			}
		}
		// A failure breaks the connection, and a reconnect forgets the
		// channels.
		conn.DoMulti(ctx, cmds...)
	}
	if !resub {
		return nil
	}
	h.mu.Lock()
	reconnecting := h.reconnecting && h.conn == nil
	h.mu.Unlock()
	if reconnecting {
		return nil // the reconnect re-subscribes them
	}
	if failed(h.subscribeLocked(ctx, nil)) {
		h.closeConn()
	}
	return nil
}

// failed tells whether errs has an error other than a moved slot's.
func failed(errs map[string]error) bool {
	for _, err := range errs {
		var re *rueidis.RedisError
		if errors.As(err, &re) {
			if _, ok := re.IsMoved(); ok {
				continue
			}
		}
		return true
	}
	return false
}

// closeConn closes the current connection; its watch goroutine
// reconnects after a backoff delay.
func (h *Hub) closeConn() {
	h.mu.Lock()
	c := h.conn
	h.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// connectLocked returns the dedicated connection, opening it and starting
// the goroutine that watches it if not yet done. The caller holds h.sub.
func (h *Hub) connectLocked() (rueidis.DedicatedClient, error) {
	h.mu.Lock()
	if c := h.conn; c != nil {
		h.mu.Unlock()
		return c, nil
	}
	h.mu.Unlock()
	conn, _ := h.c.Dedicate() // Close returns it to rueidis
	h.mu.Lock()
	h.gen++
	gen := h.gen
	h.mu.Unlock()
	broken := conn.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage:      h.onMessage,
		OnSubscription: func(s rueidis.PubSubSubscription) { h.onSubscription(gen, s) },
	})
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		conn.Close()
		return nil, ErrClosed
	}
	h.conn = conn
	if h.connWait != nil {
		close(h.connWait) // Subscribes waiting for a connection
		h.connWait = nil
	}
	h.reconnecting = false
	h.mu.Unlock()
	h.wg.Add(1)
	go h.watch(gen, broken)
	return conn, nil
}

// onSubscription watches for a channel that the server unsubscribed on
// its own while it still has waiters: a cluster node does that with the
// shard channels of a slot it gives away. The background goroutine then
// subscribes it again (and, when the slot moved, on its new owner). An
// unsubscription the Hub asked for concerns a channel without waiters.
func (h *Hub) onSubscription(gen uint64, s rueidis.PubSubSubscription) {
	if s.Kind != "unsubscribe" && s.Kind != "sunsubscribe" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen != gen {
		return
	}
	if ch := h.channels[s.Channel]; ch != nil && ch.subscribed {
		ch.subscribed = false
		h.dirtyLocked(s.Channel)
	}
}

func (h *Hub) onMessage(m rueidis.PubSubMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.channels[m.Channel]
	if ch == nil {
		return
	}
	if m.Message == "1" {
		for _, w := range ch.waiters {
			w.signal(Message)
		}
		return
	}
	for _, w := range ch.waiters {
		if w.all {
			w.signal(Message)
		}
	}
	wakeOneLocked(ch, nil)
}

// wakeOneLocked wakes the longest-waiting waiter of ch, other than not and
// the observers (Hub.Observe), that has no wake-up pending. With
// every waiter already woken, there is nobody left to wake.
func wakeOneLocked(ch *channel, not *Waiter) bool {
	for _, w := range ch.waiters {
		if w != not && !w.all && w.signal(Message) {
			return true
		}
	}
	return false
}

// watch waits for the connection of generation gen to break. It then
// wakes every waiter at once (a message may have been lost), waits a
// backoff delay and reconnects, re-subscribing every channel that still
// has waiters. When that fails it closes the new connection, whose own
// watch goroutine tries again after a longer delay.
func (h *Hub) watch(gen uint64, broken <-chan error) {
	defer h.wg.Done()
	var err error
	select {
	case err = <-broken:
	case <-h.stop:
		return
	}
	if err == nil {
		err = errors.New("connection closed")
	}
	delay, ok := h.detach(gen, err)
	if !ok {
		return
	}
	defer func() {
		h.mu.Lock()
		if h.gen == gen { // nobody connected: the next one to need it does
			h.reconnecting = false
		}
		h.mu.Unlock()
	}()

	t := time.NewTimer(delay)
	select {
	case <-t.C:
	case <-h.soon:
		t.Stop()
	case <-h.stop:
		t.Stop()
		return
	}
	h.resubscribe(gen)
}

// detach drops generation gen's broken connection (err says why) and
// wakes every waiter with Reconnect. It returns the delay before
// re-subscribing, and false when gen is not the current generation or
// the Hub is closed (nothing to do).
func (h *Hub) detach(gen uint64, err error) (time.Duration, bool) {
	h.mu.Lock()
	if h.gen != gen || h.closed {
		h.mu.Unlock()
		return 0, false
	}
	old := h.conn
	h.conn = nil // from now on, a Subscribe connects anew
	h.reconnecting = true
	for _, ch := range h.channels {
		ch.subscribed = false
		for _, w := range ch.waiters {
			w.signal(Reconnect)
		}
	}
	delay := h.bo.NextBackOff()
	h.mu.Unlock()
	if old != nil {
		old.Close()
	}
	if h.opts.OnReconnect != nil {
		h.opts.OnReconnect(err)
	}
	return delay, true
}

// resubscribe connects again and subscribes every channel with waiters,
// unless a Subscribe has connected meanwhile.
func (h *Hub) resubscribe(gen uint64) {
	if h.lockSub(h.ctx) != nil {
		return
	}
	defer h.unlockSub()
	h.mu.Lock()
	if h.gen != gen || h.conn != nil || h.closed {
		h.mu.Unlock()
		return // a Subscribe has connected meanwhile
	}
	h.mu.Unlock()
	if len(h.pendingNames()) == 0 {
		return // the next Subscribe connects
	}
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	// A channel whose slot moved does not fail the others: it went to
	// its new owner.
	if !failed(h.subscribeLocked(ctx, nil)) {
		h.mu.Lock()
		h.bo.Reset()
		h.mu.Unlock()
		return
	}
	h.closeConn() // its watch goroutine retries
}

// Reconnect closes the subscription connection as if it had broken:
// every waiter is woken with Reconnect, and the Hub connects again
// without a backoff delay (its client's Dedicate chooses where) and
// re-subscribes every channel that has waiters, whose waiters are woken
// again once the server confirms. When the connection is already broken,
// it cuts the delay before the next attempt short. It first waits for a
// subscription in progress, bounded by ctx.
//
// A dedicated connection stays with the server it was made to. A client
// whose master changes under it (rueidis's Sentinel client, after a
// failover) calls Reconnect so that the waiters follow the new master:
// until the old one is demoted it still takes publishes of its own, and
// those of the new master do not reach it.
//
// May return ErrClosed, ctx's error.
func (h *Hub) Reconnect(ctx context.Context) error {
	if err := h.lockSub(ctx); err != nil {
		return err
	}
	defer h.unlockSub()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	conn := h.conn
	h.bo.Reset()
	h.mu.Unlock()
	if conn != nil {
		conn.Close() // its watch goroutine wakes the waiters and reconnects
		return nil
	}
	select { // a reconnect waiting out its delay goes now
	case h.soon <- struct{}{}:
	default:
	}
	return nil
}

// pendingNames lists the channels with waiters that the current
// connection has not confirmed (all of them after a reconnect).
func (h *Hub) pendingNames() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var names []string
	for n, ch := range h.channels {
		if !ch.subscribed || h.conn == nil {
			names = append(names, n)
		}
	}
	return names
}

// Channels returns how many channels have local waiters.
func (h *Hub) Channels() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.channels)
}

// Close wakes nobody, drops every subscription and closes the connection,
// and waits for the Hub's goroutine to end. It is idempotent.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.stop)
	h.cancel()
	conn := h.conn
	h.conn = nil
	h.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	h.wg.Wait()
}
