package lock

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/reentrant"
)

// NoExpiry is what RemainingTTL reports for a key without expiry (which
// no lock writes).
const NoExpiry = time.Duration(math.MaxInt64)

// IsLocked reports whether anyone (here, another process, or a Redisson
// service) holds the lock. A read-write lock's half answers as Redisson's
// isLocked() of that half: the write lock while a writer holds it, the
// read lock while readers hold it (a writer's own reads included).
//
// It returns when ctx ends (cancelled or past its deadline), at the
// latest one CommandTimeout after it began (ErrUnavailable).
//
// May return ErrClosed, ErrUnavailable, ErrInvalid.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	if m == nil || m.p == nil {
		return m.exists(ctx) // reports the nil or zero Mutex
	}
	return m.p.isLocked(ctx, m)
}

// exists reports whether m's key exists.
func (m *Mutex) exists(ctx context.Context) (bool, error) {
	var n int64
	err := m.query(ctx, "exists", func(c rueidis.Client) rueidis.Completed {
		return c.B().Exists().Key(m.name).Build()
	}, func(r rueidis.RedisResult) (err error) { n, err = r.AsInt64(); return err })
	return n == 1, err
}

// HoldCount returns how many holds the owner carried in ctx has on the
// lock: Redisson's getHoldCount() with the Held's context,
// m.HoldCount(h.Context()). A ctx that carries no owner (one not derived
// from a Held's context or WithOwner) is ErrNotHeld, not 0: the owner of
// a Lock(ctx) lives in the Held's context, not in ctx.
//
// It returns when ctx ends (cancelled or past its deadline), at the
// latest one CommandTimeout after it began (ErrUnavailable).
//
// May return ErrNotHeld, ErrNotLock (the key is not a lock), ErrClosed,
// ErrUnavailable, ErrInvalid.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	if err := m.check(ctx); err != nil {
		return 0, err
	}
	owner, ok := OwnerFrom(ctx)
	if !ok {
		return 0, wrapf(ErrNotHeld, "hold count of %q: the context carries no owner: pass the Held's Context()", m.name)
	}
	field := m.p.field(m.c, owner)
	var n int
	err := m.query(ctx, "hold count", func(c rueidis.Client) rueidis.Completed {
		return c.B().Hget().Key(m.name).Field(field).Build()
	}, func(r rueidis.RedisResult) error {
		s, err := r.ToString()
		if rueidis.IsRedisNil(err) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			return wrapf(ErrNotLock, "hold count %q is not an integer", s)
		}
		n = v
		return nil
	})
	return n, err
}

// RemainingTTL returns the lock's remaining lease: 0 when it is not
// locked, NoExpiry when the key has no expiry.
//
// It returns when ctx ends (cancelled or past its deadline), at the
// latest one CommandTimeout after it began (ErrUnavailable).
//
// May return ErrClosed, ErrUnavailable, ErrInvalid.
func (m *Mutex) RemainingTTL(ctx context.Context) (time.Duration, error) {
	var ms int64
	err := m.query(ctx, "pttl", func(c rueidis.Client) rueidis.Completed {
		return c.B().Pttl().Key(m.name).Build()
	}, func(r rueidis.RedisResult) (err error) { ms, err = r.AsInt64(); return err })
	switch {
	case err != nil || ms == -2:
		return 0, err
	case ms == -1:
		return NoExpiry, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// ForceUnlock deletes the lock whoever holds it and wakes a waiter; it
// reports whether there was a lock. Holds of this Client on it are lost:
// their contexts are cancelled with ErrLockLost. Other holders (other
// processes, Redisson) find out at their next renewal. A read-write
// lock's half does as Redisson's: the read lock's deletes the lock only
// while readers hold it (and wakes one waiter), the write lock's only
// while a writer holds it (and wakes every waiter); see
// ReadWriteMutex.ForceUnlock for either. When the server refuses the
// unlock message (an ACL without PUBLISH to the lock's channel), the lock
// is still deleted: ForceUnlock returns true and ErrAuth saying so.
// ForceUnlock returns when ctx ends (with Lock's exception for a
// cancelled ctx), at the latest one CommandTimeout after it began; cut
// off with its request in flight, it returns ErrUnavailable, and the lock
// may or may not have been deleted.
//
// May return ErrClosed, ErrUnavailable, ErrAuth, ErrInvalid.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if m == nil || m.p == nil {
		return m.forceUnlock(ctx, true, nil) // reports the nil or zero Mutex
	}
	return m.p.forceUnlock(ctx, m)
}

// forceUnlockRW deletes the read-write lock when in mode ("" any) and
// publishes msg; the Client's holds of the name are lost when it did.
func (m *Mutex) forceUnlockRW(ctx context.Context, mode, msg string) (bool, error) {
	return m.forceUnlock(ctx, false, func(qctx context.Context, c *Client) (bool, error) {
		return reentrant.ForceUnlockRW(qctx, c.crc, m.name, mode, msg, c.publish)
	})
}

// forceUnlock runs a force-unlock script of m's kind (send, bounded by
// CommandTimeout), then ends this Client's holds of the name: always, or
// (not always) only when a lock was deleted.
func (m *Mutex) forceUnlock(ctx context.Context, always bool, send func(context.Context, *Client) (bool, error)) (bool, error) {
	if err := m.check(ctx); err != nil {
		return false, err
	}
	c := m.c
	if err := c.enter(); err != nil {
		return false, err
	}
	defer c.exit()
	// A caller's send: it returns at the ctx's cancellation too
	// (bounded.go, Cancellations), not only at its deadline.
	qctx := newSendCtx(ctx, c.e.cfg.CommandTimeout, time.Time{}, true)
	deleted, err := send(qctx, c)
	qctx.stop()
	unannounced := errors.Is(err, reentrant.ErrUnannounced)
	if err != nil && !unannounced {
		if cut, ok := qctx.cutByCaller(err).(inFlight); ok {
			cut.note = "the lock may or may not have been deleted" // said as its ctx's end, not "redis unavailable"
			err = cut
		}
		return false, join(masterErr(c.route.errAt(m.name), "force unlock", err), ctx.Err())
	}
	if always || deleted {
		c.loseName(m.name)
	}
	if unannounced {
		// Deleted, without its message (P1-77): said as an Unlock says it.
		return true, unannouncedErr(c.route.errAt(m.name), "force unlock", "deleted", m.name, c.publish)
	}
	return deleted, nil
}

// query runs one read-only command.
func (m *Mutex) query(ctx context.Context, op string, build func(rueidis.Client) rueidis.Completed, read func(rueidis.RedisResult) error) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	c := m.c
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	cmd := build(c.rc)
	res, err := runQuery(ctx, c, func(qctx context.Context) (rueidis.RedisResult, error) {
		res := c.crc.Do(qctx, cmd)
		if err := res.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return res, err
		}
		return res, nil
	})
	if err != nil {
		return join(masterErr(c.route.errAt(m.name), op, err), ctx.Err())
	}
	if err := read(res); err != nil {
		return masterErr(c.route.errAt(m.name), op, err)
	}
	return nil
}

// runQuery runs send, a read-only request of the caller's, with a send
// context bounded by CommandTimeout: on one of the Client's workers when
// ctx can be cancelled, so that the call returns at ctx's end whatever
// rueidis does meanwhile (it sends a read-only command failed by a cut
// connection again itself, and then waits for the new connection without
// looking at the ctx: review of c5c5656, 1.8 s late); the worker's send
// ends at its deadline. An error of a send cut by ctx says so.
func runQuery[T any](ctx context.Context, c *Client, send func(context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	qctx := newSendCtx(ctx, c.e.cfg.CommandTimeout, time.Time{}, true)
	defer qctx.stop()
	run := func() result {
		v, err := send(qctx)
		return result{v, err}
	}
	var r result
	if end := ctx.Done(); end != nil {
		r = handOff(c.crc, qctx, end, run, func(err error) result { return result{err: err} })
	} else {
		r = run()
	}
	if r.err != nil {
		if cut, ok := qctx.cutByCaller(r.err).(inFlight); ok {
			cut.note = "" // a query leaves nothing to settle
			r.err = cut
		}
	}
	return r.v, r.err
}
