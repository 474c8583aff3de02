package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A sentinel's timer runs ten times a second, and each run looks at how
// long it has been since the last: more than 2s (or a clock that went
// back), and the sentinel enters TILT, logging "+tilt #tilt mode
// entered". For 30s then it acts on nothing: it starts no failover,
// carries none on, and votes for no other sentinel's; it logs "-tilt
// #tilt mode exited" when it leaves. Its timer misses 2s only when its
// process did not run: a machine or VM that stalled, or the sentinel's
// one thread waiting on its disk (it fsyncs its configuration file each
// time it rewrites it: at start and, on every sentinel at once, at each
// failover). A test that asked for a failover during a TILT fails
// whatever the library does; CI saw that once in
// pubsub's TestHubReconnectFollowsSentinelFailover, all three sentinels
// entering TILT together right after saving their configuration, while
// the CPU stall meter saw nothing.
//
// So a sentinel's TILT is evidence of a stall, as a CPU stall is: the
// group reads it from the sentinels' logs (Tilts), and RedisSentinel logs
// each one, when the test ends, on a line starting with StallMark, which
// internal/retest reads as evidence to run a failed test again. A TILT
// the test made itself, by pausing that sentinel (Server.Pause), is
// logged without StallMark: it is no excuse.

// StallMark starts every line that the helpers log when a process a test
// started was seen stalled: a sentinel's TILT. internal/retest runs a
// failed test again when its output has such a line, as when a CPU was
// seen stalled while it ran (never when the failure is final for another
// reason: a race, a panic, a broken exclusion).
const StallMark = "rlock: integration: stall: "

// tiltAfterResume is how long after a Pause of a sentinel ends that a
// TILT it enters is put down to the Pause: a resumed sentinel logs it at
// its timer's first run, within 100ms on a machine that runs it.
const tiltAfterResume = 2 * time.Second

// tiltLayout is the time in a Redis log line: "6077:X 01 Dec 2026
// 03:31:04.659 # +tilt #tilt mode entered", in the local time zone.
const tiltLayout = "02 Jan 2006 15:04:05.000"

// Tilt is one TILT of a sentinel of a SentinelGroup, as its log tells.
type Tilt struct {
	// Sentinel is the sentinel's DirectAddr.
	Sentinel string
	// From is when it entered TILT (the log's time, to the millisecond).
	From time.Time
	// To is when it left TILT, or entered it again (the next Tilt starts
	// then); zero when its log does not say (it is still in TILT, or was
	// killed in it).
	To time.Time
	// Paused is set when the group's own Pause of this sentinel explains
	// the TILT: it was entered more than 1.9s after the Pause began (a
	// TILT needs the sentinel's timer to miss 2s) and no later than 2s
	// after its Resume. Such a TILT is no evidence of a stall.
	Paused bool
}

// String says what happened: "sentinel 127.0.0.1:40823 entered TILT at
// 03:31:56.236 (in it until 03:32:26.301)".
func (t Tilt) String() string {
	s := fmt.Sprintf("sentinel %s entered TILT at %s", t.Sentinel, t.From.Format("15:04:05.000"))
	if t.To.IsZero() {
		return s + " (not seen leaving it)"
	}
	return s + " (in it until " + t.To.Format("15:04:05.000") + ")"
}

// Tilts returns the TILTs the group's sentinels have logged since they
// started, each sentinel's in order. Call it before Close, which removes
// the logs.
func (g *SentinelGroup) Tilts() []Tilt {
	var out []Tilt
	for _, s := range g.sentinels {
		p, ok := s.b.(*process)
		if !ok {
			continue
		}
		s.mu.Lock()
		pauses := append([]span(nil), p.pauses...)
		s.mu.Unlock()
		for _, t := range tiltsOf(string(p.logSince(0))) {
			t.Sentinel = s.DirectAddr()
			t.Paused = pausedAt(pauses, t.From)
			out = append(out, t)
		}
	}
	return out
}

// tiltsOf reads the TILTs of a sentinel's log. A line whose time cannot
// be read is left out.
func tiltsOf(log string) []Tilt {
	var out []Tilt
	open := -1 // the index of a TILT not yet left
	for line := range strings.SplitSeq(log, "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || (f[6] != "+tilt" && f[6] != "-tilt") {
			continue
		}
		at, err := time.ParseInLocation(tiltLayout, strings.Join(f[1:5], " "), time.Local)
		if err != nil {
			continue
		}
		if open >= 0 {
			out[open].To = at
			open = -1
		}
		if f[6] == "+tilt" {
			out = append(out, Tilt{From: at})
			open = len(out) - 1
		}
	}
	return out
}

// tiltAfterPause is how long after a pause starts that a TILT it causes
// is entered, at the soonest: the sentinel's timer must miss 2s, and it
// last ran at most 100ms (it runs at 10 to 19 Hz) before the pause.
const tiltAfterPause = 1900 * time.Millisecond

// pausedAt reports whether a TILT entered at from (the log's time, to the
// millisecond) is explained by one of pauses: entered more than
// tiltAfterPause after its start, and no later than tiltAfterResume after
// its end (a pause not yet ended counts as ending now). A TILT entered
// sooner, even one logged in the very millisecond the pause began, was
// entered before it: the sentinel ran, and a stall stopped it before.
func pausedAt(pauses []span, from time.Time) bool {
	for _, ps := range pauses {
		to := ps.to
		if to.IsZero() {
			to = time.Now()
		}
		if from.After(ps.from.Add(tiltAfterPause)) && !from.After(to.Add(tiltAfterResume)) {
			return true
		}
	}
	return false
}

// tiltLines are the lines RedisSentinel logs of the group's TILTs: a
// stall (StallMark first) unless the test's own Pause explains it.
func (g *SentinelGroup) tiltLines() []string {
	var lines []string
	for _, t := range g.Tilts() {
		if t.Paused {
			lines = append(lines, fmt.Sprintf("rlock: integration: %v, after the test paused it: not a stall", t))
			continue
		}
		lines = append(lines, fmt.Sprintf("%s%v: its timer ran 2s or more late (its machine, or its disk, stalled), and for 30s it fails nothing over", StallMark, t))
	}
	return lines
}

// logTilts logs tiltLines to tb.
func (g *SentinelGroup) logTilts(tb testing.TB) {
	tb.Helper()
	for _, l := range g.tiltLines() {
		tb.Log(l)
	}
}
