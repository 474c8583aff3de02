package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// A Driver runs servers of one backend other than BackendProcess, which is
// built in. The Docker backend's driver is in package
// github.com/rlock-go/rlock/integration/docker, a module of its own so
// that testcontainers-go and the Docker client stay out of the graph of
// every module that only needs the process backend; importing that package
// registers it.
type Driver interface {
	// Available reports whether the backend can run on this machine. An
	// error matching ErrBackendUnavailable (see Unavailable) makes Redis
	// and Masters skip a test unless RLOCK_REQUIRE names the backend. The
	// answer may be kept for the life of the process.
	Available() error

	// Start starts a server described by opts, without a proxy, and
	// returns once it answers PING on its DirectAddr. Waits are bounded by
	// ctx.
	Start(ctx context.Context, opts Options) (Instance, error)
}

// An Instance is one server of a Driver. The Server wrapping it
// serialises all calls, so an Instance need not be safe for concurrent
// use. Each method behaves as the Server method of the same name
// describes.
type Instance interface {
	// DirectAddr is the "127.0.0.1:port" of redis-server, the same across
	// Kill and Start.
	DirectAddr() string
	// Start starts a killed server again on the same port and waits until
	// it answers PING.
	Start(ctx context.Context) error
	// Kill kills the server (paused or not) and waits until it has exited.
	// It returns ErrNotRunning when the server is not running.
	Kill(ctx context.Context) error
	// Running reports whether the server runs, paused or not.
	Running() bool
	// Wipe empties the data directory of a killed server.
	Wipe() error
	// Pause freezes the server; pausing a paused server does nothing.
	// It returns ErrNotRunning when the server is not running.
	Pause(ctx context.Context) error
	// Resume thaws a paused server; resuming one that is not paused does
	// nothing. It returns ErrNotRunning when the server is not running.
	Resume(ctx context.Context) error
	// SetClockRate changes the rate of the fake clock, or returns
	// ErrNoClock when the server was started without Options.ClockRate.
	SetClockRate(ctx context.Context, rate float64) error
	// Close kills the server if needed and removes everything it created.
	Close(ctx context.Context) error
}

var (
	driversMu sync.Mutex
	drivers   = map[Backend]Driver{}
	order     []Backend // registration order
)

// Register makes a Driver available as backend b: to Options.Backend, to
// Backends, and so to tests that run on every backend. It is meant to be
// called from the init function of the driver's package. It panics if b
// is BackendProcess or "", or is registered already.
func Register(b Backend, d Driver) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if b == "" || b == BackendProcess {
		panic(fmt.Sprintf("rlock: integration: cannot register backend %q", b))
	}
	if _, dup := drivers[b]; dup {
		panic(fmt.Sprintf("rlock: integration: backend %q registered twice", b))
	}
	drivers[b] = d
	order = append(order, b)
}

// Unavailable returns an error saying why backend b cannot run here, for
// Driver.Available and Driver.Start: it matches ErrBackendUnavailable and
// names b, so that tests skip unless RLOCK_REQUIRE names b. The reason is
// formatted as by fmt.Errorf.
func Unavailable(b Backend, format string, args ...any) error {
	return unavailable(b, format, args...)
}

// registered lists the registered backends in registration order.
func registered() []Backend {
	driversMu.Lock()
	defer driversMu.Unlock()
	return slices.Clone(order)
}

func driver(b Backend) (Driver, error) {
	driversMu.Lock()
	defer driversMu.Unlock()
	d, ok := drivers[b]
	if !ok {
		if b == BackendDocker {
			return nil, fmt.Errorf("rlock: integration: backend %q is not registered: import _ \"github.com/rlock-go/rlock/integration/docker\"", b)
		}
		return nil, fmt.Errorf("rlock: integration: unknown backend %q", b)
	}
	return d, nil
}

func availableRegistered(b Backend) error {
	d, err := driver(b)
	if err != nil {
		return err
	}
	return d.Available()
}

func startRegistered(ctx context.Context, b Backend, opts Options) (backend, error) {
	d, err := driver(b)
	if err != nil {
		return nil, err
	}
	in, err := d.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return instance{in}, nil
}

// instance adapts a Driver's Instance to the package's backend.
type instance struct{ in Instance }

func (i instance) directAddr() string               { return i.in.DirectAddr() }
func (i instance) start(ctx context.Context) error  { return i.in.Start(ctx) }
func (i instance) kill(ctx context.Context) error   { return i.in.Kill(ctx) }
func (i instance) running() bool                    { return i.in.Running() }
func (i instance) wipe() error                      { return i.in.Wipe() }
func (i instance) pause(ctx context.Context) error  { return i.in.Pause(ctx) }
func (i instance) resume(ctx context.Context) error { return i.in.Resume(ctx) }
func (i instance) close(ctx context.Context) error  { return i.in.Close(ctx) }
func (i instance) setClockRate(ctx context.Context, rate float64) error {
	return i.in.SetClockRate(ctx, rate)
}
