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
	// Reconnect: the subscription connection broke; a message may have
	// been missed, so every waiter tries again.
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
	// UnsubscribeTimeout bounds the UNSUBSCRIBE sent when a channel's last
	// waiter leaves. Default 2s.
	UnsubscribeTimeout time.Duration
}

// Hub is one Redis master's subscription connection, shared by every
// waiter of a Client. It is safe for concurrent use.
type Hub struct {
	c    rueidis.Client
	opts Options

	// sub serialises everything that talks to the connection (subscribe,
	// unsubscribe, reconnect). It is a channel so that waits on it can
	// end with a context.
	sub chan struct{}

	// mu guards the fields below. It is never held across I/O: the
	// message hooks run on the connection's reader goroutine and take it.
	mu       sync.Mutex
	conn     rueidis.DedicatedClient
	gen      uint64 // connection generation, bumped on every reconnect
	channels map[string]*channel
	confirms map[string]chan struct{}
	closed   bool
	bo       *backoff.ExponentialBackOff // reconnect delays, reset on success

	stop chan struct{}
	wg   sync.WaitGroup
}

type channel struct {
	name       string
	waiters    []*Waiter // in arrival order
	subscribed bool
}

// New returns a Hub on c. It connects on the first Subscribe.
func New(c rueidis.Client, opts Options) *Hub {
	if opts.UnsubscribeTimeout <= 0 {
		opts.UnsubscribeTimeout = 2 * time.Second
	}
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 20 * time.Millisecond
	bo.MaxInterval = 2 * time.Second
	bo.MaxElapsedTime = 0
	return &Hub{
		bo:       bo,
		c:        c,
		opts:     opts,
		sub:      make(chan struct{}, 1),
		channels: map[string]*channel{},
		confirms: map[string]chan struct{}{},
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
func (h *Hub) Subscribe(ctx context.Context, name string) (*Waiter, error) {
	if err := h.lockSub(ctx); err != nil {
		return nil, err
	}
	defer h.unlockSub()

	w := &Waiter{h: h, name: name, c: make(chan Reason, 1)}
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
	if err := h.subscribeLocked(ctx, h.pendingNames()); err != nil {
		h.mu.Lock()
		h.removeWaiterLocked(w)
		h.mu.Unlock()
		return nil, err
	}
	return w, nil
}

// subscribeLocked connects when needed and subscribes names, waiting for
// the server's confirmation of each. The caller holds h.sub.
func (h *Hub) subscribeLocked(ctx context.Context, names []string) error {
	// The connection is the one connectLocked returns, not h.conn read
	// again: its watch goroutine may already have detached it (a
	// connection that broke at once), and then the DoMulti below fails
	// on it and the watcher reconnects.
	conn, err := h.connectLocked()
	if err != nil {
		return err
	}
	h.mu.Lock()
	waits := make([]chan struct{}, len(names))
	for i, n := range names {
		waits[i] = make(chan struct{})
		h.confirms[n] = waits[i]
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		for _, n := range names {
			delete(h.confirms, n)
		}
		h.mu.Unlock()
	}()

	var cmds rueidis.Commands
	if h.opts.Sharded {
		for _, g := range bySlot(names) {
			cmds = append(cmds, conn.B().Ssubscribe().Channel(g...).Build())
		}
	} else {
		cmds = append(cmds, conn.B().Subscribe().Channel(names...).Build())
	}
	for _, res := range conn.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return fmt.Errorf("rlock: subscribe: %w", err)
		}
	}
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		case <-h.stop:
			return ErrClosed
		}
	}
	h.mu.Lock()
	for _, n := range names {
		if ch := h.channels[n]; ch != nil {
			ch.subscribed = true
		}
	}
	h.mu.Unlock()
	return nil
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
	broken := conn.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage:      h.onMessage,
		OnSubscription: h.onSubscription,
	})
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		conn.Close()
		return nil, ErrClosed
	}
	h.conn = conn
	h.gen++
	gen := h.gen
	h.mu.Unlock()
	h.wg.Add(1)
	go h.watch(gen, broken)
	return conn, nil
}

func (h *Hub) onSubscription(s rueidis.PubSubSubscription) {
	if s.Kind != "subscribe" && s.Kind != "ssubscribe" {
		return
	}
	h.mu.Lock()
	if c, ok := h.confirms[s.Channel]; ok {
		close(c)
		delete(h.confirms, s.Channel)
	}
	h.mu.Unlock()
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
	wakeOneLocked(ch)
}

// wakeOneLocked wakes the longest-waiting waiter of ch that has no wake-up
// pending. With every waiter already woken, there is nobody left to wake.
func wakeOneLocked(ch *channel) bool {
	for _, w := range ch.waiters {
		if w.signal(Message) {
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
	h.mu.Lock()
	if h.gen != gen || h.closed {
		h.mu.Unlock()
		return
	}
	old := h.conn
	h.conn = nil // from now on, a Subscribe connects anew
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

	t := time.NewTimer(delay)
	select {
	case <-t.C:
	case <-h.stop:
		t.Stop()
		return
	}
	if h.lockSub(context.Background()) != nil {
		return
	}
	defer h.unlockSub()
	h.mu.Lock()
	if h.gen != gen || h.conn != nil || h.closed {
		h.mu.Unlock()
		return // a Subscribe has connected meanwhile
	}
	names := make([]string, 0, len(h.channels))
	for n := range h.channels {
		names = append(names, n)
	}
	h.mu.Unlock()
	if len(names) == 0 {
		return // the next Subscribe connects
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.subscribeLocked(ctx, names); err == nil {
		h.mu.Lock()
		h.bo.Reset()
		h.mu.Unlock()
		return
	}
	h.mu.Lock()
	c := h.conn
	h.mu.Unlock()
	if c != nil {
		c.Close() // its watch goroutine retries
	}
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
	conn := h.conn
	h.conn = nil
	h.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	h.wg.Wait()
}
