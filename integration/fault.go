package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Rule tells a Server's proxy to act on the commands it matches: drop one,
// drop its reply, delay it or its reply, or reset the connection at that
// point. Rules apply to connections through Addr only; DirectAddr bypasses
// them. See Server.Inject.
type Rule struct {
	// Match selects the commands the rule acts on. It is required.
	Match Matcher

	// Action is what the rule does to a matching command. It is required.
	Action Action

	// Times is how many matching commands the rule acts on, on any
	// connections through the proxy, before it retires. 0 means 1; for a
	// rule that lasts until Remove, use math.MaxInt.
	Times int
}

// Matcher selects commands. Match gets the command name and its arguments,
// as sent (the name in the client's case). It is called on the proxy's
// connection goroutines, possibly at once on several, and must not block or
// call methods of the Server.
type Matcher interface {
	Match(cmd []string) bool
}

// MatchFunc is a Matcher from a predicate on the command name and arguments.
type MatchFunc func(cmd []string) bool

// Match reports f(cmd).
func (f MatchFunc) Match(cmd []string) bool { return f(cmd) }

// CommandMatcher matches a command by its name and by substrings of its
// arguments. Build it with Command.
type CommandMatcher struct {
	name string
	subs []string
}

// Command matches the command called name, compared without regard to case
// ("evalsha" matches EVALSHA). An empty name matches every command, so that
// Command("").WithArg(key) matches any command naming key.
func Command(name string) CommandMatcher { return CommandMatcher{name: name} }

// WithArg returns a matcher that also requires substr to occur in at least
// one argument (the command name excluded). Each call adds a requirement:
// Command("EVALSHA").WithArg(sha).WithArg(lockName) matches the script with
// that SHA run on that lock.
func (m CommandMatcher) WithArg(substr string) CommandMatcher {
	m.subs = append(slices.Clip(m.subs), substr)
	return m
}

// Match reports whether cmd has m's name and contains each of its
// substrings in some argument.
func (m CommandMatcher) Match(cmd []string) bool {
	if len(cmd) == 0 || (m.name != "" && !strings.EqualFold(cmd[0], m.name)) {
		return false
	}
	for _, sub := range m.subs {
		if !slices.ContainsFunc(cmd[1:], func(arg string) bool { return strings.Contains(arg, sub) }) {
			return false
		}
	}
	return true
}

// Action is what a Rule does to a command it matches. Use the variables
// DropRequest, DropReply, ResetAfterRequest and ResetAfterReply, or build a
// delay with DelayRequest or DelayReply; the zero Action is invalid.
//
// Redis answers the commands of a connection in order, and a client pairs
// each reply with the oldest command still waiting. A connection that lost
// one request or one reply would therefore pair every later reply with the
// wrong command, so every action that loses something also resets the
// client's connection at once (TCP RST): the client sees its commands in
// flight fail, never a wrong answer. Replies are paired with requests by the
// proxy the same way; push frames (RESP3 pub/sub messages and subscribe
// confirmations, invalidations) are never paired, and a RESP2 connection
// stops pairing for good once it subscribes, or after MONITOR or CLIENT
// REPLY, so that reply actions never act on such a connection.
type Action struct {
	kind  actionKind
	delay time.Duration
}

type actionKind uint8

const (
	actNone actionKind = iota
	actDropRequest
	actDelayRequest
	actResetAfterRequest
	actLateRequest
	actDropReply
	actDelayReply
	actResetAfterReply
)

var (
	// DropRequest does not forward the command: Redis never runs it. The
	// client's connection is reset in its place, so the client gets no
	// reply to it and sees it fail; this is also "reset before the
	// request". Commands the client pipelined behind it are lost with the
	// connection and never run; those forwarded before it still run, since
	// the proxy closes its side towards Redis gracefully.
	DropRequest = Action{kind: actDropRequest}

	// ResetAfterRequest forwards the command and then resets the client's
	// connection at once: the client gets no reply to it, nor to commands
	// whose replies were still on their way. Redis runs the command (and
	// those forwarded before it): the proxy closes its side towards Redis
	// gracefully, after the command. Commands pipelined behind it are lost
	// with the connection and never run.
	ResetAfterRequest = Action{kind: actResetAfterRequest}

	// DropReply lets Redis run the command but does not forward its
	// reply; the client's connection is reset instead. Replies to commands
	// pipelined behind it are lost too; whether those commands ran is not
	// determined.
	DropReply = Action{kind: actDropReply}

	// ResetAfterReply forwards the command's reply and then resets the
	// client's connection, so that the client has the reply (the kernel
	// delivers it before the reset) and then loses the connection.
	ResetAfterReply = Action{kind: actResetAfterReply}
)

// DelayRequest holds the command for d before forwarding it to Redis.
// Everything the client sends behind it on the same connection waits too,
// which keeps the order; other connections are not affected.
func DelayRequest(d time.Duration) Action { return Action{kind: actDelayRequest, delay: d} }

// LateRequest resets the client's connection at once, as DropRequest
// does, but keeps the command and forwards it to Redis d later, on the
// proxy's own connection, which then closes: the client sees its attempt
// fail and may send the command again (on another connection), and the
// copy it gave up on still runs, after whatever the client did in
// between. This is a request delayed in the network beyond its sender's
// timeout. Its Fault counts the hit once Redis has run the copy and
// closed the connection.
func LateRequest(d time.Duration) Action { return Action{kind: actLateRequest, delay: d} }

// DelayReply holds the command's reply for d, after Redis ran the command,
// before forwarding it to the client. Every later reply on the same
// connection waits too, which keeps the order.
func DelayReply(d time.Duration) Action { return Action{kind: actDelayReply, delay: d} }

// String names the action, as in "DelayReply(1s)".
func (a Action) String() string {
	switch a.kind {
	case actDropRequest:
		return "DropRequest"
	case actDelayRequest:
		return fmt.Sprintf("DelayRequest(%v)", a.delay)
	case actResetAfterRequest:
		return "ResetAfterRequest"
	case actLateRequest:
		return fmt.Sprintf("LateRequest(%v)", a.delay)
	case actDropReply:
		return "DropReply"
	case actDelayReply:
		return fmt.Sprintf("DelayReply(%v)", a.delay)
	case actResetAfterReply:
		return "ResetAfterReply"
	default:
		return "Action(invalid)"
	}
}

// onReply reports whether the action applies when the reply arrives rather
// than when the request does.
func (a Action) onReply() bool { return a.kind >= actDropReply }

// Fault is a Rule injected into a Server's proxy. Its methods are safe for
// concurrent use.
type Fault struct {
	set   *faultSet
	rule  Rule
	times int

	// Guarded by set.mu.
	claimed int           // actions begun, including those done
	hits    int           // actions done
	ended   error         // ErrFaultRemoved or ErrClosed once no new action may begin
	changed chan struct{} // closed and replaced whenever hits or ended change
}

// Inject adds a rule to the Server's proxy and returns its Fault. Rules are
// tried in the order they were injected; a command is acted on by the first
// rule that matches it and has times left (one rule for the request and one
// for its reply at most). Rules stay across Kill, Restart and Partition,
// until they have acted Times times, Fault.Remove, or Close.
//
// May return ErrNoProxy, ErrClosed, or an error naming what is wrong with r.
func (s *Server) Inject(r Rule) (*Fault, error) {
	if s.proxy == nil {
		return nil, ErrNoProxy
	}
	switch {
	case r.Match == nil:
		return nil, errors.New("rlock: integration: rule without Match")
	case r.Action.kind == actNone:
		return nil, errors.New("rlock: integration: rule without Action")
	case r.Action.delay < 0:
		return nil, fmt.Errorf("rlock: integration: negative delay in %v", r.Action)
	case r.Times < 0:
		return nil, fmt.Errorf("rlock: integration: negative Times %d", r.Times)
	}
	return s.proxy.faults.add(r)
}

// Hits reports how many times the fault has acted so far: how many
// commands it has dropped, delayed, or reset the connection after. An action
// counts once it is over: a delay once it has ended; DropReply and the
// resets once the client's connection is reset; and DropRequest and
// ResetAfterRequest only once Redis has also closed its side, so that every
// command forwarded before the reset has run (or the connection was cut by
// a Partition or Kill meanwhile).
func (f *Fault) Hits() int {
	f.set.mu.Lock()
	defer f.set.mu.Unlock()
	return f.hits
}

// Wait returns once the fault has acted Times times, or earlier with an
// error when it never will. An action cut short by the connection closing
// (a delay interrupted by Partition, say) does not count, and the command
// it was acting on no longer counts as matched.
//
// May return ErrFaultRemoved, ErrClosed, or ctx's error.
func (f *Fault) Wait(ctx context.Context) error {
	for {
		f.set.mu.Lock()
		hits, inFlight, ended, changed := f.hits, f.claimed-f.hits, f.ended, f.changed
		f.set.mu.Unlock()
		switch {
		case hits >= f.times:
			return nil
		case ended != nil && inFlight == 0:
			return ended
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("rlock: integration: wait for %v: %w", f.rule.Action, context.Cause(ctx))
		}
	}
}

// Remove retires the fault: it matches no further command. Actions already
// begun, such as a delay, complete. Removing twice does nothing.
func (f *Fault) Remove() { f.set.end(f, ErrFaultRemoved) }

// faultSet holds a proxy's faults in the order they were injected.
type faultSet struct {
	mu     sync.Mutex
	faults []*Fault
	closed bool
}

func (fs *faultSet) add(r Rule) (*Fault, error) {
	f := &Fault{set: fs, rule: r, times: max(r.Times, 1), changed: make(chan struct{})}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.closed {
		return nil, ErrClosed
	}
	fs.faults = append(fs.faults, f)
	return f, nil
}

// claim finds the first live fault acting on this side of a command that
// matches cmd, and reserves one of its times. The caller must report the
// outcome with done. Matchers run without the lock held.
func (fs *faultSet) claim(reply bool, cmd []string) *Fault {
	fs.mu.Lock()
	if len(fs.faults) == 0 {
		fs.mu.Unlock()
		return nil
	}
	faults := slices.Clone(fs.faults)
	fs.mu.Unlock()
	for _, f := range faults {
		if f.rule.Action.onReply() != reply || !f.rule.Match.Match(cmd) {
			continue
		}
		fs.mu.Lock()
		ok := f.ended == nil && f.claimed < f.times
		if ok {
			f.claimed++
		}
		fs.mu.Unlock()
		if ok {
			return f
		}
	}
	return nil
}

// done reports the outcome of an action begun by claim: acted, or cut short
// and given back.
func (fs *faultSet) done(f *Fault, acted bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if acted {
		f.hits++
		if f.hits == f.times {
			fs.faults = slices.DeleteFunc(fs.faults, func(g *Fault) bool { return g == f })
		}
	} else {
		f.claimed--
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// end retires f with err, unless it has already ended.
func (fs *faultSet) end(f *Fault, err error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.endLocked(f, err)
}

func (fs *faultSet) endLocked(f *Fault, err error) {
	if f.ended != nil {
		return
	}
	f.ended = err
	fs.faults = slices.DeleteFunc(fs.faults, func(g *Fault) bool { return g == f })
	close(f.changed)
	f.changed = make(chan struct{})
}

// close ends every fault with ErrClosed and refuses new ones.
func (fs *faultSet) close() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.closed = true
	for _, f := range slices.Clone(fs.faults) {
		fs.endLocked(f, ErrClosed)
	}
}
