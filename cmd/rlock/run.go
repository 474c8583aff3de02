package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
)

const runUsage = `rlock run --name NAME [FLAGS] -- COMMAND [ARGS...]   (or -c CMD, as flock)

Acquires the lock NAME, runs COMMAND (without a shell) with stdin, stdout
and stderr passed through, releases the lock when it exits, and exits with
its status (128+signo if a signal killed it). Without --lease the lock is
renewed for as long as the command runs. The command's environment is
rlock's without RLOCK_PASSWORD and RLOCK_SENTINEL_PASSWORD, plus RLOCK_NAME (the lock name),
RLOCK_FENCE (a fencing token that strictly increases with every
acquisition of NAME; not with --no-fence) and, when rlock traces,
TRACEPARENT of its hold span.

--wait takes a duration (30s), flock's seconds (5, 0.5) or forever. When
the lock is busy, rlock names the holder (with its host and pid when the
holder is an rlock) and says whether its lease is being renewed, never a
TTL as the time left; with --verbose it says so when the wait starts and
every 5s, and how long acquiring took. --conflict-exit-code 0 skips
silently unless --verbose; --quiet prints nothing of rlock's own.

flock(1)'s short options mean what they mean to flock: -n (one attempt)
and -w SECS make a busy lock exit 1 unless -E CODE gives another code,
-s and -x (or -e) take the shared and exclusive lock (--shared,
--exclusive), -E CODE is --conflict-exit-code, -c CMD runs sh -c CMD.
The long options keep rlock's meanings: --wait and a busy lock's 75.
Unlike flock, rlock makes one attempt when neither -w nor --wait is given.

--addr takes host:port or Redisson's URLs, redis://[[user]:password@]host:port[/db]
and rediss:// for TLS (prefer $RLOCK_PASSWORD to a password in a URL: ps
shows arguments). --cluster makes the addresses seed nodes of one Redis
Cluster; --sentinel-master NAME with --sentinel ADDR,... connects through
Redis Sentinel. --redisson-config FILE reads a Redisson YAML config (the
connection, credentials, TLS, lockWatchdogTimeout, replica sync); flags
given override it, and --verbose lists the settings it does not use.

Several comma-separated addresses are independent masters: the lock is a
RedLock, held once a majority of them (N/2+1) granted it, or with --all a
MultiLock, held once every one did. Each master is dialled with the same
credentials and TLS settings; those that cannot be reached within 3s are
named on stderr and the lock goes on without them, provided that the
quorum of all the masters given is still reachable (else exit 69). The
lock is lost, and the command stopped, once fewer than the quorum still
hold it.

The command runs in a process group of its own, which gets the
terminal's foreground while it runs (rlock takes it back after): a
terminal's Ctrl-C or Ctrl-\ reaches the command alone, once. SIGINT,
SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 that reach rlock (kill(1)
at rlock's pid, or at its process group as timeout(1) and CI runners do)
are forwarded once, to the command's process group; so every sender's
signal reaches the command once. The exception: systemd's SIGTERM to the
whole unit when rlock is its main process reached the command already
and is not forwarded (--forward-all-signals forwards it anyway). While
rlock waits for the lock, SIGINT, SIGTERM, SIGHUP and SIGQUIT end the wait (exit 128+signo).

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
  0     also: busy with --conflict-exit-code 0
  1     busy, with flock's -n or -w (and no -E)
  64    bad usage; also MOVED: a cluster node given without --cluster
  65    the key under NAME is not a lock: another type (WRONGTYPE), or
        a hash whose fields are not a lock's (HSET user:1 name bob)
  69    Redis unreachable, or a replica given as the master (READONLY)
        (several masters: fewer than the quorum reached)
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

// maxSaneLease is the longest --lease given without a warning.
const maxSaneLease = 24 * time.Hour

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
	wait            waitValue
	lease           time.Duration
	watchdogTimeout time.Duration
	grace           time.Duration
	conflict        int
	all             bool
	trace           string
	verbose         bool
	quiet           bool
	noFence         bool
	spin            bool
	fair            bool
	shared          bool
	exclusive       bool
	forwardAll      bool
	// flock(1)'s own short options: -n, -w SECS, -c CMD.
	nonblock  bool
	flockWait waitValue
	command   string
}

func newRunFlags(o *runOptions) *flag.FlagSet {
	fs := newFlagSet("run")
	o.conn.register(fs, "Redis master `host:port` or redis:// URL, or several comma-separated independent masters for a RedLock (with --cluster: seed nodes of one cluster); $"+envAddr+" sets the default")
	fs.StringVar(&o.name, "name", "", "lock `name` (required): Redisson's lock name, as is")
	fs.Var(&o.wait, "wait", "how long to wait for the lock: a `duration` (30s, 2m), seconds as flock takes them (5, 0.5), or forever (default 0: one attempt)")
	durationVar(fs, &o.lease, "lease", 0, "hold the lock at most this `duration`, without renewal; the command is stopped when it runs out (default: renewed while the command runs)")
	durationVar(fs, &o.watchdogTimeout, "watchdog-timeout", 0, "the lease (a `duration`) the watchdog keeps renewing, every third of it (default 30s)")
	durationVar(fs, &o.grace, "grace", 10*time.Second, "the `duration` between SIGTERM and SIGKILL when the lock is lost")
	fs.IntVar(&o.conflict, "conflict-exit-code", exitConflict, "exit `code` when the lock is not acquired within --wait; 0 also silences the message unless --verbose")
	fs.BoolVar(&o.all, "all", false, "with several --addr masters, every one must grant the lock (MultiLock), not a majority (RedLock)")
	fs.BoolVar(&o.verbose, "verbose", false, "say who holds the lock while waiting (at the start and every 5s), how long acquiring took, the command's start and end, and the settings of --redisson-config not used")
	fs.BoolVar(&o.quiet, "quiet", false, "print nothing of rlock's own but usage errors: only the command's output (the exit status tells the rest)")
	fs.BoolVar(&o.noFence, "no-fence", false, "take no fencing token: no INCR of the token key (a key without TTL per lock name), no $"+envFence)
	fs.BoolVar(&o.spin, "spin", false, "take Redisson's spin lock (getSpinLock): the same lock as without --spin, but its release publishes no unlock message and rlock waits by polling (1 ms doubling to 128 ms) instead of subscribing (with several masters, on each)")
	fs.BoolVar(&o.fair, "fair", false, "take Redisson's fair lock (getFairLock): waiters, Java and Go, queue in Redis and get the lock in the order they came; implies --no-fence (Redisson has no fenced fair lock). With several masters the RedLock's attempts do not queue: it polls")
	fs.BoolVar(&o.shared, "shared", false, "take the read lock of Redisson's read-write lock NAME (getReadWriteLock(name).readLock(), flock -s): shared with other --shared runs and Redisson readers, excluded by --exclusive runs and writers; no fencing token (as --no-fence). Not the lock taken without it")
	fs.BoolVar(&o.exclusive, "exclusive", false, "take the write lock of Redisson's read-write lock NAME (writeLock(), flock -x): excludes --shared and --exclusive runs, Redisson readers and writers; no fencing token (as --no-fence). Not the lock taken without it")
	fs.BoolVar(&o.forwardAll, "forward-all-signals", false, "forward systemd's SIGTERM to the whole unit although the command got it too (for KillMode=mixed or process)")
	registerTrace(fs, &o.trace)
	// flock(1)'s short options, with flock's meanings.
	fs.BoolVar(&o.shared, "s", false, "")
	fs.BoolVar(&o.exclusive, "x", false, "")
	fs.BoolVar(&o.exclusive, "e", false, "")
	fs.IntVar(&o.conflict, "E", exitConflict, "")
	fs.BoolVar(&o.nonblock, "n", false, "flock's -n: one attempt, and a busy lock exits 1 unless -E (or --conflict-exit-code) gives another code (--wait 0 exits 75)")
	fs.Var(&o.flockWait, "w", "flock's -w: wait up to `SECS` seconds (fractions allowed), and a lock still busy then exits 1 unless -E gives another code (--wait exits 75)")
	fs.StringVar(&o.command, "c", "", "flock's -c: run `CMD` with sh -c, instead of a COMMAND after --")
	return fs
}

// flockOptions applies flock(1)'s short options once fs is parsed: -n and
// -w make a busy lock exit 1 unless -E or --conflict-exit-code is given,
// -w sets the wait, -c makes the command sh -c CMD. It refuses what
// contradicts itself.
func (o *runOptions) flockOptions(fs *flag.FlagSet, argv []string) ([]string, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["n"] && (set["w"] || set["wait"]):
		return nil, usagef("run: -n (no wait) and a wait (-w, --wait) exclude each other")
	case set["w"] && set["wait"]:
		return nil, usagef("run: -w and --wait both give the wait: give one")
	case set["E"] && set["conflict-exit-code"]:
		return nil, usagef("run: -E and --conflict-exit-code both give the busy lock's exit code: give one")
	case set["c"] && len(argv) > 0:
		return nil, usagef("run: -c CMD is the command: give no COMMAND after it")
	case set["c"] && strings.TrimSpace(o.command) == "":
		return nil, usagef("run: -c takes a command for sh -c, not an empty one")
	}
	if (set["n"] || set["w"]) && !set["E"] && !set["conflict-exit-code"] {
		o.conflict = 1 // flock's exit status for a busy lock
	}
	if set["w"] {
		o.wait = o.flockWait
	}
	if set["c"] {
		argv = []string{"/bin/sh", "-c", o.command}
	}
	return argv, nil
}

// runMain is "rlock run".
func runMain(args []string) error {
	var o runOptions
	fs := newRunFlags(&o)
	if err := parse(fs, args); err != nil {
		return err
	}
	argv, err := o.flockOptions(fs, fs.Args())
	if err != nil {
		return err
	}
	switch {
	case o.name == "":
		return usagef("run: --name is required and must not be empty")
	case len(argv) == 0:
		return usagef("run: no command given after the flags")
	case o.wait.d < 0:
		return usagef("run: --wait %v is negative", o.wait.d)
	case o.verbose && o.quiet:
		return usagef("run: --verbose and --quiet exclude each other")
	case o.lease < 0 || (o.lease > 0 && o.lease < lock.MinLease):
		return usagef("run: --lease %v: want 0 (renewed) or at least %v", o.lease, lock.MinLease)
	case o.watchdogTimeout < 0 || (o.watchdogTimeout > 0 && o.watchdogTimeout < lock.MinLease):
		return usagef("run: --watchdog-timeout %v: want at least %v", o.watchdogTimeout, lock.MinLease)
	case o.grace < 0:
		return usagef("run: --grace %v is negative", o.grace)
	case o.conflict < 0 || o.conflict > 255:
		return usagef("run: --conflict-exit-code %d: want 0 to 255", o.conflict)
	case o.shared && o.exclusive:
		return usagef("run: --shared and --exclusive exclude each other")
	case o.spin && (o.shared || o.exclusive):
		return usagef("run: --spin takes the spin lock, --shared and --exclusive the read-write lock: give one")
	case o.fair && (o.spin || o.shared || o.exclusive):
		return usagef("run: --fair takes the fair lock, --spin the spin lock, --shared and --exclusive the read-write lock: give one")
	}
	if err := checkName("run", o.name); err != nil {
		return err
	}
	if o.shared || o.exclusive || o.fair {
		o.noFence = true // Redisson has no fenced read-write or fair lock
	}
	if err := checkTrace("run", o.trace); err != nil {
		return err
	}
	conn, err := o.conn.resolve()
	if err != nil {
		return err
	}
	cfg := lockerConfig{masters: conn.masters, all: o.all, name: o.name, watchdogTimeout: o.watchdogTimeout, spin: o.spin,
		fair: o.fair, shared: o.shared, exclusive: o.exclusive}
	if err := checkLocker(cfg); err != nil {
		return err
	}
	if o.quiet {
		errOut = io.Discard
	}
	if o.verbose {
		o.conn.printWarnings(conn)
	}
	if o.lease > maxSaneLease {
		fmt.Fprintln(errOut, prefixed(fmt.Sprintf("warning: --lease %v: if rlock dies, nothing frees the lock for that long (without --lease, a watchdog keeps it only while rlock runs)", o.lease)))
	}

	// Flushed last, once signals are no longer caught: a Ctrl-C during a
	// slow export ends rlock.
	tr := startTracing(o.trace)
	defer tr.flush()
	hook := new(waitHook)
	cfg.observer = hook.observer(tr.observer)
	movedFrom := func(string) {}
	if o.verbose && len(conn.masters) == 1 && conn.masters[0].MasterSet != "" {
		cfg.observer, movedFrom = sayMasterMoves(cfg.observer, o.name, errOut)
	}

	// Catch signals from the start: rlock must not die and leave the
	// command running, or stop between acquiring and releasing.
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, forwarded...)
	defer signal.Stop(sigc)

	// One span for the whole run: the acquire, hold and release spans of
	// every master are its children, in one trace.
	ctx, span := tr.start(contextFromEnv(context.Background()), "rlock run",
		attribute.String("rlock.lock.name", o.name),
		attribute.String("rlock.lock.kind", lockKind(len(conn.masters), o.all)),
		attribute.Int("rlock.masters", len(conn.masters)),
		attribute.String("process.command", argv[0]))
	r := &runner{o: o, argv: argv, sigc: sigc, hook: hook, tr: tr, movedFrom: movedFrom}
	err = r.run(ctx, cfg)
	endSpan(span, err, o.conflict)
	return err
}

// runner is one "rlock run": acquire, run the command, release.
type runner struct {
	o    runOptions
	argv []string
	pid  int // the command's, once started
	sigc chan os.Signal
	hook *waitHook
	tr   *tracer
	rode time.Duration // how long connecting rode out a replica: taken from --wait
	// movedFrom tells --verbose's "master moved" the master a Client was
	// made on.
	movedFrom func(addr string)
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
				fmt.Fprintln(errOut, prefixed("closing: "+cerr.Error()))
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

// connect dials Redis, each attempt bounded by dialTimeout. A replica
// where the master was expected (a failover under way; lock.New refuses
// it) is ridden out as an acquire's READONLY is: with --wait D for up to
// D, with --wait forever for 10s or the lease, whichever is longer; the
// time that took is taken from the wait. A Redis that does not answer at
// all is reported at once (a wrong address, most often).
func (r *runner) connect(ctx context.Context, cfg lockerConfig) (locker, error) {
	ride := r.o.wait.d
	if r.o.wait.forever {
		ride = max(foreverRideOut, r.o.lease)
	}
	start := time.Now()
	pause, retried := 50*time.Millisecond, false
	for {
		cctx, cancel := context.WithTimeout(ctx, dialTimeout+time.Second)
		lk, err := newLocker(cctx, cfg)
		cancel()
		if err == nil {
			if retried {
				r.rode = time.Since(start)
			}
			return lk, nil
		}
		left := ride - time.Since(start)
		if !isReplica(err) || left <= 0 || !sleepCtx(ctx, min(pause, left)) {
			err = connectHint(err, cfg.masters[0].TLS != nil)
			return nil, exitWith(codeOf(err, exitSoftware), withHint(err)) // err names the address
		}
		pause, retried = min(2*pause, time.Second), true
	}
}

// isReplica reports lock.New's refusal of an address whose server is a
// replica (an ErrUnavailable saying so).
func isReplica(err error) bool {
	return errors.Is(err, lock.ErrUnavailable) && strings.Contains(err.Error(), " is a replica of ")
}

// foreverRideOut is how long --wait forever rides out an outage when
// connecting (at least: the lease, when longer), as lock.Client.Lock
// rides out a failover.
const foreverRideOut = 10 * time.Second

// sleepCtx sleeps d, or until ctx ends: it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// acquire takes the lock, waiting up to --wait (or forever). While it
// waits, a waitWatch reads who holds the lock: with --verbose it says so,
// and the busy message uses what it saw.
func (r *runner) acquire(ctx context.Context, lk locker) error {
	if r.o.verbose {
		for _, c := range lk.Clients() {
			addr := c.Addr()
			r.movedFrom(addr)
			fmt.Fprintln(errOut, prefixed(fmt.Sprintf("client id %s on %s", c.ID(), addr)))
		}
	}
	var w *waitWatch
	opts := lockOptions{wait: max(r.o.wait.d-r.rode, 0), forever: r.o.wait.forever, lease: r.o.lease, noFence: r.o.noFence}
	// The watch ends the wait with lock.ErrNotLock when the key turns out
	// not to be a lock: no wait makes it one.
	lctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	if opts.forever || opts.wait > 0 {
		w = startWatch(r.o.name, lk, r.o.verbose, errOut, func(err error) { abort(err) })
		r.hook.w.Store(w)
		opts.began = w.began
	}
	start := time.Now()
	err := lk.Lock(lctx, opts)
	took := time.Since(start)
	var first []look
	if w != nil {
		r.hook.w.Store(nil)
		w.stop()
		first = w.firstLooks()
	}
	if cause := context.Cause(lctx); err != nil && errors.Is(cause, lock.ErrNotLock) {
		return exitWith(exitDataErr, cause)
	}
	switch {
	case err == nil:
		if r.o.verbose {
			msg := fmt.Sprintf("acquired lock %q after %v", r.o.name, roundDur(took))
			if !r.o.noFence {
				msg += fmt.Sprintf(" (fencing token %d)", lk.Fence())
			}
			fmt.Fprintln(errOut, prefixed(msg))
		}
		return nil
	case errors.Is(err, lock.ErrNotAcquired) && context.Cause(ctx) == nil && r.unreachable(lk, err):
		// The last attempt was not answered by the lock's state but
		// by an outage (or a replica's READONLY): not "busy".
		return exitWith(exitUnavailable, withHint(fmt.Errorf("acquiring lock %q: %w", r.o.name, err)))
	case errors.Is(err, lock.ErrNotAcquired) && context.Cause(ctx) == nil && !r.refused(lk, err):
		berr := r.busy(lk, err, first)
		var ee *exitErr
		switch {
		case errors.As(berr, &ee):
			return berr // not a lock: no conflict
		case r.o.conflict == exitOK && !r.o.verbose:
			// A skip that cron must not mail about.
			return exitWith(exitOK, nil)
		}
		return exitWith(r.o.conflict, berr)
	}
	return exitWith(codeOf(err, r.o.conflict), withHint(fmt.Errorf("acquiring lock %q: %w", r.o.name, err)))
}

// refused reports an attempt on one master that waiting cannot make
// succeed, whatever it says of the lock: the key is not a lock
// (WRONGTYPE), the address is a cluster node given without --cluster
// (MOVED), the server refuses the credentials. (With several masters,
// such a master is one that did not grant: the quorum decides.)
func (r *runner) refused(lk locker, err error) bool {
	if _, multi := lk.(*multiLocker); multi {
		return false
	}
	return errors.Is(err, lock.ErrNotLock) || errors.Is(err, lock.ErrInvalid) || errors.Is(err, lock.ErrAuth)
}

// unreachable reports, for one master, an attempt that ended on an
// outage rather than on the lock's state: the lock was not seen busy.
// (With several masters the quorum error says what each master did.)
func (r *runner) unreachable(lk locker, err error) bool {
	if _, multi := lk.(*multiLocker); multi {
		return false
	}
	var ce *lock.ConflictError
	return errors.Is(err, lock.ErrUnavailable) && !errors.As(err, &ce)
}

// busy explains why the lock was not acquired: who holds it (read once
// more now) and whether its lease is renewed, rather than its TTL as a
// time left.
func (r *runner) busy(lk locker, err error, first []look) error {
	ctx, cancel := context.WithTimeout(context.Background(), lookTimeout)
	defer cancel()
	last := lk.looks(ctx)
	if first == nil {
		first = last
	}
	if err := notLockError(r.o.name, last); err != nil {
		return exitWith(exitDataErr, err)
	}
	var msg string
	var ce *lock.ConflictError
	if _, multi := lk.(*multiLocker); !multi && errors.As(err, &ce) {
		msg = fmt.Sprintf("lock not acquired: %q is %s", r.o.name, holdersLine(first, last))
	} else {
		// Several masters: the quorum error lists each master's reason.
		msg = fmt.Sprintf("%v; %s", err, holdersLine(first, last))
	}
	if len(last) == 1 && len(last[0].fields) > 0 {
		switch rw := last[0].mode != ""; {
		case rw && !r.o.shared && !r.o.exclusive:
			msg += "; this name is a read-write lock's: take it with --shared or --exclusive (a plain lock of the name never gets it)"
		case !rw && (r.o.shared || r.o.exclusive):
			msg += "; this name is a plain lock's, not a read-write lock's: take it without --shared and --exclusive"
		}
	}
	switch {
	case r.o.wait.d > 0:
		msg += fmt.Sprintf(" (waited %v)", r.o.wait.d)
	case r.o.conflict == exitOK:
		msg += " (skipped: --conflict-exit-code 0)"
	}
	return errors.New(msg)
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
	cmd.Env = r.childEnv(lk)
	setDeathSignal(cmd)
	tty := foregroundTerminal()
	ownGroup(cmd, tty)
	if r.o.verbose {
		// Said before the command starts, so before anything it prints.
		fmt.Fprintln(errOut, prefixed(fmt.Sprintf("running %s while holding lock %q", r.argv[0], r.o.name)))
	}
	if err := cmd.Start(); err != nil {
		tty.restore()
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = exitNotFound
		}
		r.release(lk)
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", r.argv[0], pe.Err) // not "fork/exec"
		}
		return exitWith(code, err)
	}
	tty.background(cmd.Process.Pid)
	r.pid = cmd.Process.Pid

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
			if !r.o.forwardAll && alreadyDelivered(s, cmd.Process.Pid) {
				// systemd sent it to the command too.
				if r.o.verbose {
					fmt.Fprintln(errOut, prefixed(fmt.Sprintf("%s reached %s too: not forwarded", signalName(s), r.argv[0])))
				}
				continue
			}
			if r.o.verbose {
				fmt.Fprintln(errOut, prefixed(fmt.Sprintf("forwarding %s to %s", signalName(s), r.argv[0])))
			}
			// Fails only when the command's group is gone; waitc then
			// reports its exit.
			_ = forward(cmd.Process.Pid, s)
			continue
		case werr := <-waitc:
			tty.restore()
			return r.finish(lk, werr, lost)
		case <-kill:
			kill = nil
			fmt.Fprintln(errOut, prefixed(fmt.Sprintf("%s still running %v after SIGTERM: SIGKILL", r.argv[0], r.o.grace)))
			_ = cmd.Process.Kill()
			continue
		case <-done:
			if lost = lk.Lost(); lost == nil {
				lost = fmt.Errorf("%w: lock %q ended while the command ran", lock.ErrLockLost, r.o.name)
			}
			var le *lock.LostError
			if r.o.lease > 0 && errors.As(lost, &le) && le.Kind == observe.LossLeaseExpired {
				lost = r.leaseRanOut(lk) // the library judged it first
			}
		case <-expired:
			lost = r.leaseRanOut(lk)
		}
		// The lock is gone: stop the command, once.
		done, expired = nil, nil
		fmt.Fprintln(errOut, prefixed(lost.Error()))
		fmt.Fprintln(errOut, prefixed(fmt.Sprintf("stopping %s: SIGTERM now, SIGKILL in %v", r.argv[0], r.o.grace)))
		_ = cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(r.o.grace)
		defer t.Stop() // runs once: done and expired are nil from now on
		kill = t.C
	}
}

// leaseRanOut is the loss of a lock whose --lease (or, for several
// masters, its validity) ran out.
func (r *runner) leaseRanOut(lk locker) error {
	what := fmt.Sprintf("its --lease of %v", r.o.lease)
	if _, multi := lk.(*multiLocker); multi {
		what = fmt.Sprintf("its validity (--lease %v less the acquisition time and clock drift)", r.o.lease)
	}
	return fmt.Errorf("%w: lock %q: %s ran out while the command ran", lock.ErrLockLost, r.o.name, what)
}

// finish releases the lock after the command exited with werr, and
// returns rlock's exit status: the command's, or exitLost when the lock
// was lost while it ran.
func (r *runner) finish(lk locker, werr, lost error) error {
	status := commandStatus(werr)
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		fmt.Fprintln(errOut, prefixed(fmt.Sprintf("waiting for %s: %v", r.argv[0], werr)))
	}
	if lost != nil {
		return exitWith(exitLost, fmt.Errorf("lock %q was lost while %s ran; it exited with status %d", r.o.name, r.argv[0], status))
	}
	if err := r.release(lk); errors.Is(err, lock.ErrLockLost) {
		// The loss showed only at release: the command may have run
		// unprotected for a while, so it is reported as a loss.
		return exitWith(exitLost, fmt.Errorf("%w (found at release; %s exited with status %d)", err, r.argv[0], status))
	}
	if r.o.verbose {
		fmt.Fprintln(errOut, prefixed(fmt.Sprintf("%s (pid %d) exited with status %d; released lock %q", r.argv[0], r.pid, status, r.o.name)))
	}
	if status == exitOK {
		return nil
	}
	return exitWith(status, nil)
}

// secretEnv are the variables of rlock's environment that the command
// does not get: its credentials are rlock's, not the command's. Nor does
// it get $RLOCK_ADDR when that holds a URL with a password.
var secretEnv = []string{envPassword, envSentinelPassword}

// childEnv is the command's environment: rlock's, without secretEnv and
// with RLOCK_NAME, RLOCK_FENCE (unless --no-fence) and the trace context
// of the hold.
func (r *runner) childEnv(lk locker) []string {
	set := map[string]string{envName: r.o.name}
	if !r.o.noFence {
		set[envFence] = strconv.FormatUint(lk.Fence(), 10)
	}
	var addrs []string
	for _, c := range lk.Clients() {
		addrs = append(addrs, c.Addr())
	}
	for k, v := range traceEnv(r.tr.holds.span(addrs)) {
		set[k] = v
	}
	drop := map[string]bool{envFence: true}
	for _, k := range secretEnv {
		drop[k] = true
	}
	if hasCredentials(os.Getenv(envAddr)) {
		drop[envAddr] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok || drop[k] {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range []string{envName, envFence, envTraceparent, envTracestate} {
		if v, ok := set[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// release unlocks with a fresh context bounded by releaseTimeout. A
// failure other than a loss is reported on stderr and does not change the
// exit status: a lock still held then expires after its lease (a release
// whose unlock message the ACL refused has freed it: P1-77).
func (r *runner) release(lk locker) error {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	err := lk.Unlock(ctx)
	if err != nil && !errors.Is(err, lock.ErrLockLost) {
		fmt.Fprintln(errOut, prefixed(fmt.Sprintf("releasing lock %q: %v; if it is still held, it expires after its lease", r.o.name, err)))
	}
	return err
}
