package watchdog

import (
	"context"
	"errors"
	"fmt"
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
	// with the send time of the round trip that carried it. What each
	// master's renewals must wait for is asked anew for every round trip:
	// a count learnt meanwhile (the replicas a master was asked for at the
	// tick's start) serves the renewals sent again.
	pending := make([]int, len(rb.Cmds))
	for i := range pending {
		pending[i] = i
	}
	noscript := false
	for len(pending) > 0 {
		syncs := r.syncs(ctx, rb)
		pending, noscript = r.roundTrip(ctx, &tk, rb, byKey, syncs, pending, noscript)
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
	if r.leaving != nil {
		r.leaving = nil
		r.nleaving.Store(0)
	}
	close(done)
	r.mu.Unlock()
}

// build makes the renew commands of a tick's batch, and the index from a
// hold to its entry.
func (r *Registry) build(batch []*Entry) (reentrant.RenewBatch, map[reentrant.Hold]*Entry) {
	holds := make([]reentrant.Hold, len(batch))
	byKey := make(map[reentrant.Hold]*Entry, len(batch))
	for i, e := range batch {
		holds[i] = reentrant.Hold{Name: e.name, Field: e.field, Read: e.read}
		byKey[holds[i]] = e
	}
	return reentrant.BuildRenew(r.c, r.cfg.Lease, holds), byKey
}

// masterSync is the replica sync of one master's renewals in a tick.
type masterSync struct {
	name string // a lock on the master, to route its WAIT
	s    reentrant.Sync
}

// syncs returns, for each renew command of rb, the replica sync its
// master asks for (nil when no command needs one), by Config.Sync.
func (r *Registry) syncs(ctx context.Context, rb reentrant.RenewBatch) []*masterSync {
	if r.cfg.Sync == nil {
		return nil
	}
	out := make([]*masterSync, len(rb.Cmds))
	byMaster := map[string]*masterSync{}
	any := false
	for i, holds := range rb.Holds {
		name := holds[0].Name
		master, s := r.cfg.Sync(ctx, name)
		if s.Replicas <= 0 {
			continue
		}
		ms := byMaster[master]
		if ms == nil {
			ms = &masterSync{name: name, s: s}
			byMaster[master] = ms
		}
		out[i], any = ms, true
	}
	if !any {
		return nil
	}
	return out
}

// roundTrip sends the pending commands in one round trip (as EVAL after a
// NOSCRIPT), each master's WAIT after its commands when its renewals must
// reach a replica, and applies their answers. It returns the commands to
// send again, and whether one was NOSCRIPT.
func (r *Registry) roundTrip(ctx context.Context, tk *Tick, rb reentrant.RenewBatch, byKey map[reentrant.Hold]*Entry, syncs []*masterSync, pending []int, noscript bool) ([]int, bool) {
	until := r.earliestJudge(rb, pending, byKey, tk.Start.Add(r.cfg.Interval))
	timeout := min(max(time.Until(until), r.cfg.RoundTrip), r.cfg.Interval, r.cfg.Straggle)
	cmds := make([]rueidis.Completed, len(pending), len(pending)+1)
	for j, i := range pending {
		if noscript {
			cmds[j] = rb.Eval(r.c, i)
		} else {
			cmds[j] = rb.Cmds[i].Pin() // sent again if the network fails it
		}
	}
	waits := r.waits(pending, syncs)
	cmds, timeout = r.appendWaits(cmds, waits, until, timeout)
	sent := time.Now()
	results := r.send(ctx, cmds, timeout, rb, pending)
	tk.RoundTrips++
	if results == nil {
		// No answer by the deadline: every command failed, and none is
		// sent again in this tick (its copies may still be on the wire).
		r.unanswered(tk, rb, pending, byKey)
		return nil, false
	}
	acked := map[*masterSync]int{}
	for k, ms := range waits {
		n, err := results[len(pending)+k].AsInt64()
		if err != nil {
			n = -1
		}
		acked[ms] = int(n)
		if r.cfg.Acked != nil {
			r.cfg.Acked(ms.name, ms.s, int(n))
		}
	}
	var again []int
	noscript = false
	for j, res := range results[:len(pending)] {
		i := pending[j]
		if reentrant.IsNoScript(res.Error()) {
			noscript = true
			again = append(again, i)
			continue
		}
		var unsynced error
		if syncs != nil && syncs[i] != nil && acked[syncs[i]] < 1 {
			unsynced = &UnsyncedError{Replicas: syncs[i].s.Replicas, Timeout: syncs[i].s.Timeout}
		}
		if r.apply(tk, rb, i, res, sent, byKey, unsynced) && ctx.Err() == nil {
			again = append(again, i)
		}
	}
	// rueidis's reader keeps the slice of the last replies it read on a
	// connection until the next reply comes: with thousands of locks
	// renewed, their arrays would stay in memory between ticks.
	clear(results)
	return again, noscript
}

// appendWaits appends each master's WAIT to a round trip's cmds and
// returns them with the round trip's timeout. The WAIT ends before the
// earliest judgement among the round trip's entries (until, less one
// round trip for its answer and the server's lag in answering a WAIT
// that timed out), not after its own timeout: a last renewal must be
// answered, or judged lost, within one round trip of its judgement,
// before the key can have run out anywhere (a replica promoted meanwhile
// included). Unacknowledged in time, it does not count; answered later
// than the round trip's timeout, it is a round trip with no answer.
func (r *Registry) appendWaits(cmds []rueidis.Completed, waits []*masterSync, until time.Time, timeout time.Duration) ([]rueidis.Completed, time.Duration) {
	if len(waits) == 0 {
		return cmds, timeout
	}
	left := time.Until(until)
	wait := max(min(waits[0].s.Timeout, left-r.cfg.RoundTrip-reentrant.WaitLag), time.Millisecond)
	for _, ms := range waits {
		// Built anew each round trip, routed to the master of its
		// renewals and sent after them on the same connection.
		cmds = append(cmds, r.c.B().Wait().Numreplicas(int64(ms.s.Replicas)).Timeout(min(ms.s.Timeout, wait).Milliseconds()).Build().SetSlot(ms.name))
	}
	return cmds, max(timeout, wait+r.cfg.RoundTrip, min(wait+reentrant.WaitLag+r.cfg.RoundTrip, left))
}

// errNoAnswer is a renewal round trip's error when no answer came by its
// deadline.
var errNoAnswer = errors.New("rlock: watchdog: no answer to the renewals within their deadline")

// send sends cmds (the pending renew commands of rb, and WAITs) in one
// round trip, and returns their results, or nil when none came within
// timeout: the judgement of a last renewal must not wait for a client
// that overruns its context (a connection being dialled, a master being
// switched). A round trip given up on is still waited for, in the
// background, until Config.Straggle after its send (timeout, when
// longer): until it ends, Quiet holds back a new acquisition of each
// field it renews (R3-6). Its deadline, not ctx, is what ends it: rueidis
// does not see a cancellation of a request alone on its connection. Run
// waits for it before it returns.
func (r *Registry) send(ctx context.Context, cmds []rueidis.Completed, timeout time.Duration, rb reentrant.RenewBatch, pending []int) []rueidis.RedisResult {
	rctx, cancel := context.WithTimeout(ctx, max(timeout, r.cfg.Straggle))
	done := make(chan []rueidis.RedisResult, 1)
	s := &stray{fin: make(chan struct{})}
	r.strays.Add(1)
	go func() {
		defer r.strays.Done()
		defer cancel()
		if r.cfg.Apart {
			done <- reentrant.DoMultiApart(rctx, r.c, cmds...)
		} else {
			done <- r.c.DoMulti(rctx, cmds...)
		}
		r.ended(s)
	}()
	t := time.NewTimer(timeout + time.Millisecond)
	defer t.Stop()
	select {
	case results := <-done:
		if ctx.Err() != nil || !errors.Is(results[0].Error(), context.DeadlineExceeded) {
			return results
		}
		// Its own deadline (Straggle, which may be the tick's) ended it:
		// no answer, and its copy may still be on the wire.
	case <-t.C:
	}
	r.givenUp(s, rb, pending)
	return nil
}

// givenUp lists s, a round trip of the pending commands of rb given up
// on, under the fields it renews, unless it ended meanwhile.
func (r *Registry) givenUp(s *stray, rb reentrant.RenewBatch, pending []int) {
	for _, i := range pending {
		for _, h := range rb.Holds[i] {
			s.fields = append(s.fields, field{h.Name, h.Field})
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.ended {
		return
	}
	s.listed = true
	r.nstrays.Add(1)
	for _, f := range s.fields {
		r.straying[f] = append(r.straying[f], s)
	}
}

// ended marks s, a round trip, ended, and takes it out of the fields it
// was listed under.
func (r *Registry) ended(s *stray) {
	r.mu.Lock()
	s.ended = true
	if s.listed {
		r.nstrays.Add(-1)
		for _, f := range s.fields {
			l := r.straying[f]
			for k, x := range l {
				if x == s {
					l = append(l[:k], l[k+1:]...)
					break
				}
			}
			if len(l) == 0 {
				delete(r.straying, f)
			} else {
				r.straying[f] = l
			}
		}
	}
	r.mu.Unlock()
	close(s.fin)
}

// waits returns the masters whose WAIT goes with the pending commands, in
// the order of their first command.
func (r *Registry) waits(pending []int, syncs []*masterSync) []*masterSync {
	if syncs == nil {
		return nil
	}
	var out []*masterSync
	seen := map[*masterSync]bool{}
	for _, i := range pending {
		if ms := syncs[i]; ms != nil && !seen[ms] {
			seen[ms] = true
			out = append(out, ms)
		}
	}
	return out
}

// failure is the error to record for a renewal that failed with err after
// one that failed with prev: err, and also prev's UnsyncedError when err
// is another kind of failure (a last round trip with no answer), so that
// the holder still hears that the renewals were never synced.
func failure(err, prev error) error {
	var ue *UnsyncedError
	if !errors.As(prev, &ue) || errors.As(err, new(*UnsyncedError)) {
		return err
	}
	return &afterUnsynced{err: err, unsynced: ue}
}

// afterUnsynced is a renewal's failure after renewals that ran but were
// acknowledged by no replica.
type afterUnsynced struct {
	err      error
	unsynced *UnsyncedError
}

func (e *afterUnsynced) Error() string {
	return e.err.Error() + ", after a " + e.unsynced.Error()
}

func (e *afterUnsynced) Unwrap() []error { return []error{e.err, e.unsynced} }

// UnsyncedError is the error of a renewal that ran on the master but that
// no replica acknowledged within Timeout: it did not extend the lease.
type UnsyncedError struct {
	Replicas int
	Timeout  time.Duration
}

func (e *UnsyncedError) Error() string {
	return fmt.Sprintf("renewal acknowledged by none of the master's %d replicas within %v", e.Replicas, e.Timeout)
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
	t := r.mono(limit)
	for _, i := range pending {
		for _, h := range rb.Holds[i] {
			if e := byKey[h]; e.judge < t {
				t = e.judge
			}
		}
	}
	return r.time(t)
}

// apply applies the answer of command i, sent at sent. It reports whether
// the command should be sent again: it failed on the network, or ran but
// no replica acknowledged it (unsynced), and some of its entries may
// still hold.
func (r *Registry) apply(tk *Tick, rb reentrant.RenewBatch, i int, res rueidis.RedisResult, sent time.Time, byKey map[reentrant.Hold]*Entry, unsynced error) (again bool) {
	renewed, err := reentrant.ParseRenew(res, len(rb.Holds[i]))
	if err != nil && tk.Err == nil {
		tk.Err = err
	}
	_, serverErr := rueidis.IsRedisErr(err)
	retryable := err == nil || !serverErr // a server's refusal is not sent again
	failed := r.applyHolds(tk, rb.Holds[i], byKey, renewed, err, unsynced, sent)
	return failed && retryable
}

// unanswered records the failure of the pending commands' renewals, whose
// round trip got no answer by its deadline: entries whose judgement time
// has come are lost.
func (r *Registry) unanswered(tk *Tick, rb reentrant.RenewBatch, pending []int, byKey map[reentrant.Hold]*Entry) {
	if tk.Err == nil {
		tk.Err = errNoAnswer
	}
	for _, i := range pending {
		r.applyHolds(tk, rb.Holds[i], byKey, nil, errNoAnswer, nil, time.Time{})
	}
}

// applyHolds applies one renew command's outcome to the entries of its
// holds: renewed (by hold) when err is nil, else the failure err. It
// reports whether some entry failed and may still hold.
func (r *Registry) applyHolds(tk *Tick, holds []reentrant.Hold, byKey map[reentrant.Hold]*Entry, renewed []bool, err, unsynced error, sent time.Time) (failed bool) {
	var losses []*Entry
	var why []*LossError
	now := time.Now()
	r.mu.Lock()
	for j, h := range holds {
		e := byKey[h]
		if e.gone || e.busy > 0 {
			continue // released meanwhile: its answer says nothing
		}
		fail := err
		switch {
		case err == nil && renewed[j] && unsynced == nil:
			tk.Renewed++
			e.lastErr = nil
			r.extendLocked(e, r.cfg.Lease, sent)
			continue
		case err == nil && !renewed[j]:
			r.removeLocked(e)
			losses = append(losses, e)
			why = append(why, &LossError{Name: e.name, Kind: observe.LossNotHeld, Reason: "renewal found the lock no longer held"})
			continue
		case err == nil:
			// Renewed on the master only: not renewed until a replica
			// has it. Judged, and sent again, as a failure.
			fail = unsynced
		}
		if le := r.failedLocked(e, fail, now); le != nil {
			losses = append(losses, e)
			why = append(why, le)
			continue
		}
		tk.Failed++
		failed = true
	}
	r.mu.Unlock()
	tk.Lost += len(losses)
	tellLost(losses, why)
	return failed
}

// tellLost calls each lost entry's onLost with why it was lost.
func tellLost(losses []*Entry, why []*LossError) {
	for k, e := range losses {
		if e.onLost != nil {
			e.onLost(e, why[k])
		}
	}
}

// failedLocked records a failed renewal of e, and returns its loss when
// e's judgement time has come.
func (r *Registry) failedLocked(e *Entry, err error, now time.Time) *LossError {
	e.lastErr = failure(err, e.lastErr)
	if r.mono(now) < e.judge {
		return nil
	}
	r.removeLocked(e)
	return ranOut(e)
}

func (r *Registry) report(tk *Tick) {
	tk.Duration = time.Since(tk.Start)
	if r.cfg.OnTick != nil && (tk.Commands > 0 || tk.Lost > 0) {
		r.cfg.OnTick(*tk)
	}
}
