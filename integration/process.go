package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rlock-go/rlock/integration/internal/backendkit"
)

func processAvailable() error {
	if _, err := exec.LookPath(backendkit.RedisServerBin); err != nil {
		return unavailable(BackendProcess, "%s not on PATH: %w", backendkit.RedisServerBin, err)
	}
	return nil
}

// process runs redis-server as a child of the test binary, in root/data,
// logging to root/redis.log. A sentinel (conf set) runs redis-sentinel
// with its configuration file root/sentinel.conf, which it rewrites as
// it learns the deployment; Restart keeps it. A sentinel's root is in RAM
// (/dev/shm) where the machine has it, a server's in os.TempDir().
type process struct {
	opts Options
	bin  string
	conf string // the sentinel's configuration file; "" for a server
	root string
	data string
	log  string
	port int
	// tlsPort is the TLS port with Options.TLS, else 0.
	tlsPort int
	clock   *backendkit.Clock // nil without ClockRate

	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait has returned
	paused bool
	// pauses are the spans from each pause to the resume, kill or
	// restart that ended it (to is zero while paused): a sentinel's TILT
	// in or just after one is the test's doing (sentinel_tilt.go).
	// Guarded, as paused, by the Server's mu: Pause, Resume, Kill and
	// Restart hold it.
	pauses []span
}

// newProcess creates the directory and starts the server on a free port.
func newProcess(ctx context.Context, opts Options) (*process, error) {
	return startProcess(ctx, opts, backendkit.RedisServerBin, "")
}

// startProcess creates the directory and starts bin on a free port; with
// a sentinel configuration conf, bin is redis-sentinel and conf is
// written to its file first.
func startProcess(ctx context.Context, opts Options, name, conf string) (*process, error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		return nil, unavailable(BackendProcess, "%s not on PATH: %w", name, err)
	}
	makeRoot := backendkit.MakeRoot
	if conf != "" {
		// A sentinel fsyncs its configuration file each time it rewrites
		// it, in its one thread: a disk that takes 2s puts it in TILT
		// (sentinel_tilt.go). In RAM, its fsyncs wait for nothing.
		makeRoot = backendkit.MakeRootInRAM
	}
	root, err := makeRoot()
	if err != nil {
		return nil, err
	}
	p := &process{
		opts: opts,
		bin:  bin,
		root: root,
		data: filepath.Join(root, "data"),
		log:  filepath.Join(root, "redis.log"),
	}
	if err := os.Mkdir(p.data, 0o755); err != nil {
		return nil, errors.Join(fmt.Errorf("rlock: integration: %w", err), os.RemoveAll(root))
	}
	if conf != "" {
		p.conf = filepath.Join(root, "sentinel.conf")
		if err := os.WriteFile(p.conf, []byte(conf), 0o644); err != nil {
			return nil, errors.Join(fmt.Errorf("rlock: integration: %w", err), os.RemoveAll(root))
		}
	}
	if opts.ClockRate > 0 {
		if p.clock, err = backendkit.NewClock(root, opts.ClockRate, string(BackendProcess)); err != nil {
			return nil, errors.Join(err, os.RemoveAll(root))
		}
	}
	for attempt := 1; ; attempt++ {
		if p.port, err = backendkit.FreePort(); err != nil {
			return nil, errors.Join(err, os.RemoveAll(root))
		}
		if opts.TLS != nil {
			if p.tlsPort, err = backendkit.FreePort(); err != nil {
				return nil, errors.Join(err, os.RemoveAll(root))
			}
		}
		err = p.start(ctx)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, errPortTaken) || attempt == backendkit.PortAttempts {
			return nil, errors.Join(err, p.close(ctx))
		}
	}
}

// errPortTaken means redis-server could not bind its port.
var errPortTaken = errors.New("port taken")

func (p *process) directAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
}

func (p *process) args() []string {
	a := []string{
		"--port", strconv.Itoa(p.port),
		"--bind", "127.0.0.1",
		"--dir", p.data,
		"--daemonize", "no",
		"--logfile", "",
		"--save", "",
	}
	if p.opts.Persist {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--appendonly", "no")
	}
	if p.opts.Password != "" {
		a = append(a, "--requirepass", p.opts.Password)
	}
	if t := p.opts.TLS; t != nil {
		auth := "no"
		if t.AuthClients {
			auth = "yes"
		}
		a = append(a, "--tls-port", strconv.Itoa(p.tlsPort), "--tls-cert-file", t.CertFile, "--tls-key-file", t.KeyFile,
			"--tls-ca-cert-file", t.CAFile, "--tls-auth-clients", auth)
	}
	a = append(a, p.opts.Args...)
	if p.conf != "" {
		// redis-sentinel takes its configuration file first.
		a = append([]string{p.conf}, a...)
	}
	return a
}

// env is the parent's environment without any preload or faketime settings,
// plus the clock's when there is one.
func (p *process) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LD_PRELOAD=") || strings.HasPrefix(kv, "FAKETIME") {
			continue
		}
		env = append(env, kv)
	}
	if p.clock != nil {
		env = append(env, p.clock.Env()...)
	}
	return env
}

func (p *process) running() bool {
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *process) start(ctx context.Context) error {
	if p.running() {
		return errors.New("rlock: integration: redis-server already running")
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("rlock: integration: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	logStart, _ := logf.Seek(0, 2)

	cmd := exec.Command(p.bin, p.args()...)
	cmd.Dir = p.data
	cmd.Env = p.env()
	cmd.Stdout = logf
	cmd.Stderr = logf
	// The kernel kills the server when the thread that started it exits,
	// so it never outlives the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if p.clock != nil {
		if err := p.clock.Started(time.Now()); err != nil {
			return err
		}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("rlock: integration: start redis-server: %w", err)
	}
	if p.clock != nil {
		// libfaketime takes S when the process starts; now is closer to it.
		if err := p.clock.Started(time.Now()); err != nil {
			return errors.Join(err, p.killCmd(ctx, cmd))
		}
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.unpaused() // a process that died paused ends its pause span here
	p.cmd, p.exited = cmd, exited

	if err := backendkit.WaitReady(ctx, p.directAddr(), p.opts.Password, exited); err != nil {
		log := p.logSince(logStart)
		err = errors.Join(err, p.kill(ctx))
		if bytes.Contains(log, []byte("Address already in use")) {
			err = errors.Join(errPortTaken, err)
		}
		return fmt.Errorf("%w\nredis-server log:\n%s", err, logTail(log, 15))
	}
	return p.calibrate(ctx)
}

// calibrate measures when libfaketime started the process's clock, which
// the fake clock needs to change rate without a jump. Starting a process
// takes a few milliseconds that a rate of 50 would turn into a jump of a
// quarter of a second.
func (p *process) calibrate(ctx context.Context) error {
	if p.clock == nil || !p.clock.NeedsCalibration() || p.paused || !p.running() {
		return nil
	}
	before := time.Now()
	fake, err := backendkit.ServerTime(ctx, p.directAddr(), p.opts.Password)
	if err != nil {
		return err
	}
	after := time.Now()
	return p.clock.Calibrate(fake, before.Add(after.Sub(before)/2))
}

// killCmd kills a process that has no wait goroutine yet.
func (p *process) killCmd(ctx context.Context, cmd *exec.Cmd) error {
	_ = cmd.Process.Kill()
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rlock: integration: wait for redis-server to exit: %w", context.Cause(ctx))
	}
}

func (p *process) logSince(off int64) []byte {
	b, err := os.ReadFile(p.log)
	if err != nil || off > int64(len(b)) {
		return nil
	}
	return b[off:]
}

func (p *process) kill(ctx context.Context) error {
	if !p.running() {
		return ErrNotRunning
	}
	// SIGKILL also ends a stopped process.
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("rlock: integration: kill redis-server: %w", err)
	}
	select {
	case <-p.exited:
		p.unpaused()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rlock: integration: wait for redis-server to exit: %w", context.Cause(ctx))
	}
}

func (p *process) wipe() error {
	if err := os.RemoveAll(p.data); err != nil {
		return fmt.Errorf("rlock: integration: wipe data: %w", err)
	}
	if err := os.Mkdir(p.data, 0o755); err != nil {
		return fmt.Errorf("rlock: integration: wipe data: %w", err)
	}
	return nil
}

func (p *process) pause(ctx context.Context) error {
	if !p.running() {
		return ErrNotRunning
	}
	if p.paused {
		return nil
	}
	from := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("rlock: integration: pause redis-server: %w", err)
	}
	p.paused, p.pauses = true, append(p.pauses, span{from: from})
	return p.waitState(ctx, func(s byte) bool { return s == 'T' })
}

func (p *process) resume(ctx context.Context) error {
	if !p.running() {
		return ErrNotRunning
	}
	if !p.paused {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("rlock: integration: resume redis-server: %w", err)
	}
	err := p.waitState(ctx, func(s byte) bool { return s != 'T' })
	p.unpaused()
	return err
}

// unpaused notes that the process is no longer paused (resumed, killed,
// started again), ending its last pause span.
func (p *process) unpaused() {
	if p.paused && len(p.pauses) > 0 {
		p.pauses[len(p.pauses)-1].to = time.Now()
	}
	p.paused = false
}

// waitState waits until the process state in /proc satisfies ok: signals
// are delivered asynchronously and the kernel offers no notification of a
// stop to anyone but the parent's wait, which the wait goroutine owns.
func (p *process) waitState(ctx context.Context, ok func(byte) bool) error {
	path := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // no /proc: trust the signal
		}
		// The state follows the parenthesised command name.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && ok(b[i+2]) {
			return nil
		}
		select {
		case <-p.exited:
			return ErrNotRunning
		case <-ctx.Done():
			return fmt.Errorf("rlock: integration: wait for redis-server state: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
}

func (p *process) setClockRate(ctx context.Context, rate float64) error {
	if p.clock == nil {
		return ErrNoClock
	}
	if err := p.clock.SetRate(time.Now(), rate); err != nil {
		return err
	}
	return p.calibrate(ctx)
}

func (p *process) close(ctx context.Context) error {
	var err error
	if p.running() {
		err = p.kill(ctx)
	}
	return errors.Join(err, os.RemoveAll(p.root))
}
