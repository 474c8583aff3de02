package faultsuite

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/rlock-go/rlock/lock"
)

// promptAnswer is a round trip that no fault delayed: on loopback a few
// milliseconds even under the race detector.
const promptAnswer = 20 * time.Millisecond

// roundResult is what one round showed.
type roundResult struct {
	seed     uint64
	faults   []fault
	outside  bool          // the round broke an assumption
	stalled  time.Duration // the longest stall of the suite's process in the round (stallOutside)
	fence    bool          // the fencing counters survived its faults (never for the rwlock topology: no tokens)
	rw       bool          // the rwlock topology
	readings int           // the readers' holds (rwlock)
	holdings int
	writes   int
	// calls counts the calls made with a ctx deadline; cuts are those it
	// cut (slack_test.go).
	calls int
	cuts  []cut
	// closeStopped is what the round's close-stopped faults saw: Closes
	// made, Helds they ended, and problems (a Held live after its Close
	// returned, or ended with another cause; a hold of a closed Client
	// left in Redis beyond a lease).
	closes, closedHelds int
	closeProblems       []string

	// doubleGrants counts pairs of holdings where the older one wrote,
	// believing it held the lock, after the newer one's Lock had returned.
	doubleGrants int
	// staleRejected and staleAccepted count writes made after the
	// resource had accepted a write of a newer holding.
	staleRejected, staleAccepted int
	// freshRejected counts writes refused although no newer holding had
	// written: the token was below an older holding's.
	freshRejected int
	// inverted counts holdings whose token was not above that of every
	// holding granted before their Lock was even called.
	inverted int

	// signalled counts holdings whose context was cancelled with
	// ErrLockLost before their Unlock; late ones only after another
	// holding had been granted.
	signalled, late int
	// lateBy is the longest a late signal came after the other grant.
	lateBy time.Duration
	// lossDelay is the longest a watchdog took to report a lease that
	// ran out while renewals failed, after it must have run out.
	lossDelay time.Duration
	// unsignalled counts holdings that lost the lock (another was granted
	// meanwhile, or Unlock found it gone) without such a signal.
	unsignalled int
	// reads counts the hold counts read from Redis that were checked
	// (single master); countBelow those that showed fewer holds of a field
	// than its holdings alive and not told of a loss (a hold gone while
	// its holder believed it held), countAbove more than its holdings
	// could have had (a stray hold).
	reads, countBelow, countAbove int
	badReads                      []string // the reads out of bounds, for the failure's message
	// probed counts watchdog holds whose loss signal was checked against
	// Redis; falseLoss those Redis still held then (on a quorum).
	probed, falseLoss int
	// injected counts the commands the proxy rules lost or delayed, by
	// fault kind.
	injected map[string]int

	// queued is the waiters a fair lock's queue still held after every
	// worker's calls had returned (and leaveWithin passed): each waiter
	// that gives up must leave it.
	queued int64
	// tokenless: the topology's lock takes no fencing tokens (a fair
	// lock), so the resource cannot reject a stale write.
	tokenless bool

	model  string                // the porcupine model the round was checked against
	result porcupine.CheckResult // its verdict
	info   porcupine.LinearizationInfo

	history []holding
	events  *events
}

// check analyses the round's history once its workers are gone.
func (r *round) check() roundResult {
	hs := r.hist.snapshot()
	reads, failed, probes := r.hist.observations()
	// A fair lock and a read-write lock's write half take no tokens:
	// only exclusion and counts are checked.
	fenced := !r.topo.fair && !r.topo.rw
	res := roundResult{seed: r.seed, faults: r.faults, outside: r.outside(), stalled: r.stalled, fence: fenced && !r.countersLost(), tokenless: !fenced, rw: r.topo.rw,
		holdings: len(hs), history: hs, events: r.events}
	r.injectMu.Lock()
	res.injected = r.injected
	r.injectMu.Unlock()
	res.calls, res.cuts = r.dls.snapshot()
	for _, f := range r.faults {
		if s := f.mode.stop; s != nil {
			s.mu.Lock()
			res.closes += s.closes
			res.closedHelds += s.ended
			res.closeProblems = append(res.closeProblems, s.problems...)
			s.mu.Unlock()
		}
	}
	rs := r.readings.snapshot()
	res.readings = len(rs)
	res.doubleGrants += rwOverlaps(hs, rs)
	for _, p := range probes {
		h := &hs[p.holding]
		if p.known && h.lease == 0 && h.lostAt < h.unlockCall {
			res.probed++
			if p.held {
				res.falseLoss++
			}
		}
	}
	if res.outside {
		reads = nil // no exclusion: counts are not modelled
	}

	r.events.mu.Lock()
	res.lossDelay = r.events.lossDelay
	r.events.mu.Unlock()

	// Each name is a lock of its own (the multi topology has several):
	// its holdings and reads are checked apart from the others'.
	exclusion := !res.outside
	// A round put outside only by a stall may carry the mode faults
	// (shared owners, re-entries) that rounds led by an outside fault
	// never do, and the relaxed model's fence orders every acquire, the
	// re-entries of one holder included: its history is checked without
	// the fence in porcupine (the fencing counts, inverted tokens and
	// stale writes accepted, still are).
	modelFence := res.fence && !(res.outside && !r.faultOutside())
	res.model = modelName(exclusion, modelFence)
	var broken []string
	for i := range r.names() {
		ph, pr := byLock(hs, reads, i)
		for j := range ph {
			h := &ph[j]
			res.writes += len(h.writes)
			res.countLoss(ph, h)
			res.countOverlaps(ph, h)
			if fenced {
				res.countFencing(ph, h)
			}
		}
		pr = clean(ph, pr, failed)
		res.reads += len(pr)
		for _, rd := range pr {
			lo, hi := countBounds(ph, rd)
			switch {
			case rd.count < lo:
				res.countBelow++
				res.badReads = append(res.badReads, fmt.Sprintf("L%d owner %d count %d @%v-%v, at least %d", rd.lock, rd.field, rd.count, rd.call, rd.ret, lo))
			case rd.count > hi:
				res.countAbove++
				res.badReads = append(res.badReads, fmt.Sprintf("L%d owner %d count %d @%v-%v, at most %d", rd.lock, rd.field, rd.count, rd.call, rd.ret, hi))
			}
		}

		ops := operations(ph, pr)
		result, info := porcupine.CheckOperationsVerbose(lockModel(exclusion, modelFence), ops, 30*time.Second)
		if i == 0 || result == porcupine.Illegal && res.result != porcupine.Illegal || result == porcupine.Unknown && res.result == porcupine.Ok {
			res.result, res.info = result, info
		}
		if result == porcupine.Illegal && exclusion && res.fence {
			// Which part of the model the history breaks.
			var b []string
			if porcupine.CheckOperationsTimeout(lockModel(true, false), ops, 30*time.Second) == porcupine.Illegal {
				b = append(b, "exclusion or hold counts")
			}
			if porcupine.CheckOperationsTimeout(lockModel(false, true), ops, 30*time.Second) == porcupine.Illegal {
				b = append(b, "fencing")
			}
			if len(b) == 0 {
				b = append(b, "exclusion and fencing together")
			}
			if len(r.names()) > 1 {
				for k := range b {
					b[k] = fmt.Sprintf("%s on name %d", b[k], i)
				}
			}
			broken = append(broken, b...)
		}
	}
	if len(broken) > 0 {
		res.model += " (breaks " + strings.Join(broken, ", ") + ")"
	}
	return res
}

// firstNewer is the first grant to another field after h's, never if
// none: holdings of one field share the hold.
func firstNewer(hs []holding, h *holding) instant {
	first := never
	for j := range hs {
		if hs[j].field != h.field && hs[j].ret > h.ret && hs[j].ret < first {
			first = hs[j].ret
		}
	}
	return first
}

// countLoss classifies how h's hold ended: the lock was taken from h if a
// newer holding was granted before h gave it up.
func (res *roundResult) countLoss(hs []holding, h *holding) {
	newer := firstNewer(hs, h)
	switch {
	case h.lostAt < h.unlockCall:
		res.signalled++
		if newer < h.lostAt {
			res.late++
			res.lateBy = max(res.lateBy, h.lostAt-newer)
		}
	case newer < h.unlockCall || h.foundInRedis && h.unlockRet-h.unlockCall < promptAnswer:
		// Another holder got it while h still relied on it; or Unlock,
		// answered at once, found it gone in Redis, so it was gone before
		// Unlock. (A release queued at a stopped master, or retried
		// through an outage, may find the lease expired meanwhile: h had
		// given up the lock before that. A lease the watchdog judged run
		// out while the release was in flight is not found in Redis: the
		// watchdog judges before Redis lets the lock go.)
		res.unsignalled++
	}
}

// countOverlaps counts the newer holdings of other fields granted before a
// write h made believing it held the lock.
func (res *roundResult) countOverlaps(hs []holding, h *holding) {
	for j := range hs {
		if hs[j].ret <= h.ret || hs[j].field == h.field {
			continue
		}
		for _, w := range h.writes {
			if w.believed && w.at > hs[j].ret {
				res.doubleGrants++
				break
			}
		}
	}
}

// countFencing checks h's token against earlier grants and classifies its
// writes: stale when a newer holding's write was accepted before.
func (res *roundResult) countFencing(hs []holding, h *holding) {
	for j := range hs {
		if hs[j].ret < h.call && hs[j].token >= h.token {
			res.inverted++ // tokens must increase with the order of grants
			break
		}
	}
	for _, w := range h.writes {
		stale := false
		for j := range hs {
			// Holdings of one field share the hold: concurrent
			// re-entries may return in another order than Redis ran them.
			if hs[j].ret <= h.ret || hs[j].field == h.field {
				continue
			}
			for _, v := range hs[j].writes {
				stale = stale || v.accepted && v.at < w.at
			}
		}
		switch {
		case stale && w.accepted:
			res.staleAccepted++
		case stale:
			res.staleRejected++
		case !w.accepted:
			res.freshRejected++
		}
	}
}

// problems lists what the round showed that the documented guarantees
// rule out.
func (res roundResult) problems() []string {
	var ps []string
	if !res.outside {
		if res.doubleGrants > 0 {
			ps = append(ps, fmt.Sprintf("%d double grants inside the assumptions", res.doubleGrants))
		}
		if res.unsignalled > 0 {
			ps = append(ps, fmt.Sprintf("%d losses never signalled on the holder's context", res.unsignalled))
		}
	}
	if res.fence {
		if res.staleAccepted > 0 {
			ps = append(ps, fmt.Sprintf("%d stale writes accepted", res.staleAccepted))
		}
		if res.inverted > 0 {
			ps = append(ps, fmt.Sprintf("%d fencing tokens not above an earlier grant's", res.inverted))
		}
	}
	if res.countBelow > 0 {
		ps = append(ps, fmt.Sprintf("%d hold counts read from Redis below the live holds not told of a loss", res.countBelow))
	}
	if res.countAbove > 0 {
		ps = append(ps, fmt.Sprintf("%d hold counts read from Redis above the holds that could exist", res.countAbove))
	}
	if len(res.badReads) > 0 {
		// In the failure's message, before the history: a CI log shows a
		// failure's first lines, and the history may be long.
		ps = append(ps, fmt.Sprintf("the reads out of bounds (name, owner, count @ the read's span since the round began): %s", strings.Join(res.badReads, ", ")))
	}
	if res.result == porcupine.Illegal {
		ps = append(ps, "history not linearizable in the model "+res.model)
	}
	if over := overDeadline(res.cuts); len(over) > 0 {
		ps = append(ps, fmt.Sprintf("%d calls returned more than %v after their ctx deadline: %v", len(over), hardSlack, over))
	}
	if len(res.closeProblems) > 0 {
		ps = append(ps, fmt.Sprintf("%d problems of Clients closed while the master was stopped: %s", len(res.closeProblems), strings.Join(res.closeProblems, "; ")))
	}
	if res.queued > 0 {
		ps = append(ps, fmt.Sprintf("%d waiters left in the fair queue after every call returned", res.queued))
	}
	for _, f := range res.faults {
		if f.kind.name == "holder-pause" && (res.doubleGrants == 0 || !res.tokenless && res.staleRejected == 0) {
			ps = append(ps, fmt.Sprintf("the holder paused past its lease showed %d double grants and %d stale writes rejected; want both", res.doubleGrants, res.staleRejected))
		}
	}
	return ps
}

// lossSlack is how long after a loss was signalled Redis may still hold
// the lock: the watchdog judges a loss before the lease runs out, and a
// renewal whose answer was lost may have extended the key by a lease.
const lossSlack = watchdogLease + 150*time.Millisecond

// The porcupine model: a lock with hold counts and fencing, whose state is
// the holder field, its hold count, the last token granted and the highest
// token the resource accepted.
//
//   - acquire(h, f) -> token: the lock is free or held by f (exclusion); f
//     then has one more hold; the token is above the last one granted
//     (fence), unless f already held the lock (a re-entry's token is only
//     checked against other holders' through the resource);
//   - write(h, f, token) -> accepted: f holds the lock (exclusion), and the
//     resource accepted it exactly when the token was at least its highest;
//   - release(h, f): f held it (exclusion); it has one hold fewer, and the
//     lock is free when none is left;
//   - read(f) -> n: f's hold count in Redis (HGET on a direct connection):
//     its count when it holds the lock, 0 otherwise (exclusion).
//
// A hold lost with a signal is released somewhere between its grant and
// the signal plus lossSlack (the signal may come before Redis lets go);
// one whose Unlock found it lost, anywhere after its grant and before the
// Unlock returned, or, when the loss was judged by the client's clock
// rather than found in Redis, up to lossSlack after. Rounds outside
// the assumptions drop exclusion (and the reads); rounds whose faults may
// have lost the counters drop fence. Releases of holds whose Unlock failed
// may happen until the end of the history. Reads that an acquisition with
// an error may have disturbed (its request may have run, and be settled
// only by the field's next operation, its stray hold released only once
// the field holds nothing) are left out: see clean.
type opKind uint8

const (
	opAcquire opKind = iota
	opWrite
	opRelease
	opRead
)

type opInput struct {
	kind    opKind
	holding int
	field   uint64
	token   uint64
}

type opOutput struct {
	token    uint64
	accepted bool
	count    int
}

type lockState struct {
	holder uint64 // 0: free
	count  int
	fence  uint64
	max    uint64
}

func modelName(exclusion, fence bool) string {
	switch {
	case exclusion && fence:
		return "lock with hold counts and fencing"
	case exclusion:
		return "lock with hold counts (tokens unchecked)"
	case fence:
		return "fenced resource (no exclusion)"
	}
	return "resource only"
}

func lockModel(exclusion, fence bool) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return lockState{} },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(lockState), input.(opInput), output.(opOutput)
			switch in.kind {
			case opAcquire:
				if exclusion && s.holder != 0 && s.holder != in.field {
					return false, s
				}
				if fence {
					// A re-entry's token need not be above a concurrent
					// re-entry's of the same field (on RedLock both are
					// maxima over several masters' counters): tokens order
					// holders, not the holds of one holder.
					if out.token <= s.fence && !(exclusion && s.holder == in.field) {
						return false, s
					}
					s.fence = max(s.fence, out.token)
				}
				if exclusion {
					s.holder = in.field
					s.count++
				}
				return true, s
			case opWrite:
				if exclusion && s.holder != in.field {
					return false, s
				}
				if out.accepted != (in.token >= s.max) {
					return false, s
				}
				if out.accepted {
					s.max = in.token
				}
				return true, s
			case opRelease:
				if exclusion {
					if s.holder != in.field || s.count == 0 {
						return false, s
					}
					s.count--
					if s.count == 0 {
						s.holder = 0
					}
				}
				return true, s
			case opRead:
				if !exclusion {
					return true, s
				}
				if s.holder == in.field {
					return out.count == s.count, s
				}
				return out.count == 0, s
			}
			return false, s
		},
		Hash: func(state any) uint64 {
			s := state.(lockState)
			return s.holder*0x9e3779b97f4a7c15 ^ uint64(s.count)*0x94d049bb133111eb ^ s.fence*0xbf58476d1ce4e5b9 ^ s.max
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(opInput), output.(opOutput)
			switch in.kind {
			case opAcquire:
				return fmt.Sprintf("acquire #%d by %d -> token %d", in.holding, in.field, out.token)
			case opWrite:
				return fmt.Sprintf("write #%d token %d -> accepted %v", in.holding, in.token, out.accepted)
			case opRead:
				return fmt.Sprintf("read count of %d -> %d", in.field, out.count)
			}
			return fmt.Sprintf("release #%d by %d", in.holding, in.field)
		},
		DescribeState: func(state any) string {
			s := state.(lockState)
			return fmt.Sprintf("holder %d x%d, last token %d, resource at %d", s.holder, s.count, s.fence, s.max)
		},
	}
}

// releaseWindow is when h's hold may have ended in Redis, for the model.
func releaseWindow(h *holding, end instant) (call, ret instant) {
	call, ret = h.unlockCall, h.unlockRet
	if h.closedAt < call {
		// Its Client's Close ended it, and may release it from then
		// (Close ends the Helds before it releases).
		call = h.closedAt
	}
	switch {
	case h.lostAt < h.unlockCall:
		call, ret = h.ret, min(h.lostAt+lossSlack, end)
	case h.foundLost:
		call = h.ret
		if !h.foundInRedis {
			// Judged by the client's clock (a lease that ran out while the
			// release went unanswered): the watchdog judges before Redis lets
			// the lock go, so the key may outlive the Unlock by lossSlack.
			last := h.unlockRet
			if h.lostAt != never {
				last = max(last, h.lostAt)
			}
			ret = min(last+lossSlack, end)
		}
	case h.unlockErr != nil && !errors.Is(h.unlockErr, lock.ErrNotHeld):
		ret = end // the release's outcome is unknown: the lease ends it
	}
	if call == never { // never unlocked: it ends by its lease
		call, ret = h.ret, end
	}
	return call, max(ret, call)
}

// historyEnd is an instant after every event of the round.
func historyEnd(hs []holding, reads []countRead) instant {
	end := instant(0)
	for _, h := range hs {
		end = max(end, h.ret)
		if h.unlockRet != never {
			end = max(end, h.unlockRet)
		}
		if h.lostAt != never {
			end = max(end, h.lostAt)
		}
		for _, w := range h.writes {
			end = max(end, w.ret)
		}
	}
	for _, r := range reads {
		end = max(end, r.ret)
	}
	return end + 1
}

// operations turns holdings and count reads into porcupine's history.
func operations(hs []holding, reads []countRead) []porcupine.Operation {
	end := historyEnd(hs, reads)
	var ops []porcupine.Operation
	for _, h := range hs {
		ops = append(ops, porcupine.Operation{
			ClientId: h.client, Call: int64(h.call), Return: int64(h.ret),
			Input: opInput{kind: opAcquire, holding: h.id, field: h.field}, Output: opOutput{token: h.token},
		})
		for _, w := range h.writes {
			ops = append(ops, porcupine.Operation{
				ClientId: h.client, Call: int64(w.call), Return: int64(w.ret),
				Input: opInput{kind: opWrite, holding: h.id, field: h.field, token: h.token}, Output: opOutput{accepted: w.accepted},
			})
		}
		call, ret := releaseWindow(&h, end)
		ops = append(ops, porcupine.Operation{
			ClientId: h.client, Call: int64(call), Return: int64(ret),
			Input: opInput{kind: opRelease, holding: h.id, field: h.field}, Output: opOutput{},
		})
	}
	for _, r := range reads {
		ops = append(ops, porcupine.Operation{
			ClientId: 0, Call: int64(r.call), Return: int64(r.ret),
			Input: opInput{kind: opRead, field: r.field}, Output: opOutput{count: r.count},
		})
	}
	return ops
}

// clean leaves out the reads of a field that an acquisition of it with an
// error may have disturbed: from its call until the field is quiet again
// after it returned, that is until an Unlock of the field, called after
// it, returns with no other hold of the field possibly alive. Until then a
// request of it may have run (a stray hold, settled by the field's next
// operation and released once the field holds nothing, or undone).
func clean(hs []holding, reads []countRead, failed []failedAcquire) []countRead {
	end := historyEnd(hs, reads)
	quietAfter := func(f failedAcquire) instant {
		best := never
		for i := range hs {
			x := &hs[i]
			if x.field != f.field || x.unlockRet == never || x.unlockCall < f.ret || x.unlockRet >= best {
				continue
			}
			t := x.unlockRet
			quiet := true
			for j := range hs {
				y := &hs[j]
				if j == i || y.field != f.field || y.call > t {
					continue
				}
				if _, yend := releaseWindow(y, end); yend > t {
					quiet = false
					break
				}
			}
			for _, g := range failed {
				quiet = quiet && !(g.field == f.field && g.call <= t && g.ret > t)
			}
			if quiet {
				best = t
			}
		}
		return best
	}
	var out []countRead
	for _, r := range reads {
		ok := true
		for _, f := range failed {
			if f.field == r.field && f.call <= r.ret && r.call <= quietAfter(f) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// signalJitter is how late the suite may note a loss signal after the
// hold's context was cancelled (its callback, on a loaded machine).
const signalJitter = 50 * time.Millisecond

// countBounds are the fewest and most holds the read's field can have had
// in Redis during the read: at least its holdings granted before the read,
// not unlocked before it ended, and not told of a loss or of their
// Client's Close by then (the loss of a hold must be signalled before
// Redis lets it go; a Close releases what it can); at most those
// that may have been alive during it.
func countBounds(hs []holding, r countRead) (lo, hi int) {
	for i := range hs {
		x := &hs[i]
		if x.field != r.field {
			continue
		}
		if x.ret <= r.call && x.lostAt > r.ret+signalJitter && x.closedAt > r.ret+signalJitter && x.unlockCall >= r.ret {
			lo++
		}
		end := instant(never)
		switch {
		case x.lostAt < x.unlockCall:
			end = x.lostAt + lossSlack
		case x.unlockErr == nil && x.unlockRet != never:
			end = x.unlockRet
		}
		if x.call <= r.ret && end >= r.call {
			hi++
		}
	}
	return lo, hi
}

// dump describes the holdings of a round, for a failed round's log.
func dump(hs []holding) string {
	ms := func(t instant) string {
		if t == never {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(t)/float64(time.Millisecond))
	}
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "#%d w%d/g%d owner %d token %d: lock %s→%s", h.id, h.worker, h.client, h.field, h.token, ms(h.call), ms(h.ret))
		if h.lock > 0 || h.sibling || len(h.siblings) > 0 {
			fmt.Fprintf(&b, " on name %d", h.lock)
		}
		if h.lease > 0 {
			fmt.Fprintf(&b, " lease %v", h.lease)
		}
		for _, w := range h.writes {
			fmt.Fprintf(&b, "; write@%s believed=%v accepted=%v", ms(w.at), w.believed, w.accepted)
		}
		if h.paused {
			b.WriteString("; paused")
		}
		fmt.Fprintf(&b, "; lost@%s", ms(h.lostAt))
		if h.closedAt != never {
			fmt.Fprintf(&b, "; closed@%s", ms(h.closedAt))
		}
		fmt.Fprintf(&b, "; unlock %s→%s", ms(h.unlockCall), ms(h.unlockRet))
		if h.unlockErr != nil {
			fmt.Fprintf(&b, ": %v", h.unlockErr)
		}
		b.WriteString("\n")
	}
	return b.String()
}
