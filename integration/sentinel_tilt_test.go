package integration

import (
	"bufio"
	"context"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tiltStop is how long the tests stop a sentinel: more than the 2s
// without a timer run that puts it in TILT.
const tiltStop = 3 * time.Second

// watchTilts subscribes to s's +tilt channel and returns a function that
// waits, bounded by ctx, for its next message: the sentinel's own signal
// that it entered TILT.
func watchTilts(ctx context.Context, t *testing.T, s *Server) func() {
	t.Helper()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.DirectAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("*2\r\n$9\r\nSUBSCRIBE\r\n$5\r\n+tilt\r\n")); err != nil {
		t.Fatal(err)
	}
	if v, err := readValue(r, 0); err != nil || len(v.([]any)) != 3 || v.([]any)[0] != "subscribe" {
		t.Fatalf("SUBSCRIBE +tilt on sentinel %s: %v, %v", s.DirectAddr(), v, err)
	}
	return func() {
		t.Helper()
		v, err := readValue(r, 0)
		if a, _ := v.([]any); err != nil || len(a) != 3 || a[0] != "message" || a[1] != "+tilt" {
			t.Fatalf("waiting for sentinel %s's +tilt: %v, %v%s", s.DirectAddr(), v, err, logTail(s.b.(*process).logSince(0), 8))
		}
	}
}

// stopFor stops p for d with SIGSTOP and SIGCONT sent straight to it, as
// a stalled machine stops a process: the group's Pause is not told.
func stopFor(ctx context.Context, t *testing.T, p *process, d time.Duration) {
	t.Helper()
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := p.waitState(ctx, func(s byte) bool { return s == 'T' }); err != nil {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		t.Fatal(err)
	}
	time.Sleep(d) // the stall itself, not a wait for anything
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := p.waitState(ctx, func(s byte) bool { return s != 'T' }); err != nil {
		t.Fatal(err)
	}
}

// A sentinel stopped for 3s from outside the helper, as a stalled machine
// stops it, enters TILT: Tilts reports it, and the line RedisSentinel
// logs of it starts with StallMark. A TILT the test's own Pause caused is
// reported Paused and logged without StallMark: it excuses nothing.
//
// The group is started without RedisSentinel, and the test's messages
// mask StallMark (masked): the TILT it makes is real, and logging its
// mark would let internal/retest run this test again on any failure,
// including one of the very code that tells a stall (review of the
// change that added it).
func TestSentinelTiltIsSeenAsAStall(t *testing.T) {
	g, err := StartSentinel(context.Background(), SentinelOptions{Replicas: 1, Sentinels: 1})
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("rlock: integration: close sentinel group: %v", err)
		}
	})
	ctx := sentinelCtx(t)
	s := g.Sentinels()[0]
	tilted := watchTilts(ctx, t, s)
	if got := g.Tilts(); len(got) != 0 {
		t.Fatalf("Tilts of a sentinel nothing stopped: %v", got)
	}

	from := time.Now().Truncate(time.Millisecond)
	stopFor(ctx, t, s.b.(*process), tiltStop)
	tilted()
	got := g.Tilts()
	if len(got) != 1 || got[0].Sentinel != s.DirectAddr() || got[0].Paused || got[0].From.Before(from) || got[0].From.After(time.Now()) {
		t.Fatalf("Tilts after a 3s stop from %s: %+v; want one since then, of %s, not Paused", from.Format("15:04:05.000"), got, s.DirectAddr())
	}
	lines := g.tiltLines()
	want := StallMark + "sentinel " + s.DirectAddr() + " entered TILT at " + got[0].From.Format("15:04:05.000")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		t.Fatalf("logged %q, want one line starting %q", masked(lines...), masked(want))
	}

	if err := s.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(tiltStop) // the pause itself
	if err := s.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	tilted()
	got = g.Tilts()
	if len(got) != 2 || !got[1].Paused || got[0].Paused || !got[0].To.Equal(got[1].From) {
		t.Fatalf("Tilts after a Pause of 3s: %+v; want the first, then one Paused that ended it", got)
	}
	lines = g.tiltLines()
	if len(lines) != 2 || strings.Contains(lines[1], StallMark) || !strings.Contains(lines[1], "not a stall") {
		t.Fatalf("logged %q, want the Pause's TILT without the stall mark", masked(lines...))
	}
}

// masked is lines with StallMark replaced, for a message of a test that
// must not read as a stall's evidence.
func masked(lines ...string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.ReplaceAll(l, StallMark, "<StallMark>")
	}
	return out
}

// tiltsOf reads +tilt and -tilt lines, and pausedAt puts a TILT down to
// a pause when it was entered more than 1.9s after the pause began and
// no later than tiltAfterResume after its end.
func TestTiltsOfALog(t *testing.T) {
	log := strings.Join([]string{
		"6077:X 01 Dec 2026 03:31:00.666 # +monitor master m 127.0.0.1 39431 quorum 1",
		"6077:X 01 Dec 2026 03:31:04.659 # +tilt #tilt mode entered",
		"6077:X 01 Dec 2026 03:31:34.700 # -tilt #tilt mode exited",
		"6077:X 01 Dec 2026 03:32:00.000 # +tilt #tilt mode entered",
		"6077:X 01 Dec 2026 03:32:05.000 # +tilt #tilt mode entered",
		"6077:X 31 Foo 2026 03:33:00.000 # +tilt #tilt mode entered",
		"",
	}, "\n")
	at := func(hms string) time.Time {
		v, err := time.ParseInLocation(tiltLayout, "01 Dec 2026 "+hms, time.Local)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	got := tiltsOf(log)
	want := []Tilt{
		{From: at("03:31:04.659"), To: at("03:31:34.700")},
		{From: at("03:32:00.000"), To: at("03:32:05.000")},
		{From: at("03:32:05.000")},
	}
	if len(got) != len(want) {
		t.Fatalf("tiltsOf = %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].From.Equal(want[i].From) || !got[i].To.Equal(want[i].To) {
			t.Errorf("TILT %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// The pause starts 0.4ms into 03:31:01.000: a TILT logged in that
	// very millisecond was entered before the sentinel stopped (CI saw a
	// stall's TILT logged just as the test's Pause began, and counted as
	// the Pause's), and one the pause caused needs the sentinel's timer
	// to miss 2s, its last run at most 100ms before the pause.
	pauses := []span{{from: at("03:31:01.000").Add(400 * time.Microsecond), to: at("03:31:04.000")}}
	for hms, want := range map[string]bool{
		"03:31:00.999": false,
		"03:31:01.000": false,
		"03:31:02.000": false,
		"03:31:02.900": false,
		"03:31:02.901": true,
		"03:31:04.659": true,
		"03:31:06.000": true,
		"03:31:06.001": false,
	} {
		if got := pausedAt(pauses, at(hms)); got != want {
			t.Errorf("pausedAt(a pause 03:31:01-03:31:04, %s) = %v, want %v", hms, got, want)
		}
	}
}
