package lock

import (
	"context"
	"time"

	"github.com/rlock-go/rlock/internal/lockcore"
	"github.com/rlock-go/rlock/pubsub"
)

func init() {
	lockcore.Register(lockcore.Hooks[*Mutex, *Client, Option]{
		Describe: (*Mutex).describe,
		HeldBy:   (*Mutex).heldBy,
		Watch: func(ctx context.Context, m *Mutex) (*pubsub.Waiter, error) {
			return m.watch(ctx)
		},
		Go: func(c *Client, f func()) bool { return c.valid() && c.wk.lend(f) },
		ParseOptions: func(blocking bool, opts []Option) (lockcore.Options, error) {
			o, err := parseOptions(blocking, opts)
			return lockcore.Options{Wait: o.wait, HasWait: o.hasWait, Lease: o.lease, Fenced: o.fenced, Ext: o.ext}, err
		},
		Extend: func(f func(ext *any) error) Option {
			return func(o *options) error { return f(&o.ext) }
		},
	})
}

// describe is what a multi-master lock must know of m (lockcore.Mutex).
func (m *Mutex) describe() lockcore.Mutex {
	if m == nil {
		return lockcore.Mutex{Err: invalidf("a nil Mutex")}
	}
	d := lockcore.Mutex{Err: m.err}
	if m.c.valid() {
		d.WatchdogTimeout = m.c.cfg.WatchdogTimeout
	}
	if m.p != nil {
		d.Kind, d.Shared = m.p.name, m.p.shared()
		if m.p.polls() {
			d.Sleeper = func() func() time.Duration { return m.p.spinSleep(m) }
		}
	}
	return d
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
	return l != nil && l.g.Load().live()
}

// watch subscribes to the lock's unlock channel (lockcore's Watch).
func (m *Mutex) watch(ctx context.Context) (*pubsub.Waiter, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	c := m.c
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.exit()
	// A multi-master lock's waiter watches beside this Client's own
	// waiters of the name: it takes none of their wake-ups, and sees every
	// release (pubsub.Hub.Observe).
	w, err := c.hub.Observe(ctx, m.p.channel(m.name))
	if err != nil {
		return nil, masterErr(c.route.errAt(m.name), "subscribe", err)
	}
	return w, nil
}
