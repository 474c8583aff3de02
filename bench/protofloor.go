package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/internal/redissonstandin"
	"github.com/rlock-go/rlock/reentrant"
)

// protocolFloor is what one uncontended Lock+Unlock costs on Redisson's
// layout with no client logic around it: the acquire script and the
// release script, one EVALSHA round trip each, sent raw on one rueidis
// client. Two of them separate what the layout costs from what a client
// adds: Redisson's own scripts (as a Java RLock sends them; Redisson
// deletes the unlock latch afterwards without waiting, which is left out
// here), and rlock's scripts (reentrant.AcquireCountedScript and
// ReleaseScript, which also answer each request by its id).
type protocolFloor struct {
	c    rueidis.Client
	once func(ctx context.Context, key string) error
}

func (p *protocolFloor) Close() { p.c.Close() }

// newRedissonScriptsFloor sends Redisson's scripts (the stand-in for
// Redisson 3.52.0's RLock, written from its source).
func newRedissonScriptsFloor(addr string) (*protocolFloor, error) {
	c, err := admin(addr)
	if err != nil {
		return nil, err
	}
	rs := redissonstandin.New(c, redissonstandin.Options{Version: redissonstandin.V3_52_0})
	return &protocolFloor{c: c, once: func(ctx context.Context, key string) error {
		l := rs.Lock(key)
		a, err := l.TryAcquire(ctx, 1, 0)
		if err != nil {
			return err
		}
		if !a.Acquired {
			return fmt.Errorf("Redisson's acquire on a free key refused")
		}
		r, err := l.UnlockInner(ctx, 1, redissonstandin.NewRequestID())
		if err != nil {
			return err
		}
		if r != redissonstandin.Released {
			return fmt.Errorf("Redisson's release answered %v", r)
		}
		return nil
	}}, nil
}

// newRlockScriptsFloor sends rlock's scripts as rlock's Client does for
// an uncontended Lock+Unlock, without the Client.
func newRlockScriptsFloor(addr string) (*protocolFloor, error) {
	c, err := admin(addr)
	if err != nil {
		return nil, err
	}
	field := reentrant.Field(reentrant.NewClientID(), 1)
	return &protocolFloor{c: c, once: func(ctx context.Context, key string) error {
		a, err := reentrant.AcquireRequest{Name: key, Field: field, Lease: 30 * time.Second, RequestID: reentrant.NewRequestID()}.Run(ctx, c)
		if err != nil {
			return err
		}
		if a.Status != reentrant.Acquired {
			return fmt.Errorf("rlock's acquire on a free key answered %v", a.Status)
		}
		r, err := reentrant.Release{Name: key, Field: field, Lease: 30 * time.Second, RequestID: reentrant.NewRequestID(),
			Publish: reentrant.Publish, LatchTTL: 30 * time.Second}.Run(ctx, c)
		if err != nil {
			return err
		}
		if r != reentrant.Released {
			return fmt.Errorf("rlock's release answered %v", r)
		}
		return nil
	}}, nil
}
