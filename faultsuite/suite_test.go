package faultsuite

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/rlock-go/rlock/integration"
)

// TestFaultSuite runs the rounds of every case: each backend (process,
// docker) times each topology (single master, RedLock over five).
func TestFaultSuite(t *testing.T) {
	s, err := loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	replay := fmt.Sprintf("%s=%d", envSeed, s.seed)
	t.Logf("seed %d (replay: %s)", s.seed, replay)
	fmt.Fprintf(os.Stderr, "faultsuite: seed %d (replay: %s go test ./faultsuite/)\n", s.seed, replay)

	for _, b := range integration.Backends() {
		t.Run(string(b), func(t *testing.T) {
			cl := startCluster(t, b)
			for _, topo := range topologies {
				t.Run(topo.name, func(t *testing.T) {
					runCase(t, s, cl, topo)
				})
			}
		})
	}
}

// runCase runs the rounds of one backend and topology, within the bounds
// of s and of the test's deadline, and reports their summary.
func runCase(t *testing.T, s settings, cl *cluster, topo topology) {
	c := &caseRun{cl: cl, topo: topo, sink: &eventSink{}, kinds: s.kinds}
	c.workers = newWorkers(t, cl.servers[:topo.masters], c.sink, topo)
	c.direct = newDirect(t, cl.servers[:topo.masters])
	if topo.rw {
		c.readers = newReaders(t, cl.servers[0])
	}
	sum := newSummary(cl.backend, topo)
	if s.bounded && topo.bounded > 0 {
		s.rounds = min(s.rounds, topo.bounded)
	}
	quiet := machineQuiet()
	start := time.Now()
	deadline, hasDeadline := t.Deadline()
	for i := 0; s.rounds == 0 || i < s.rounds; i++ {
		if s.duration > 0 && time.Since(start) >= s.duration {
			break
		}
		if hasDeadline && time.Until(deadline) < 2*roundTimeout {
			t.Logf("stopping after %d rounds: the test's deadline is near", i)
			break
		}
		seed := s.seed + uint64(i)
		replay := fmt.Sprintf("replay: %s=%d %s=1 go test -run 'TestFaultSuite/%s/%s' ./faultsuite/", envSeed, seed, envRounds, cl.backend, topo.name)
		res, err := c.round(t, seed)
		if err != nil {
			t.Errorf("round %d seed %d (%s): %v", i, seed, replay, err)
			sum.failed++
			continue
		}
		sum.add(res)
		t.Logf("round %d seed %d: %s: %s", i, seed, describe(res.faults), res.line())
		ps := res.problems()
		if len(ps) > 0 {
			sum.failed++
			t.Errorf("round %d seed %d (%s): %s", i, seed, replay, strings.Join(ps, "; "))
		}
		// A late signal inside the assumptions is no failure (the holder
		// did not act on the lock meanwhile) but deserves a look.
		if len(ps) > 0 || os.Getenv(envTrace) != "" || !res.outside && res.late > 0 {
			t.Logf("history of round %d:\n%s\nevents of round %d:\n%s", i, dump(res.history), i, res.events)
		}
		if len(ps) > 0 && res.result == porcupine.Illegal {
			path := filepath.Join(os.TempDir(), fmt.Sprintf("faultsuite-%s-%s-%d.html", cl.backend, topo.name, seed))
			if err := porcupine.VisualizePath(lockModel(!res.outside, res.fence), res.info, path); err == nil {
				t.Logf("porcupine's view of the history: %s", path)
			}
		}
	}
	sum.elapsed = time.Since(start)
	if n := sum.stalled; n > 0 {
		t.Logf("%d rounds were outside the assumptions because this process stalled %v or more in them (a machine that does not schedule it): their exclusion and loss checks did not run", n, stallOutside)
		// On a machine seen quiet when idle, stalls are the suite's own
		// load: half the rounds unchecked for it fails the case rather
		// than pass with its teeth gone.
		if quiet && 2*n > sum.inside.rounds+sum.outside.rounds {
			t.Errorf("%d of %d rounds put outside by stalls of %v or more, on a machine that showed none in %v idle: the suite's own load, not the machine's; its checks would not run", n, sum.inside.rounds+sum.outside.rounds, stallOutside, idleWindow)
		}
	}
	t.Logf("summary:\n%s", sum.markdown())
	if s.report != "" {
		if err := sum.appendTo(s.report); err != nil {
			t.Errorf("report: %v", err)
		}
	}
}

// idleWindow is how long the suite watches the stall meter, once, with
// nothing of its own running (machineQuiet).
const idleWindow = 2 * time.Second

var quietOnce = sync.OnceValue(func() bool {
	from := time.Now()
	time.Sleep(idleWindow) // what is measured is the machine while the suite waits
	return integration.LongestStall(from, time.Now()) < stallOutside
})

// machineQuiet reports whether the machine showed no stall of
// stallOutside or more in idleWindow, measured once, before the first
// case: a machine that freezes its processes about twice a second shows
// one; a quiet machine does not.
func machineQuiet() bool { return quietOnce() }
