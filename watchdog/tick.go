package watchdog

import (
	"context"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/reentrant"
)

// minRoundTrip is the least time a tick gives its round trip, even when a
// lease is already past its deadline: one last chance to hear a 1.
const minRoundTrip = 20 * time.Millisecond

// Tick runs one tick now: it declares lost the explicit leases that ended,
// renews every renewable entry in one round trip and applies the answers.
// Run calls it; tests may call it directly.
func (r *Registry) Tick(ctx context.Context) Tick {
	now := time.Now()
	tk := Tick{Start: now}
	var expired []*Entry
	var batch []*Entry
	earliest := now.Add(r.cfg.Interval)

	r.mu.Lock()
	for _, e := range r.entries {
		switch {
		case e.busy > 0:
		case !e.renew:
			if !now.Before(e.deadline) {
				expired = append(expired, e)
			}
		default:
			batch = append(batch, e)
			if e.deadline.Before(earliest) {
				earliest = e.deadline
			}
		}
	}
	for _, e := range expired {
		r.removeLocked(e)
	}
	var done chan struct{}
	if len(batch) > 0 {
		done = make(chan struct{})
		r.tickDone = done
		r.inflight = make(map[*Entry]bool, len(batch))
		for _, e := range batch {
			r.inflight[e] = true
		}
	}
	r.mu.Unlock()

	for _, e := range expired {
		tk.Lost++
		if e.onLost != nil {
			e.onLost(leaseEnded(e))
		}
	}
	if len(batch) == 0 {
		if tk.Lost > 0 && r.cfg.OnTick != nil {
			tk.Duration = time.Since(now)
			r.cfg.OnTick(tk)
		}
		return tk
	}

	holds := make([]reentrant.Hold, len(batch))
	for i, e := range batch {
		holds[i] = reentrant.Hold{Name: e.name, Field: e.field}
	}
	rb := reentrant.BuildRenew(r.c, r.cfg.Lease, holds)
	tk.Commands = len(rb.Cmds)

	// Give the round trip until the earliest deadline, so that a stopped
	// server turns into a loss as soon as the lease must have run out.
	timeout := min(max(time.Until(earliest), minRoundTrip), r.cfg.Interval)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	sent := time.Now()
	results := r.c.DoMulti(rctx, rb.Cmds...)
	tk.RoundTrips = 1
	var retry []int
	for i, res := range results {
		if reentrant.IsNoScript(res.Error()) {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 { // the server lost its script cache (restart, SCRIPT FLUSH)
		cmds := make([]rueidis.Completed, len(retry))
		for j, i := range retry {
			cmds[j] = rb.Eval(r.c, i)
		}
		sent = time.Now()
		for j, res := range r.c.DoMulti(rctx, cmds...) {
			results[retry[j]] = res
		}
		tk.RoundTrips++
	}
	cancel()

	type loss struct {
		e   *Entry
		err *LossError
	}
	var losses []loss
	r.mu.Lock()
	byKey := make(map[entryKey]*Entry, len(batch))
	for _, e := range batch {
		byKey[key(e.name, e.field)] = e
	}
	now = time.Now()
	for i, res := range results {
		renewed, err := reentrant.ParseRenew(res, len(rb.Holds[i]))
		if err != nil && tk.Err == nil {
			tk.Err = err
		}
		for j, h := range rb.Holds[i] {
			e := byKey[key(h.Name, h.Field)]
			if e.gone || e.busy > 0 {
				continue // released meanwhile: its answer says nothing
			}
			switch {
			case err == nil && renewed[j]:
				tk.Renewed++
				e.lastErr = nil
				if d := sent.Add(r.cfg.Lease); d.After(e.deadline) {
					e.deadline = d
				}
			case err == nil:
				r.removeLocked(e)
				losses = append(losses, loss{e, &LossError{Name: e.name, Kind: NotHeld, Reason: "renewal found the lock no longer held"}})
			case !now.Before(e.deadline):
				r.removeLocked(e)
				losses = append(losses, loss{e, &LossError{Name: e.name, Kind: RenewFailed, Reason: "lease ran out while renewals failed", Err: err}})
			default:
				tk.Failed++
				e.lastErr = err
			}
		}
	}
	r.inflight = nil
	close(done)
	r.mu.Unlock()

	tk.Lost += len(losses)
	for _, l := range losses {
		if l.e.onLost != nil {
			l.e.onLost(l.err)
		}
	}
	tk.Duration = time.Since(tk.Start)
	if r.cfg.OnTick != nil {
		r.cfg.OnTick(tk)
	}
	return tk
}
