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
	outside  bool // the round broke an assumption
	fence    bool // the fencing counters survived its faults
	holdings int
	writes   int

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

	model  string                // the porcupine model the round was checked against
	result porcupine.CheckResult // its verdict
	info   porcupine.LinearizationInfo

	history []holding
	events  *events
}

// check analyses the round's history once its workers are gone.
func (r *round) check() roundResult {
	hs := r.hist.snapshot()
	res := roundResult{seed: r.seed, faults: r.faults, outside: r.outside(), fence: !r.countersLost(), holdings: len(hs), history: hs, events: r.events}
	for i := range hs {
		h := &hs[i]
		res.writes += len(h.writes)
		res.countLoss(hs, h)
		res.countOverlaps(hs, h)
		res.countFencing(hs, h)
	}

	r.events.mu.Lock()
	res.lossDelay = r.events.lossDelay
	r.events.mu.Unlock()

	exclusion := !res.outside
	res.model = modelName(exclusion, res.fence)
	ops := operations(hs)
	res.result, res.info = porcupine.CheckOperationsVerbose(lockModel(exclusion, res.fence), ops, 30*time.Second)
	return res
}

// firstNewer is the first grant after h's, never if none.
func firstNewer(hs []holding, h *holding) instant {
	first := never
	for j := range hs {
		if hs[j].ret > h.ret && hs[j].ret < first {
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
	case newer < h.unlockCall || h.foundLost && h.unlockRet-h.unlockCall < promptAnswer:
		// Another holder got it while h still relied on it; or Unlock,
		// answered at once, found it gone, so it was gone before Unlock.
		// (A release queued at a stopped master, or retried through an
		// outage, may find the lease expired meanwhile: h had given up
		// the lock before that.)
		res.unsignalled++
	}
}

// countOverlaps counts the newer holdings granted before a write h made
// believing it held the lock.
func (res *roundResult) countOverlaps(hs []holding, h *holding) {
	for j := range hs {
		if hs[j].ret <= h.ret {
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
			if hs[j].ret <= h.ret {
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
	if res.result == porcupine.Illegal {
		ps = append(ps, "history not linearizable in the model "+res.model)
	}
	for _, f := range res.faults {
		if f.kind.name == "holder-pause" && (res.doubleGrants == 0 || res.staleRejected == 0) {
			ps = append(ps, fmt.Sprintf("the holder paused past its lease showed %d double grants and %d stale writes rejected; want both", res.doubleGrants, res.staleRejected))
		}
	}
	return ps
}

// The porcupine model: a lock with fencing, whose state is the holder, the
// last token granted and the highest token the resource accepted.
//
//   - acquire(h) -> token: the lock is free (exclusion), and the token is
//     above the last one granted (fence);
//   - write(h, token) -> accepted: h holds the lock (exclusion), and the
//     resource accepted it exactly when the token was at least its highest;
//   - release(h): h held it (exclusion); it is then free.
//
// A hold lost with a signal is released somewhere between its grant and
// the signal; one whose Unlock found it lost, anywhere after its grant.
// Rounds outside the assumptions drop exclusion; rounds whose faults may
// have lost the counters drop fence. Releases of holds whose Unlock failed
// may happen until the end of the history.
type opKind uint8

const (
	opAcquire opKind = iota
	opWrite
	opRelease
)

type opInput struct {
	kind    opKind
	holding int
	token   uint64
}

type opOutput struct {
	token    uint64
	accepted bool
}

type lockState struct {
	holder int // -1: free
	fence  uint64
	max    uint64
}

func modelName(exclusion, fence bool) string {
	switch {
	case exclusion && fence:
		return "lock with fencing"
	case exclusion:
		return "lock (tokens unchecked)"
	case fence:
		return "fenced resource (no exclusion)"
	}
	return "resource only"
}

func lockModel(exclusion, fence bool) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return lockState{holder: -1} },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(lockState), input.(opInput), output.(opOutput)
			switch in.kind {
			case opAcquire:
				if exclusion && s.holder != -1 {
					return false, s
				}
				if fence {
					if out.token <= s.fence {
						return false, s
					}
					s.fence = out.token
				}
				if exclusion {
					s.holder = in.holding
				}
				return true, s
			case opWrite:
				if exclusion && s.holder != in.holding {
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
					if s.holder != in.holding {
						return false, s
					}
					s.holder = -1
				}
				return true, s
			}
			return false, s
		},
		Hash: func(state any) uint64 {
			s := state.(lockState)
			return uint64(s.holder+1)*0x9e3779b97f4a7c15 ^ s.fence*0xbf58476d1ce4e5b9 ^ s.max
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(opInput), output.(opOutput)
			switch in.kind {
			case opAcquire:
				return fmt.Sprintf("acquire #%d -> token %d", in.holding, out.token)
			case opWrite:
				return fmt.Sprintf("write #%d token %d -> accepted %v", in.holding, in.token, out.accepted)
			}
			return fmt.Sprintf("release #%d", in.holding)
		},
		DescribeState: func(state any) string {
			s := state.(lockState)
			return fmt.Sprintf("holder %d, last token %d, resource at %d", s.holder, s.fence, s.max)
		},
	}
}

// operations turns holdings into porcupine's history.
func operations(hs []holding) []porcupine.Operation {
	end := instant(0)
	for _, h := range hs {
		end = max(end, h.ret)
		if h.unlockRet != never {
			end = max(end, h.unlockRet)
		}
		for _, w := range h.writes {
			end = max(end, w.ret)
		}
	}
	end++
	var ops []porcupine.Operation
	for _, h := range hs {
		ops = append(ops, porcupine.Operation{
			ClientId: h.worker, Call: int64(h.call), Return: int64(h.ret),
			Input: opInput{kind: opAcquire, holding: h.id}, Output: opOutput{token: h.token},
		})
		for _, w := range h.writes {
			ops = append(ops, porcupine.Operation{
				ClientId: h.worker, Call: int64(w.call), Return: int64(w.ret),
				Input: opInput{kind: opWrite, holding: h.id, token: h.token}, Output: opOutput{accepted: w.accepted},
			})
		}
		call, ret := h.unlockCall, h.unlockRet
		switch {
		case h.lostAt < h.unlockCall:
			call, ret = h.ret, h.lostAt
		case h.foundLost:
			call = h.ret
		case h.unlockErr != nil && !errors.Is(h.unlockErr, lock.ErrNotHeld):
			ret = end // the release's outcome is unknown: the lease ends it
		}
		if call == never { // never unlocked: it ends by its lease
			call, ret = h.ret, end
		}
		ops = append(ops, porcupine.Operation{
			ClientId: h.worker, Call: int64(call), Return: int64(ret),
			Input: opInput{kind: opRelease, holding: h.id}, Output: opOutput{},
		})
	}
	return ops
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
		fmt.Fprintf(&b, "#%d w%d token %d: lock %s→%s", h.id, h.worker, h.token, ms(h.call), ms(h.ret))
		for _, w := range h.writes {
			fmt.Fprintf(&b, "; write@%s believed=%v accepted=%v", ms(w.at), w.believed, w.accepted)
		}
		if h.paused {
			b.WriteString("; paused")
		}
		fmt.Fprintf(&b, "; lost@%s; unlock %s→%s", ms(h.lostAt), ms(h.unlockCall), ms(h.unlockRet))
		if h.unlockErr != nil {
			fmt.Fprintf(&b, ": %v", h.unlockErr)
		}
		b.WriteString("\n")
	}
	return b.String()
}
