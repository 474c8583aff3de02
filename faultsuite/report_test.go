package faultsuite

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/rlock-go/rlock/integration"
)

// tally adds up rounds.
type tally struct {
	rounds                        int
	holdings, writes              int
	doubleGrants                  int
	staleRejected, staleAccepted  int
	freshRejected, inverted       int
	signalled, late, unsignalled  int
	lateBy, lossDelay             time.Duration
	unknown                       int // porcupine timed out
	illegal                       int // porcupine: not linearizable
	reads, countBelow, countAbove int
	probed, falseLoss             int
	calls                         int   // made with a ctx deadline
	cuts                          []cut // ... and cut by it
	closes, closedHelds           int   // close-stopped: Closes, and the Helds they ended
}

func (t *tally) add(res roundResult) {
	t.rounds++
	t.holdings += res.holdings
	t.writes += res.writes
	t.doubleGrants += res.doubleGrants
	t.staleRejected += res.staleRejected
	t.staleAccepted += res.staleAccepted
	t.freshRejected += res.freshRejected
	t.inverted += res.inverted
	t.signalled += res.signalled
	t.late += res.late
	t.unsignalled += res.unsignalled
	t.lateBy = max(t.lateBy, res.lateBy)
	t.lossDelay = max(t.lossDelay, res.lossDelay)
	if res.result == porcupine.Unknown {
		t.unknown++
	}
	if res.result == porcupine.Illegal {
		t.illegal++
	}
	t.reads += res.reads
	t.countBelow += res.countBelow
	t.countAbove += res.countAbove
	t.probed += res.probed
	t.falseLoss += res.falseLoss
	t.calls += res.calls
	t.cuts = append(t.cuts, res.cuts...)
	t.closes += res.closes
	t.closedHelds += res.closedHelds
}

// summary is one case's run.
type summary struct {
	backend integration.Backend
	topo    topology
	inside  tally
	outside tally
	faults  map[string]int    // every fault injected, by kind
	acted   map[string]int    // proxy rules that acted, by kind
	byKind  map[string]*tally // rounds by their lead fault
	seeds   []uint64
	failed  int
	stalled int // rounds put outside by a stall of the suite's process
	elapsed time.Duration
	started time.Time
}

func newSummary(b integration.Backend, topo topology) *summary {
	return &summary{backend: b, topo: topo, faults: map[string]int{}, acted: map[string]int{}, byKind: map[string]*tally{}}
}

func (s *summary) add(res roundResult) {
	if res.stalled >= stallOutside {
		s.stalled++
	}
	if res.outside {
		s.outside.add(res)
	} else {
		s.inside.add(res)
	}
	for _, f := range res.faults {
		s.faults[f.kind.name]++
	}
	for k, n := range res.injected {
		s.acted[k] += n
	}
	lead := res.faults[0].kind.name
	if s.byKind[lead] == nil {
		s.byKind[lead] = &tally{}
	}
	s.byKind[lead].add(res)
	s.seeds = append(s.seeds, res.seed)
}

// line is one round's figures for the log.
func (res roundResult) line() string {
	reads := ""
	if res.rw {
		reads = fmt.Sprintf(" (and %d read holds)", res.readings)
	}
	return fmt.Sprintf("%d holds%s, %d writes; double grants %d; stale writes rejected %d, accepted %d; fresh writes rejected %d; inverted tokens %d; losses signalled %d (late %d, by up to %v), unsignalled %d; false losses %d of %d probed; counts read %d, below %d, above %d; commands hit %v; losses reported up to %v after the lease ran out; %s: %s",
		res.holdings, reads, res.writes, res.doubleGrants, res.staleRejected, res.staleAccepted, res.freshRejected, res.inverted,
		res.signalled, res.late, res.lateBy.Round(time.Millisecond), res.unsignalled, res.falseLoss, res.probed,
		res.reads, res.countBelow, res.countAbove, res.injected, res.lossDelay.Round(time.Millisecond), res.model, verdict(res.result)) + "; " + slackLine(res.calls, res.cuts) + closeLine(res.closes, res.closedHelds) + stallLine(res.stalled)
}

// stallLine tells of a round put outside the assumptions by a stall of
// the suite's process (stallOutside).
func stallLine(stalled time.Duration) string {
	if stalled < stallOutside {
		return ""
	}
	return fmt.Sprintf("; outside the assumptions: the suite's process stalled %v (a CPU not scheduled)", stalled.Round(time.Millisecond))
}

// closeLine counts a round's close-stopped Closes, if any.
func closeLine(closes, ended int) string {
	if closes == 0 {
		return ""
	}
	return fmt.Sprintf("; %d Closes with the master stopped ended %d Helds", closes, ended)
}

func verdict(r porcupine.CheckResult) string {
	switch r {
	case porcupine.Ok:
		return "linearizable"
	case porcupine.Illegal:
		return "NOT linearizable"
	}
	return "unknown (timed out)"
}

func (s *summary) faultList() string {
	var parts []string
	for _, k := range kinds {
		if n := s.faults[k.name]; n > 0 {
			p := fmt.Sprintf("%s %d", k.name, n)
			if k.mode && s.acted[k.name] > 0 {
				p += fmt.Sprintf(" (%d commands hit)", s.acted[k.name])
			}
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ", ")
}

func (s *summary) seedRange() string {
	if len(s.seeds) == 0 {
		return "-"
	}
	lo, hi := s.seeds[0], s.seeds[len(s.seeds)-1]
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

// slackCell is the table's cell of the calls with a ctx deadline, and
// the Closes made while the master was stopped.
func (t *tally) slackCell() string {
	s := slackLine(t.calls, t.cuts)
	if t.closes > 0 {
		s += fmt.Sprintf("; %d Closes with the master stopped, %d Helds ended", t.closes, t.closedHelds)
	}
	return s
}

// The tables' headers.
const (
	runHeader = "| Backend | Lock | Rounds in / out | Faults injected | Holds | Double grants in / out | Stale writes rejected / accepted | Inverted tokens in / out | Losses signalled (late) / unsignalled, in | Losses signalled (late) / unsignalled, out | False losses / watchdog losses probed | Counts read, below / above | Not linearizable in / out | Loss reported after the lease ran out, max | Calls with a ctx deadline: cut, p99 / worst slack | Seeds | Time |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
	kindHeader = "| Backend | Lock | Lead fault | Rounds | Holds | Double grants | Stale writes rejected / accepted | Fresh writes rejected | Inverted tokens | Losses signalled (late) / unsignalled | False losses / probed | Counts read, below / above | Not linearizable | Loss reported after the lease ran out, max | Calls with a ctx deadline: cut, p99 / worst slack |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
)

// row is the case's line of the run table.
func (s *summary) row() string {
	in, out := s.inside, s.outside
	rounds := fmt.Sprintf("%d / %d", in.rounds, out.rounds)
	if s.stalled > 0 {
		rounds += fmt.Sprintf(" (%d by stalls)", s.stalled)
	}
	if s.failed > 0 {
		rounds += fmt.Sprintf(", %d failed", s.failed)
	}
	if n := in.unknown + out.unknown; n > 0 {
		rounds += fmt.Sprintf(", %d unchecked", n)
	}
	all := in
	all.calls += out.calls
	all.cuts = append(slices.Clone(in.cuts), out.cuts...)
	all.closes += out.closes
	all.closedHelds += out.closedHelds
	return fmt.Sprintf("| %s | %s | %s | %s | %d | %d / %d | %d / %d | %d / %d | %d (%d) / %d | %d (%d) / %d | %d / %d | %d, %d / %d | %d / %d | %v | %s | %s | %v |\n",
		s.backend, s.topo.name, rounds, s.faultList(), in.holdings+out.holdings,
		in.doubleGrants, out.doubleGrants,
		in.staleRejected+out.staleRejected, in.staleAccepted+out.staleAccepted,
		in.inverted, out.inverted,
		in.signalled, in.late, in.unsignalled, out.signalled, out.late, out.unsignalled,
		in.falseLoss+out.falseLoss, in.probed+out.probed, in.reads, in.countBelow, in.countAbove, in.illegal, out.illegal,
		max(in.lossDelay, out.lossDelay).Round(time.Millisecond), all.slackCell(), s.seedRange(), s.elapsed.Round(time.Second))
}

// kindRows are the case's lines of the table by lead fault.
func (s *summary) kindRows() string {
	var b strings.Builder
	for _, k := range kinds {
		t := s.byKind[k.name]
		if t == nil {
			continue
		}
		name := k.name
		if k.outside {
			name += " (outside)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %d / %d | %d | %d | %d (%d) / %d | %d / %d | %d, %d / %d | %d | %v | %s |\n",
			s.backend, s.topo.name, name, t.rounds, t.holdings, t.doubleGrants, t.staleRejected, t.staleAccepted,
			t.freshRejected, t.inverted, t.signalled, t.late, t.unsignalled, t.falseLoss, t.probed,
			t.reads, t.countBelow, t.countAbove, t.illegal, t.lossDelay.Round(time.Millisecond), t.slackCell())
	}
	return b.String()
}

func (s *summary) markdown() string {
	m := runHeader + s.row() + "\n" + kindHeader + s.kindRows()
	if s.failed > 0 {
		m += fmt.Sprintf("\n%d rounds failed.\n", s.failed)
	}
	return m
}

// appendTo appends the case's rows to the report file: the run table's
// row to the first section and the rows by lead fault to the second. A
// new file gets both headers.
func (s *summary) appendTo(path string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	runs, byKind := string(old), ""
	if i := strings.Index(runs, kindHeader); i >= 0 {
		runs, byKind = runs[:i], runs[i+len(kindHeader):]
	}
	runs = strings.TrimRight(runs, "\n")
	if runs == "" {
		runs = strings.TrimRight(runHeader, "\n")
	}
	out := runs + "\n" + strings.TrimRight(s.row(), "\n") + "\n\n" + kindHeader + byKind + s.kindRows()
	return os.WriteFile(path, []byte(out), 0o644)
}
