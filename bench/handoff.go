package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Scenario 4: handoff. A holds the lock, B waits for it (in another
// client); after a random 3–8 ms A releases. Handoff is from the moment A
// calls Unlock to the moment B's Lock returns, in microseconds and in
// PING round trips. The "(1 client)" rows put A and B on one client: for
// rlock, two waiters of one lock.Client, whose local queue wakes B at A's
// release without waiting for the unlock message; rueidislock's locker
// likewise signals a local waiter of the key when a hold ends.

type handoffResult struct {
	RTT        summary // PING in a busy loop
	IdleRTT    summary // PING after the same idle pause as a handoff's release
	Iterations int
	MinHold    time.Duration
	MaxHold    time.Duration
	Rows       []handoffRow
}

type handoffRow struct {
	Name     string
	Shared   bool // A and B in one client
	Polls    bool
	Handoff  summary
	RTTs     struct{ P50, P90, P99, Mean float64 } // in idle round trips
	HotP50   float64                               // p50 in busy-loop round trips
	handoffs samples
}

func runHandoff(ctx context.Context, p params) (*handoffResult, error) {
	srv, err := startRedis(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	addr := srv.Addr()
	rtt, err := pingRTT(ctx, addr, 2000)
	if err != nil {
		return nil, err
	}
	idle, err := idlePingRTT(ctx, addr, p.handoffIters, p.handoffMinHold, p.handoffMaxHold)
	if err != nil {
		return nil, err
	}
	r := &handoffResult{RTT: summarize(rtt), IdleRTT: summarize(idle), Iterations: p.handoffIters, MinHold: p.handoffMinHold, MaxHold: p.handoffMaxHold}
	for _, c := range handoffCases {
		hs, err := handoff(ctx, p, addr, c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name(), err)
		}
		row := handoffRow{Name: c.name(), Shared: c.shared, Polls: c.lib.polls, Handoff: summarize(hs), handoffs: hs.sorted()}
		rt := float64(r.IdleRTT.P50)
		row.HotP50 = float64(row.Handoff.P50) / float64(r.RTT.P50)
		row.RTTs.P50 = float64(row.Handoff.P50) / rt
		row.RTTs.P90 = float64(row.Handoff.P90) / rt
		row.RTTs.P99 = float64(row.Handoff.P99) / rt
		row.RTTs.Mean = float64(row.Handoff.Mean) / rt
		logf("  %-22s handoff p50 %v (%.1f idle RTT, %.1f busy RTT) p99 %v (%.1f idle RTT)", row.Name, row.Handoff.P50, row.RTTs.P50, row.HotP50, row.Handoff.P99, row.RTTs.P99)
		r.Rows = append(r.Rows, row)
	}
	return r, nil
}

// handoffCases are the rows: each library with A and B in two clients,
// and the libraries that coordinate waiters inside one client with both
// in one (the polling libraries have nothing of the kind: a waiter of a
// shared client polls as one of another client does).
var handoffCases = []contentionCase{
	{lib: libRlock}, {lib: libRlock, shared: true}, {lib: libPoll},
	{lib: libRedsync}, {lib: libRedislock},
	{lib: libRueidislock}, {lib: libRueidislock, shared: true},
}

func handoff(ctx context.Context, p params, addr string, c contentionCase) (samples, error) {
	lib := c.lib
	a, err := lib.open(ctx, addr, openOpts{})
	if err != nil {
		return nil, err
	}
	defer a.Close()
	b := a
	if !c.shared {
		if b, err = lib.open(ctx, addr, openOpts{}); err != nil {
			return nil, err
		}
		defer b.Close()
	}
	key := "bench:handoff:" + strings.ReplaceAll(c.name(), " ", "")
	for _, l := range []locker{a, b} { // warm up
		unlock, _, err := lockBounded(ctx, l, key, "4. handoff warm-up: "+c.name())
		if err != nil {
			return nil, err
		}
		if err := unlock(ctx); err != nil {
			return nil, err
		}
	}
	type got struct {
		at      time.Time
		unlock  func(context.Context) error
		stalled bool
		err     error
	}
	out := make(samples, 0, p.handoffIters)
	for range p.handoffIters {
		unlockA, _, err := lockBounded(ctx, a, key, "4. handoff: "+c.name())
		if err != nil {
			return nil, err
		}
		ch := make(chan got, 1)
		go func() {
			u, stalled, err := lockBounded(ctx, b, key, "4. handoff: "+c.name())
			ch <- got{at: time.Now(), unlock: u, stalled: stalled, err: err}
		}()
		hold := p.handoffMinHold + rand.N(p.handoffMaxHold-p.handoffMinHold)
		time.Sleep(hold) // B tries, fails and goes to wait meanwhile
		t0 := time.Now()
		if err := unlockA(ctx); err != nil {
			return nil, err
		}
		g := <-ch
		if g.err != nil {
			return nil, g.err
		}
		if !g.stalled { // a stalled wait measures the harness's timeout, not a handoff
			out = append(out, g.at.Sub(t0))
		}
		if err := g.unlock(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *handoffResult) check() error {
	if r.RTT.P50 <= 0 || r.IdleRTT.P50 <= 0 || len(r.Rows) != len(handoffCases) {
		return fmt.Errorf("handoff: missing rows")
	}
	for _, row := range r.Rows {
		if row.Handoff.N == 0 || !(row.RTTs.P50 > 0) {
			return fmt.Errorf("handoff: %s produced no numbers", row.Name)
		}
	}
	return nil
}
