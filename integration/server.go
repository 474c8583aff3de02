package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/rlock-go/rlock/integration/internal/backendkit"
)

// DefaultTimeout bounds every wait of this package whose context has no
// deadline: starting a server, killing it, and the whole of Close.
const DefaultTimeout = 30 * time.Second

// Backend names the way a Server runs redis-server.
type Backend string

const (
	// BackendProcess runs redis-server from PATH as a child process.
	BackendProcess Backend = "process"
	// BackendDocker runs redis-server in a local Docker container. Its
	// driver lives in the module github.com/rlock-go/rlock/integration/docker,
	// so that testcontainers-go stays out of this module's graph: import
	// that package (for its side effect) to use it.
	BackendDocker Backend = "docker"
)

// Options describes a server. The zero value is a server without
// persistence, without a password, on the backend chosen automatically.
type Options struct {
	// Backend is where the server runs. "" picks BackendProcess when
	// redis-server is on PATH and otherwise the first registered backend
	// that can run (BackendDocker once its package is imported).
	Backend Backend

	// Persist turns on the append-only file with appendfsync always, so that
	// every acknowledged write survives Kill followed by
	// Restart(RestartOptions{KeepData: true}). When false the server runs
	// with --save "" and --appendonly no.
	Persist bool

	// Password, when set, is the server's requirepass.
	Password string

	// Args are extra redis-server arguments, appended after the ones this
	// package sets so that they win, e.g. "--maxmemory", "10mb".
	Args []string

	// ClockRate, when above 0, runs the server's clock at this multiple of
	// real time through libfaketime: 10 makes a 10-second TTL expire after
	// about one real second. 0 leaves the clock alone, and SetClockRate is
	// then refused. It needs libfaketime on the host (Debian package
	// faketime), and on the Docker backend an image built on a host that had
	// it: the image carries the host's copy, and without it the container's
	// clock would silently stay real.
	ClockRate float64

	// TLS, when set, makes the server accept TLS connections too, on a
	// port of their own (Server.TLSAddr), besides its plain port (Addr,
	// DirectAddr), which this package keeps using to manage it. Process
	// backend only.
	TLS *TLSOptions
}

// TLSOptions are a server's TLS files (PEM) and client policy: what
// redis-server's tls-cert-file, tls-key-file, tls-ca-cert-file and
// tls-auth-clients take.
type TLSOptions struct {
	CertFile string // the server's certificate
	KeyFile  string // its private key
	CAFile   string // the CA that client certificates must chain to (redis-server requires one)
	// AuthClients requires clients to present a certificate signed by
	// CAFile; without it, they may but need not.
	AuthClients bool
}

// RestartOptions describes a restart.
type RestartOptions struct {
	// KeepData keeps the server's data directory. Without Persist the
	// directory holds nothing, so keys are lost either way. When false the
	// directory is wiped before the server starts again.
	KeepData bool

	// Delay is how long the server stays down before it starts again.
	Delay time.Duration
}

// backend is one way of running redis-server. A Server serialises all calls.
type backend interface {
	directAddr() string
	// start starts the server on its ports and waits until it answers PING.
	start(ctx context.Context) error
	kill(ctx context.Context) error
	running() bool
	wipe() error
	pause(ctx context.Context) error
	resume(ctx context.Context) error
	setClockRate(ctx context.Context, rate float64) error
	// close kills the server if needed and removes everything it created.
	close(ctx context.Context) error
}

// Server is one running redis-server with a loopback proxy in front of it.
// Its methods are safe for concurrent use; faults are applied one at a time.
type Server struct {
	opts  Options
	kind  Backend
	proxy *proxy

	mu     sync.Mutex // serialises faults; held for their whole duration
	b      backend
	closed bool
}

// StartRedis starts a server and returns once it answers PING. The caller
// must Close it. Waits are bounded by ctx, or by DefaultTimeout when ctx has
// no deadline.
//
// May return ErrBackendUnavailable, ErrNoClock, or the server's own start
// error with the tail of its log.
func StartRedis(ctx context.Context, opts Options) (*Server, error) {
	return startServer(ctx, opts, true)
}

// startServer starts a server, with its proxy when withProxy.
func startServer(ctx context.Context, opts Options, withProxy bool) (*Server, error) {
	if !withProxy {
		return startBehind(ctx, opts, nil)
	}
	p, err := listenProxy()
	if err != nil {
		return nil, err
	}
	return startBehind(ctx, opts, p)
}

// startBehind starts a server behind the proxy p, which listens already
// (listenProxy) and is served once the server runs; nil p: no proxy. On
// an error p is closed.
func startBehind(ctx context.Context, opts Options, p *proxy) (s *Server, err error) {
	if p != nil {
		defer func() {
			if err != nil {
				err = errors.Join(err, p.close())
			}
		}()
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if opts.ClockRate < 0 {
		return nil, fmt.Errorf("rlock: integration: negative ClockRate %v", opts.ClockRate)
	}
	kind, err := chooseBackend(opts.Backend)
	if err != nil {
		return nil, err
	}
	if opts.TLS != nil && kind != BackendProcess {
		return nil, fmt.Errorf("rlock: integration: TLS runs on the process backend only, not %q", kind)
	}
	backendkit.ReapDirs()
	var b backend
	if kind == BackendProcess {
		b, err = newProcess(ctx, opts)
	} else {
		b, err = startRegistered(ctx, kind, opts)
	}
	if err != nil {
		return nil, err
	}
	if p != nil {
		p.serve(b.directAddr())
	}
	return &Server{opts: opts, kind: kind, proxy: p, b: b}, nil
}

// StartMasters starts n independent servers with the same options, for
// multi-master (RedLock) tests. On error it closes the ones it started.
//
// May return the errors of StartRedis.
func StartMasters(ctx context.Context, n int, opts Options) ([]*Server, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	servers := make([]*Server, 0, n)
	for range n {
		s, err := StartRedis(ctx, opts)
		if err != nil {
			for _, started := range servers {
				err = errors.Join(err, started.Close())
			}
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// chooseBackend resolves "" and checks that the backend can run here: ""
// is BackendProcess when redis-server is on PATH, else the first
// registered backend that is available.
func chooseBackend(want Backend) (Backend, error) {
	switch want {
	case BackendProcess:
		return BackendProcess, processAvailable()
	case "":
		errs := []error{processAvailable()}
		if errs[0] == nil {
			return BackendProcess, nil
		}
		for _, b := range registered() {
			err := availableRegistered(b)
			if err == nil {
				return b, nil
			}
			errs = append(errs, err)
		}
		return "", errors.Join(errs...)
	default:
		return want, availableRegistered(want)
	}
}

// Backend reports where the server runs.
func (s *Server) Backend() Backend { return s.kind }

// Addr is the "127.0.0.1:port" of the Server's proxy. Clients under test use
// it, so that Partition cuts them off. The address stays the same across
// Kill and Restart. A Cluster's nodes have no proxy: their Addr is
// DirectAddr; neither have a SentinelGroup's servers, unless
// SentinelOptions.Proxied.
func (s *Server) Addr() string {
	if s.proxy == nil {
		return s.b.directAddr()
	}
	return s.proxy.addr()
}

// DirectAddr is the "127.0.0.1:port" of redis-server itself, bypassing the
// proxy: for administrative commands and benchmarks. It stays the same
// across Kill and Restart.
func (s *Server) DirectAddr() string { return s.b.directAddr() }

// TLSAddr is the "127.0.0.1:port" of the server's TLS port, without a
// proxy; "" for a server started without Options.TLS. It stays the same
// across Kill and Restart.
func (s *Server) TLSAddr() string {
	if p, ok := s.b.(*process); ok && p.tlsPort != 0 {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.tlsPort))
	}
	return ""
}

// Password is Options.Password, for building clients.
func (s *Server) Password() string { return s.opts.Password }

// Ping sends PING (after AUTH when the server has a password) to DirectAddr
// and waits for PONG, bounded by ctx.
//
// May return ErrClosed, or the network error.
func (s *Server) Ping(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return backendkit.Ping(ctx, s.DirectAddr(), s.opts.Password)
}

// Kill kills the server with SIGKILL (docker kill on the Docker backend) and
// waits until it has exited. Clients see their connections reset; until
// Restart, DirectAddr refuses connections and Addr accepts them only to reset
// them at once.
//
// May return ErrNotRunning, ErrClosed, or ctx's error.
func (s *Server) Kill(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.b.kill(ctx)
}

// Restart starts the server again on the same ports, after killing it if it
// is still running (paused or not) and after waiting o.Delay. Unless
// o.KeepData, the data directory is wiped first. It returns once the server
// answers PING. A partition is left as it is.
//
// May return ErrClosed, ctx's error, or the server's start error.
func (s *Server) Restart(ctx context.Context, o RestartOptions) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.b.running() {
		if err := s.b.kill(ctx); err != nil {
			return err
		}
	}
	if !o.KeepData {
		if err := s.b.wipe(); err != nil {
			return err
		}
	}
	if o.Delay > 0 {
		t := time.NewTimer(o.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("rlock: integration: restart delay: %w", context.Cause(ctx))
		}
	}
	return s.b.start(ctx)
}

// Pause stops the server with SIGSTOP (or freezes its container) and returns
// once it is stopped: it keeps its connections but answers nothing until
// Resume. Pausing a paused server does nothing.
//
// May return ErrNotRunning, ErrClosed, or ctx's error.
func (s *Server) Pause(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.b.pause(ctx)
}

// Resume continues a paused server with SIGCONT (or unfreezes its
// container). Resuming a server that is not paused does nothing.
//
// May return ErrNotRunning, ErrClosed, or ctx's error.
func (s *Server) Resume(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.b.resume(ctx)
}

// Partition cuts the server off from Addr: connections through the proxy are
// closed, and new ones are accepted but get nothing forwarded (their bytes
// wait in the kernel) until Heal. DirectAddr keeps working: the server is
// unreachable from the client side only. Partitioning twice does nothing.
//
// May return ErrClosed, ErrNoProxy.
func (s *Server) Partition(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.proxy == nil {
		return ErrNoProxy
	}
	s.proxy.partition()
	return nil
}

// Heal ends a partition. Connections accepted during it are then forwarded,
// with whatever they sent meanwhile, like TCP retransmission after a network
// heals; clients that gave up on them have closed them already.
//
// May return ErrClosed, ErrNoProxy.
func (s *Server) Heal(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.proxy == nil {
		return ErrNoProxy
	}
	return s.proxy.heal()
}

// SetClockRate changes how fast the server's clock runs, as a multiple of
// real time, from now on. The fake clock stays continuous: it does not jump
// when the rate changes, nor across Kill and Restart (up to the few
// milliseconds a process takes to start, multiplied by the rate). It works
// only when Options.ClockRate was set at start. On a killed server the rate
// applies from Restart.
//
// May return ErrNoClock, ErrClosed, or the error writing libfaketime's file.
func (s *Server) SetClockRate(ctx context.Context, rate float64) error {
	if rate <= 0 {
		return fmt.Errorf("rlock: integration: clock rate must be above 0, got %v", rate)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.b.setClockRate(ctx, rate)
}

// Close kills the server, stops the proxy and removes the server's
// directory. It is idempotent; calls after the first return nil. It is
// bounded by DefaultTimeout.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	if s.proxy == nil {
		return s.b.close(ctx)
	}
	return errors.Join(s.b.close(ctx), s.proxy.close())
}

// withDefaultTimeout bounds ctx by DefaultTimeout when it has no deadline.
func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}
