package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/rlock-go/rlock/lock"
)

const runUsage = `rlock run --name NAME [FLAGS] -- COMMAND [ARGS...]

Acquires the lock NAME, runs COMMAND (without a shell) with stdin, stdout
and stderr passed through, releases the lock when it exits, and exits with
its status (128+signo if a signal killed it). Without --lease the lock is
renewed for as long as the command runs. The command's environment gets
RLOCK_NAME (the lock name) and RLOCK_FENCE (a fencing token that strictly
increases with every acquisition of NAME).

Several comma-separated addresses are independent masters: the lock is a
RedLock, held once a majority of them (N/2+1) granted it, or with --all a
MultiLock, held once every one did. Each master is dialled with the same
credentials and TLS settings; those that cannot be reached within 3s are
named on stderr and the lock goes on without them, provided that the
quorum of all the masters given is still reachable (else exit 69). The
lock is lost, and the command stopped, once fewer than the quorum still
hold it.

SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to rlock are
forwarded to the command. While rlock waits for the lock, SIGINT, SIGTERM,
SIGHUP and SIGQUIT end the wait (exit 128+signo).

If the lock is lost while the command runs (the key was deleted, another
holder took it, Redis was unreachable until the lease ran out, or --lease
ran out; for several masters, on too many of them), rlock says why on
stderr, sends the command SIGTERM, then SIGKILL after --grace, and exits
76.

--trace stdout prints the spans of the run (OpenTelemetry, one JSON object
per span) on stdout, in batches as they end and the rest when rlock exits.
Without it, OTEL_EXPORTER_OTLP_ENDPOINT or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT sends them over OTLP/HTTP.

Exit codes:
  N     the command's status (128+signo if a signal killed it)
  64    bad usage
  69    Redis unreachable (several masters: fewer than the quorum reached)
  70    internal error
  75    lock not acquired within --wait: busy, or the quorum not had
        (see --conflict-exit-code)
  76    lock lost while the command ran (several masters: the quorum lost)
  77    Redis refused the credentials
  126   the command could not be started
  127   the command was not found`

// Signals forwarded to the command; the first four also end a wait for
// the lock.
var (
	forwarded   = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}
	terminating = map[os.Signal]bool{syscall.SIGINT: true, syscall.SIGTERM: true, syscall.SIGHUP: true, syscall.SIGQUIT: true}
)

// releaseTimeout bounds the release after the command exits.
const releaseTimeout = 5 * time.Second

// Environment given to the command.
const (
	envName  = "RLOCK_NAME"
	envFence = "RLOCK_FENCE"
)

// runOptions are run's flags.
type runOptions struct {
	conn            connFlags
	name            string
	wait            time.Duration
	lease           time.Duration
	watchdogTimeout time.Duration
	grace           time.Duration
	conflict        int
	all             bool
	trace           string
}

func newRunFlags(o *runOptions) *flag.FlagSet {
	fs := newFlagSet("run")
	o.conn.registerAddr(fs, "Redis master `host:port`, or several comma-separated independent masters for a RedLock; $"+envAddr+" sets the default")
	o.conn.registerAuth(fs)
	fs.StringVar(&o.name, "name", "", "lock `name` (required): Redisson's lock name, as is")
	fs.DurationVar(&o.wait, "wait", 0, "how long to wait for the lock (default 0: one attempt)")
	fs.DurationVar(&o.lease, "lease", 0, "hold the lock at most this long, without renewal; the command is stopped when it runs out (default: renewed while the command runs)")
	fs.DurationVar(&o.watchdogTimeout, "watchdog-timeout", 0, "lease the watchdog keeps renewing, every third of it (default 30s)")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when the lock is lost")
	fs.IntVar(&o.conflict, "conflict-exit-code", exitConflict, "exit `code` when the lock is not acquired within --wait")
	fs.BoolVar(&o.all, "all", false, "with several --addr masters, every one must grant the lock (MultiLock), not a majority (RedLock)")
	registerTrace(fs, &o.trace)
	return fs
}

// runMain is "rlock run".
func runMain(args []string) error {
	var o runOptions
	fs := newRunFlags(&o)
	if err := parse(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	switch {
	case o.name == "":
		return usagef("run: --name is required and must not be empty")
	case len(argv) == 0:
		return usagef("run: no command given after the flags")
	case o.wait < 0:
		return usagef("run: --wait %v is negative", o.wait)
	case o.lease < 0 || (o.lease > 0 && o.lease < lock.MinLease):
		return usagef("run: --lease %v: want 0 (renewed) or at least %v", o.lease, lock.MinLease)
	case o.watchdogTimeout < 0 || (o.watchdogTimeout > 0 && o.watchdogTimeout < lock.MinLease):
		return usagef("run: --watchdog-timeout %v: want at least %v", o.watchdogTimeout, lock.MinLease)
	case o.grace < 0:
		return usagef("run: --grace %v is negative", o.grace)
	case o.conflict < 0 || o.conflict > 255:
		return usagef("run: --conflict-exit-code %d: want 0 to 255", o.conflict)
	}
	if err := checkTrace("run", o.trace); err != nil {
		return err
	}
	addrs, err := o.conn.addrs()
	if err != nil {
		return err
	}
	cfg := lockerConfig{conn: o.conn, addrs: addrs, all: o.all, name: o.name, watchdogTimeout: o.watchdogTimeout}
	if err := checkLocker(cfg); err != nil {
		return err
	}

	// Flushed last, once signals are no longer caught: a Ctrl-C during a
	// slow export ends rlock.
	tr := startTracing(o.trace)
	defer tr.flush()
	cfg.observer = tr.observer

	// Catch signals from the start: rlock must not die and leave the
	// command running, or stop between acquiring and releasing.
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, forwarded...)
	defer signal.Stop(sigc)

	// One span for the whole run: the acquire, hold and release spans of
	// every master are its children, in one trace.
	ctx, span := tr.start(context.Background(), "rlock run",
		attribute.String("rlock.lock.name", o.name),
		attribute.String("rlock.lock.kind", lockKind(len(addrs), o.all)),
		attribute.Int("rlock.masters", len(addrs)),
		attribute.String("process.command", argv[0]))
	r := &runner{o: o, argv: argv, sigc: sigc}
	err = r.run(ctx, cfg)
	endSpan(span, err, o.conflict)
	return err
}

// runner is one "rlock run": acquire, run the command, release.
type runner struct {
	o    runOptions
	argv []string
	sigc chan os.Signal
}

// signalError is the cause of a wait ended by a signal.
type signalError struct{ sig os.Signal }

func (e *signalError) Error() string { return "interrupted by " + signalName(e.sig) }

func (r *runner) run(parent context.Context, cfg lockerConfig) error {
	// The hold derives from ctx: only a terminating signal before the
	// command starts cancels it, and the deferred cancel at the very end.
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)

	stopWatch := r.watchSignals(cancel)
	lk, err := r.connect(ctx, cfg)
	if err == nil {
		defer func() {
			cctx, ccancel := context.WithTimeout(context.Background(), releaseTimeout)
			defer ccancel()
			// Releases a hold still there (interrupted, or Unlock failed)
			// and stops the watchdog.
			if cerr := lk.Close(cctx); cerr != nil {
				fmt.Fprintln(os.Stderr, prefixed("closing: "+cerr.Error()))
			}
		}()
		err = r.acquire(ctx, lk)
	}
	stopWatch()
	var se *signalError
	if errors.As(context.Cause(ctx), &se) {
		// Interrupted before the command started: Close gives back a
		// hold that was taken meanwhile.
		return exitWith(exitSignalBase+signo(se.sig), fmt.Errorf("%v before the command started (lock %q)", se, r.o.name))
	}
	if err != nil {
		return err
	}
	return r.supervise(lk)
}

// watchSignals cancels ctx with a *signalError when a terminating signal
// arrives, until the returned stop function is called; stop joins the
// watching goroutine, so no signal is consumed after it returns.
func (r *runner) watchSignals(cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case s := <-r.sigc:
				if terminating[s] {
					cancel(&signalError{sig: s})
					return
				}
				// SIGUSR1/2: no command to forward them to yet.
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// connect dials Redis, bounded by dialTimeout.
func (r *runner) connect(ctx context.Context, cfg lockerConfig) (locker, error) {
	cctx, cancel := context.WithTimeout(ctx, dialTimeout+time.Second)
	defer cancel()
	lk, err := newLocker(cctx, cfg)
	if err != nil {
		return nil, exitWith(codeOf(err, exitSoftware), err) // err names the address
	}
	return lk, nil
}

// acquire takes the lock, waiting up to --wait.
func (r *runner) acquire(ctx context.Context, lk locker) error {
	err := lk.Lock(ctx, lockOptions{wait: r.o.wait, lease: r.o.lease})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lock.ErrNotAcquired):
		// err says who holds it and for how long.
		if r.o.wait > 0 {
			err = fmt.Errorf("%w (waited %v)", err, r.o.wait)
		}
		return exitWith(r.o.conflict, err)
	}
	return exitWith(codeOf(err, r.o.conflict), fmt.Errorf("acquiring lock %q: %w", r.o.name, err))
}

// signo returns sig's number.
func signo(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP",
	syscall.SIGQUIT: "SIGQUIT", syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGKILL: "SIGKILL", syscall.SIGPIPE: "SIGPIPE", syscall.SIGABRT: "SIGABRT",
	syscall.SIGSEGV: "SIGSEGV",
}

// signalName returns "SIGTERM" and the like.
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if n, ok := signalNames[s]; ok {
			return n
		}
		return "signal " + strconv.Itoa(int(s))
	}
	return sig.String()
}

// supervise runs the command while the lock is held: it starts it with
// the lock's name and fencing token in its environment, forwards signals
// to it, stops it if the lock is lost, and releases the lock once it has
// exited. It returns the exit status as an *exitErr (nil for 0).
func (r *runner) supervise(lk locker) error {
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		envName+"="+r.o.name,
		envFence+"="+strconv.FormatUint(lk.Fence(), 10))
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = exitNotFound
		}
		r.release(lk)
		return exitWith(code, err)
	}

	// The only other goroutine: it ends when the command exits, and the
	// loop below always receives its result before returning.
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()

	done := lk.Done()
	// With --lease, the lock ends at its deadline: the watchdog would
	// notice only at its next tick, up to a third of its timeout later.
	var expired <-chan time.Time
	if dl := lk.Deadline(); !dl.IsZero() {
		t := time.NewTimer(time.Until(dl))
		defer t.Stop()
		expired = t.C
	}
	var lost error
	var kill <-chan time.Time
	for {
		select {
		case s := <-r.sigc:
			// Fails only when the command has exited; waitc then reports it.
			_ = cmd.Process.Signal(s)
			continue
		case werr := <-waitc:
			return r.finish(lk, werr, lost)
		case <-kill:
			kill = nil
			fmt.Fprintln(os.Stderr, prefixed(fmt.Sprintf("%s still running %v after SIGTERM: SIGKILL", r.argv[0], r.o.grace)))
			_ = cmd.Process.Kill()
			continue
		case <-done:
			if lost = lk.Lost(); lost == nil {
				lost = fmt.Errorf("%w: lock %q ended while the command ran", lock.ErrLockLost, r.o.name)
			}
		case <-expired:
			what := fmt.Sprintf("its --lease of %v", r.o.lease)
			if _, multi := lk.(*multiLocker); multi {
				what = fmt.Sprintf("its validity (--lease %v less the acquisition time and clock drift)", r.o.lease)
			}
			lost = fmt.Errorf("%w: lock %q: %s ran out while the command ran", lock.ErrLockLost, r.o.name, what)
		}
		// The lock is gone: stop the command, once.
		done, expired = nil, nil
		fmt.Fprintln(os.Stderr, prefixed(lost.Error()))
		fmt.Fprintln(os.Stderr, prefixed(fmt.Sprintf("stopping %s: SIGTERM now, SIGKILL in %v", r.argv[0], r.o.grace)))
		_ = cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(r.o.grace)
		defer t.Stop() // runs once: done and expired are nil from now on
		kill = t.C
	}
}

// finish releases the lock after the command exited with werr, and
// returns rlock's exit status: the command's, or exitLost when the lock
// was lost while it ran.
func (r *runner) finish(lk locker, werr, lost error) error {
	status := commandStatus(werr)
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		fmt.Fprintln(os.Stderr, prefixed(fmt.Sprintf("waiting for %s: %v", r.argv[0], werr)))
	}
	if lost != nil {
		return exitWith(exitLost, fmt.Errorf("lock %q was lost while %s ran; it exited with status %d", r.o.name, r.argv[0], status))
	}
	if err := r.release(lk); errors.Is(err, lock.ErrLockLost) {
		// The loss showed only at release: the command may have run
		// unprotected for a while, so it is reported as a loss.
		return exitWith(exitLost, fmt.Errorf("%w (found at release; %s exited with status %d)", err, r.argv[0], status))
	}
	if status == exitOK {
		return nil
	}
	return exitWith(status, nil)
}

// release unlocks with a fresh context bounded by releaseTimeout. A
// failure other than a loss is reported on stderr and does not change the
// exit status: the lock then expires after its lease.
func (r *runner) release(lk locker) error {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	err := lk.Unlock(ctx)
	if err != nil && !errors.Is(err, lock.ErrLockLost) {
		fmt.Fprintln(os.Stderr, prefixed(fmt.Sprintf("releasing lock %q: %v; it expires after its lease", r.o.name, err)))
	}
	return err
}
