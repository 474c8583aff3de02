package watchdog

import (
	"context"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/reentrant"
)

// retryDelay is the pause before a renewal that failed on the network is
// sent again within its tick.
const retryDelay = 10 * time.Millisecond

// Tick runs one tick now: it declares lost the entries whose lease must
// have run out, renews every renewable entry in one round trip and
// applies the answers. Renewals that fail on the network are sent again
// within the tick while their leases allow. Run calls it; tests may call
// it directly.
func (r *Registry) Tick(ctx context.Context) Tick {
	tk := Tick{Start: time.Now()}
	_, tk.Lost = r.judgeDue(tk.Start, false)
	batch, done := r.startTick()
	if len(batch) == 0 {
		r.report(&tk)
		return tk
	}
	defer r.endTick(done)

	rb, byKey := r.build(batch)
	tk.Commands = len(rb.Cmds)

	// Send every command; then send again, in one round trip each time,
	// the ones the server did not answer (NOSCRIPT, a broken connection)
	// while the earliest lease among them allows. Each answer is stamped
	// with the send time of the round trip that carried it.
	pending := make([]int, len(rb.Cmds))
	for i := range pending {
		pending[i] = i
	}
	noscript := false
	for len(pending) > 0 {
		pending, noscript = r.roundTrip(ctx, &tk, rb, byKey, pending, noscript)
		if len(pending) == 0 || noscript {
			continue
		}
		if !r.pause(ctx, &tk, rb, byKey, pending) {
			break // judged at the end of their leases by Run
		}
	}
	r.report(&tk)
	return tk
}

// startTick picks the entries to renew and marks them in flight.
func (r *Registry) startTick() ([]*Entry, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var batch []*Entry
	for e := range r.entries {
		if e.renew && e.busy == 0 {
			batch = append(batch, e)
		}
	}
	if len(batch) == 0 {
		return nil, nil
	}
	done := make(chan struct{})
	r.tickDone = done
	r.inflight = make(map[*Entry]bool, len(batch))
	for _, e := range batch {
		r.inflight[e] = true
	}
	return batch, done
}

func (r *Registry) endTick(done chan struct{}) {
	r.mu.Lock()
	r.inflight = nil
	close(done)
	r.mu.Unlock()
}

// build makes the renew commands of a tick's batch, and the index from a
// hold to its entry.
func (r *Registry) build(batch []*Entry) (reentrant.RenewBatch, map[reentrant.Hold]*Entry) {
	holds := make([]reentrant.Hold, len(batch))
	byKey := make(map[reentrant.Hold]*Entry, len(batch))
	for i, e := range batch {
		holds[i] = reentrant.Hold{Name: e.name, Field: e.field}
		byKey[holds[i]] = e
	}
	return reentrant.BuildRenew(r.c, r.cfg.Lease, holds), byKey
}

// roundTrip sends the pending commands in one round trip (as EVAL after a
// NOSCRIPT) and applies their answers. It returns the commands to send
// again, and whether one was NOSCRIPT.
func (r *Registry) roundTrip(ctx context.Context, tk *Tick, rb reentrant.RenewBatch, byKey map[reentrant.Hold]*Entry, pending []int, noscript bool) ([]int, bool) {
	until := r.earliestJudge(rb, pending, byKey, tk.Start.Add(r.cfg.Interval))
	timeout := min(max(time.Until(until), r.cfg.RoundTrip), r.cfg.Interval)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	cmds := make([]rueidis.Completed, len(pending))
	for j, i := range pending {
		if noscript {
			cmds[j] = rb.Eval(r.c, i)
		} else {
			cmds[j] = rb.Cmds[i].Pin() // sent again if the network fails it
		}
	}
	sent := time.Now()
	results := r.c.DoMulti(rctx, cmds...)
	cancel()
	tk.RoundTrips++
	var again []int
	noscript = false
	for j, res := range results {
		i := pending[j]
		if reentrant.IsNoScript(res.Error()) {
			noscript = true
			again = append(again, i)
			continue
		}
		if r.apply(tk, rb, i, res, sent, byKey) && ctx.Err() == nil {
			again = append(again, i)
		}
	}
	return again, noscript
}

// pause waits before sending failed commands again, and reports whether
// they are to be sent: not when the earliest of their judgements is
// closer than a retry, or ctx ended.
func (r *Registry) pause(ctx context.Context, tk *Tick, rb reentrant.RenewBatch, byKey map[reentrant.Hold]*Entry, pending []int) bool {
	wait := time.Until(r.earliestJudge(rb, pending, byKey, tk.Start.Add(r.cfg.Interval)))
	if wait < retryDelay || ctx.Err() != nil {
		return false
	}
	t := time.NewTimer(retryDelay)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	return true
}

// earliestJudge returns the earliest judgement time of the entries of the
// pending commands, or limit when it is earlier.
func (r *Registry) earliestJudge(rb reentrant.RenewBatch, pending []int, byKey map[reentrant.Hold]*Entry, limit time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := limit
	for _, i := range pending {
		for _, h := range rb.Holds[i] {
			if e := byKey[h]; e.judge.Before(t) {
				t = e.judge
			}
		}
	}
	return t
}

// apply applies the answer of command i, sent at sent. It reports whether
// the command should be sent again: it failed on the network and some of
// its entries may still hold.
func (r *Registry) apply(tk *Tick, rb reentrant.RenewBatch, i int, res rueidis.RedisResult, sent time.Time, byKey map[reentrant.Hold]*Entry) (again bool) {
	renewed, err := reentrant.ParseRenew(res, len(rb.Holds[i]))
	if err != nil && tk.Err == nil {
		tk.Err = err
	}
	_, serverErr := rueidis.IsRedisErr(err)
	var losses []*Entry
	var why []*LossError
	now := time.Now()
	r.mu.Lock()
	for j, h := range rb.Holds[i] {
		e := byKey[h]
		if e.gone || e.busy > 0 {
			continue // released meanwhile: its answer says nothing
		}
		switch {
		case err == nil && renewed[j]:
			tk.Renewed++
			e.lastErr = nil
			r.extendLocked(e, r.cfg.Lease, sent)
		case err == nil:
			r.removeLocked(e)
			losses = append(losses, e)
			why = append(why, &LossError{Name: e.name, Kind: observe.LossNotHeld, Reason: "renewal found the lock no longer held"})
		case !now.Before(e.judge):
			e.lastErr = err
			r.removeLocked(e)
			losses = append(losses, e)
			why = append(why, ranOut(e))
		default:
			tk.Failed++
			e.lastErr = err
			again = again || !serverErr
		}
	}
	r.mu.Unlock()
	tk.Lost += len(losses)
	for k, e := range losses {
		if e.onLost != nil {
			e.onLost(e, why[k])
		}
	}
	return again
}

func (r *Registry) report(tk *Tick) {
	tk.Duration = time.Since(tk.Start)
	if r.cfg.OnTick != nil && (tk.Commands > 0 || tk.Lost > 0) {
		r.cfg.OnTick(*tk)
	}
}
