package lock

import (
	"context"
	"time"

	"github.com/rlock-go/rlock/internal/bridge"
	"github.com/rlock-go/rlock/pubsub"
)

func init() {
	bridge.HeldBy = func(m any, owner uint64) bool { return m.(*Mutex).heldBy(owner) }
	bridge.Watch = func(ctx context.Context, m any) (*pubsub.Waiter, error) { return m.(*Mutex).watch(ctx) }
	bridge.WatchdogTimeout = func(c any) time.Duration {
		cl, _ := c.(*Client)
		if !cl.valid() {
			return 0
		}
		return cl.cfg.WatchdogTimeout
	}
	bridge.ParseOptions = func(blocking bool, opts any) (bridge.Options, error) {
		o, err := parseOptions(blocking, opts.([]Option))
		return bridge.Options{Wait: o.wait, HasWait: o.hasWait, Lease: o.lease, Fenced: o.fenced, Ext: o.ext}, err
	}
	bridge.MutexErr = func(m any) error { return m.(*Mutex).err }
	bridge.Kind = func(m any) (string, bool) {
		if mu, _ := m.(*Mutex); mu != nil && mu.p != nil {
			return mu.p.name, mu.p.shared()
		}
		return "", false
	}
	bridge.SpinSleeper = func(m any) func() time.Duration {
		mu, _ := m.(*Mutex)
		if mu == nil || mu.p == nil {
			return nil
		}
		return mu.p.spinSleep(mu)
	}
	bridge.Go = func(c any, f func()) bool {
		cl, _ := c.(*Client)
		return cl.valid() && cl.wk.lend(f)
	}
	bridge.Extend = func(f func(ext *any) error) any {
		return Option(func(o *options) error { return f(&o.ext) })
	}
}

// heldBy reports whether the Client holds m's lock for owner.
func (m *Mutex) heldBy(owner uint64) bool {
	if m == nil || !m.c.valid() {
		return false
	}
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.index[key(m.name, m.p.field(c, owner))]
	return l != nil && len(l.helds) > 0
}

// watch subscribes to the lock's unlock channel (bridge.Watch).
func (m *Mutex) watch(ctx context.Context) (*pubsub.Waiter, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	c := m.c
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	w, err := c.hub.Subscribe(ctx, m.p.channel(m.name))
	if err != nil {
		return nil, masterErr(c.route.errAt(m.name), "subscribe", err)
	}
	return w, nil
}
