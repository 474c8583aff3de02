package integration

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// A process stopped (SIGSTOP) for 400 ms by another process is seen
// stalled for about that long within the window, and not outside it.
func TestStallMeterSeesTheProcessStopped(t *testing.T) {
	if benchmarking() {
		t.Skip("the stall meter does not run while benchmarks run")
	}
	WatchStalls() // returns once every meter is running
	defer StopStalls()
	from := time.Now()
	pid := strconv.Itoa(os.Getpid())
	stopper := exec.Command("sh", "-c", "kill -STOP "+pid+"; sleep 0.4; kill -CONT "+pid)
	if err := stopper.Run(); err != nil {
		t.Fatalf("stop and continue the test process: %v", err)
	}
	time.Sleep(50 * time.Millisecond) // a meter woke after the stop
	to := time.Now()
	got := Stalled(from, to)
	t.Logf("window %v, stalled %v", to.Sub(from).Round(time.Millisecond), got.Round(time.Millisecond))
	if got < 300*time.Millisecond || got > to.Sub(from) {
		t.Errorf("Stalled over a window with a 400 ms SIGSTOP = %v, want 300 ms to the window's %v", got, to.Sub(from))
	}
	if before := Stalled(from.Add(-time.Hour), from.Add(-time.Minute)); before != 0 {
		t.Errorf("Stalled over a window before the meter ran = %v, want 0", before)
	}
}

// Only the time every CPU was stalled at once counts, each CPU's
// overlapping stalls once, and only inside the window.
func TestStalledCountsWhatEveryCPUStalled(t *testing.T) {
	m := &stallMeter
	m.mu.Lock()
	saved, savedLooked := m.stalls, m.looked
	t0 := time.Now().Add(-time.Hour)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	m.looked = make([]time.Time, 2) // two CPUs metered
	m.stalls = []stall{
		{at(100), at(300), 0}, {at(200), at(400), 0}, {at(500), at(600), 0}, {at(700), at(800), 0},
		{at(150), at(250), 1}, {at(350), at(550), 1}, {at(360), at(370), 1},
	}
	m.mu.Unlock()
	defer func() { m.mu.Lock(); m.stalls, m.looked = saved, savedLooked; m.mu.Unlock() }()
	for _, c := range []struct {
		from, to int
		want     time.Duration
	}{
		{0, 1000, 200 * time.Millisecond}, // 150-250, 350-400, 500-550
		{200, 520, 120 * time.Millisecond},
		{600, 1000, 0}, // CPU 0 alone
		{540, 560, 10 * time.Millisecond},
	} {
		if got := Stalled(at(c.from), at(c.to)); got != c.want {
			t.Errorf("Stalled(%d ms, %d ms) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	// LongestStall: one CPU is enough; only stalls overlapping the window.
	for _, c := range []struct {
		from, to int
		want     time.Duration
	}{
		{0, 1000, 200 * time.Millisecond}, // 100-300, 200-400 or 350-550
		{600, 1000, 100 * time.Millisecond},
		{800, 1000, 0}, // ends where the window starts
		{360, 365, 200 * time.Millisecond},
	} {
		if got := LongestStall(at(c.from), at(c.to)); got != c.want {
			t.Errorf("LongestStall(%d ms, %d ms) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
