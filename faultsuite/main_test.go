package faultsuite

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rlock-go/rlock/integration"

	// The Docker backend, so that integration.Backends runs every case on
	// Docker too.
	_ "github.com/rlock-go/rlock/integration/docker"
)

// Every goroutine of the suite — workers, the scheduler, the servers'
// proxies, the Clients' loops, porcupine's checkers — is joined before its
// case ends, so goleak ignores nothing. The stall meter runs around the
// tests (a round in which the process stalled is outside the
// assumptions: stallOutside) and is joined before goleak looks.
func TestMain(m *testing.M) { goleak.VerifyTestMain(metered{m}) }

// metered runs the tests with the stall meter running.
type metered struct{ m *testing.M }

// Run runs the tests with integration's stall meter running.
func (w metered) Run() int {
	integration.WatchStalls()
	defer integration.StopStalls()
	return w.m.Run()
}

// Environment variables and the flag that drive the suite (see doc.go).
const (
	envSeed     = "RLOCK_FAULT_SEED"
	envRounds   = "RLOCK_FAULT_ROUNDS"
	envDuration = "RLOCK_FAULT_DURATION"
	envReport   = "RLOCK_FAULT_REPORT"
	envTrace    = "RLOCK_FAULT_TRACE" // set: log every round's history
	envKinds    = "RLOCK_FAULT_KINDS" // comma-separated fault kinds to draw from; default all
)

// defaultRounds is the rounds of each case when neither RLOCK_FAULT_ROUNDS
// nor RLOCK_FAULT_DURATION is set: the bounded mode CI runs. The lead
// faults of the four cases (two backends, two locks) follow each other
// (see backendOffset), so that with twenty kinds (24 leads) a run over both
// backends leads at least one round with every kind.
const defaultRounds = 6

var reportFlag = flag.String("faultsuite.report", "", "append each case's summary as markdown table rows to this file (also "+envReport+")")

// settings is what the environment asked of this run.
type settings struct {
	seed     uint64
	rounds   int           // per case; 0: until duration is spent
	duration time.Duration // per case; 0: until rounds are done
	report   string        // file to append summaries to; "" for none
	kinds    []string      // fault kinds to draw from; nil: all
	// bounded: neither rounds nor duration was asked for, so rounds is
	// defaultRounds (CI's run); a topology may run fewer (topology.bounded).
	bounded bool
}

func loadSettings() (settings, error) {
	s := settings{report: os.Getenv(envReport)}
	if *reportFlag != "" {
		s.report = *reportFlag
	}
	if v := os.Getenv(envSeed); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("%s=%q: %v", envSeed, v, err)
		}
		s.seed = seed
	} else {
		s.seed = rand.Uint64N(1_000_000_000) // short enough to type back in
	}
	if v := os.Getenv(envRounds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return s, fmt.Errorf("%s=%q: want a positive number of rounds", envRounds, v)
		}
		s.rounds = n
	}
	if v := os.Getenv(envDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("%s=%q: want a positive duration such as 2m", envDuration, v)
		}
		s.duration = d
	}
	if v := os.Getenv(envKinds); v != "" {
		for k := range strings.SplitSeq(v, ",") {
			k = strings.TrimSpace(k)
			if !slices.ContainsFunc(kinds, func(f *faultKind) bool { return f.name == k }) {
				return s, fmt.Errorf("%s: no fault kind %q", envKinds, k)
			}
			s.kinds = append(s.kinds, k)
		}
	}
	if s.rounds == 0 && s.duration == 0 {
		s.rounds, s.bounded = defaultRounds, true
	}
	return s, nil
}
