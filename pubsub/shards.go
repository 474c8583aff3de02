package pubsub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/internal/slots"
)

// ErrNoMaster is returned by Shards.Subscribe when no master is known for
// a channel's slot, or the cluster client has no connection to it.
var ErrNoMaster = errors.New("rlock: pubsub: no master known for the slot")

// Shards is the sharded subscription of a Redis Cluster: one Hub per
// master, each carrying (with SSUBSCRIBE) the channels of the slots that
// master owns. SSUBSCRIBE must reach the owner of its channel's slot, so
// one connection cannot serve a whole cluster as it does with plain
// SUBSCRIBE; one per master keeps the rule of one subscription connection
// per master.
//
// The slot owners come from CLUSTER SLOTS, asked on the first Subscribe
// and again after any Hub's connection broke (a failover or a resharding
// may be why). A MOVED answer to SSUBSCRIBE moves that slot at once: a
// Subscribe is retried once on the new owner, and a channel whose waiters
// were already waiting (the node dropped it when it gave the slot away, or
// a re-subscription after a break was refused) moves with its waiters to
// the new owner's Hub, which wakes them once it has subscribed there. The
// other channels of the old owner stay subscribed. It is safe for
// concurrent use.
type Shards struct {
	c    rueidis.Client
	opts Options

	mu       sync.Mutex
	addrs    []string        // masters, indexed by owner
	owner    []int16         // per slot, an index into addrs; -1 unknown; nil before the first refresh
	stale    bool            // ask CLUSTER SLOTS again before the next lookup
	hubs     map[string]*Hub // by master address
	rehoming map[*Hub]bool   // Hubs whose channels rehome is looking at
	closed   bool
	wg       sync.WaitGroup // rehome goroutines
}

// NewShards returns the sharded subscription of the cluster client c
// (rueidis.ClientModeCluster). opts.Sharded is implied. It connects on the
// first Subscribe.
func NewShards(c rueidis.Client, opts Options) *Shards {
	opts.Sharded = true
	return &Shards{c: c, opts: opts, hubs: map[string]*Hub{}}
}

// Subscribe adds a waiter to the shard channel named name, on the Hub of
// the master that owns its slot. Like Hub.Subscribe, it returns once that
// master has confirmed the subscription.
//
// May return ErrClosed, ErrNoMaster, or the subscription's error.
func (s *Shards) Subscribe(ctx context.Context, name string) (*Waiter, error) {
	return s.subscribe(ctx, name, false)
}

// Observe is Subscribe for an observer of the channel (see Hub.Observe).
func (s *Shards) Observe(ctx context.Context, name string) (*Waiter, error) {
	return s.subscribe(ctx, name, true)
}

func (s *Shards) subscribe(ctx context.Context, name string, all bool) (*Waiter, error) {
	slot := Slot(name)
	for attempt := 0; ; attempt++ {
		h, err := s.hubFor(ctx, slot)
		if err != nil {
			return nil, err
		}
		w, err := h.subscribe(ctx, name, all)
		var re *rueidis.RedisError
		if err != nil && attempt == 0 && errors.As(err, &re) {
			if addr, ok := re.IsMoved(); ok {
				s.moved(slot, addr)
				continue
			}
		}
		return w, err
	}
}

// hubFor returns the Hub of the master owning slot, refreshing the slot
// table first when it is missing or stale.
func (s *Shards) hubFor(ctx context.Context, slot uint16) (*Hub, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	need := s.owner == nil || s.stale
	s.mu.Unlock()
	if need {
		if err := s.refresh(ctx); err != nil {
			s.mu.Lock()
			known := s.owner != nil
			s.mu.Unlock()
			if !known {
				return nil, err
			}
			// Keep the table we have: a MOVED corrects it slot by slot.
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	i := s.owner[slot]
	if i < 0 {
		return nil, fmt.Errorf("%w: slot %d", ErrNoMaster, slot)
	}
	return s.hubAtLocked(s.addrs[i])
}

// hubAtLocked returns the Hub of the master at addr, made when needed.
// The caller holds s.mu.
func (s *Shards) hubAtLocked(addr string) (*Hub, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if h := s.hubs[addr]; h != nil {
		return h, nil
	}
	node := s.c.Nodes()[addr]
	if node == nil {
		return nil, fmt.Errorf("%w: no connection to %s", ErrNoMaster, addr)
	}
	o := s.opts
	var h *Hub
	o.OnReconnect = func(err error) {
		s.mu.Lock()
		s.stale = true
		if !s.closed && !s.rehoming[h] {
			if s.rehoming == nil {
				s.rehoming = map[*Hub]bool{}
			}
			s.rehoming[h] = true
			s.wg.Add(1)
			go s.rehome(h, addr)
		}
		s.mu.Unlock()
		if s.opts.OnReconnect != nil {
			s.opts.OnReconnect(err)
		}
	}
	o.moved = func(name, addr string, ws []*Waiter) { s.move(h, name, addr, ws) }
	h = New(node, o)
	s.hubs[addr] = h
	return h, nil
}

// move takes the waiters ws of the channel name from the Hub from, whose
// SSUBSCRIBE was answered MOVED to addr, to the Hub of addr, which
// subscribes the channel and wakes them once the server confirms; the
// other channels of from are not affected. When there is no Hub for addr
// (no connection to it, or Shards closed), they go back to from, woken,
// and are tried again at from's next re-subscription.
func (s *Shards) move(from *Hub, name, addr string, ws []*Waiter) {
	s.moved(Slot(name), addr)
	s.mu.Lock()
	to, err := s.hubAtLocked(addr)
	s.mu.Unlock()
	if err == nil && to != from && to.adopt(name, ws, true) {
		return
	}
	from.adopt(name, ws, false)
}

// rehome runs after the connection of h, the Hub of the master at addr,
// broke: a failover may have given that master's slots to another (a
// replica promoted in its place, at another address), and h would then
// try to reconnect to a dead node for ever. It reads the slot owners
// again and moves each channel whose slot is now another master's, with
// its waiters, to that master's Hub, which wakes them once subscribed
// there. While the table still names addr (a failover not yet complete),
// nothing moves: h's next failed reconnect calls rehome again.
func (s *Shards) rehome(h *Hub, addr string) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.rehoming, h)
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	if s.refresh(ctx) != nil {
		return
	}
	for _, name := range h.channelNames() {
		s.mu.Lock()
		to := ""
		if i := s.owner[Slot(name)]; i >= 0 {
			to = s.addrs[i]
		}
		s.mu.Unlock()
		if to == "" || to == addr {
			continue
		}
		if ws := h.take(name); len(ws) > 0 {
			s.move(h, name, to, ws)
		}
	}
}

// refresh reads the slot owners with CLUSTER SLOTS.
func (s *Shards) refresh(ctx context.Context) error {
	t, err := slots.Read(ctx, s.c)
	if err != nil {
		return fmt.Errorf("rlock: pubsub: cluster slots: %w", err)
	}
	s.mu.Lock()
	s.owner, s.addrs, s.stale = t.Owner, t.Addrs, false
	s.mu.Unlock()
	return nil
}

// moved records a MOVED answer: slot is now served by addr.
func (s *Shards) moved(slot uint16, addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner == nil {
		return
	}
	i := int16(-1)
	for j, a := range s.addrs {
		if a == addr {
			i = int16(j)
		}
	}
	if i < 0 {
		i = int16(len(s.addrs))
		s.addrs = append(s.addrs, addr)
	}
	s.owner[slot] = i
}

// Channels returns how many channels have local waiters, over all masters.
func (s *Shards) Channels() int {
	s.mu.Lock()
	hubs := make([]*Hub, 0, len(s.hubs))
	for _, h := range s.hubs {
		hubs = append(hubs, h)
	}
	s.mu.Unlock()
	n := 0
	for _, h := range hubs {
		n += h.Channels()
	}
	return n
}

// Close closes every Hub. It is idempotent.
func (s *Shards) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	hubs := s.hubs
	s.hubs = nil
	s.mu.Unlock()
	for _, h := range hubs {
		h.Close()
	}
	s.wg.Wait()
}
