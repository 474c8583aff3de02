package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// The Docker backend runs the local image (see image.go) through
// testcontainers-go. The host's temporary directory is bind-mounted at
// /rlock, so data survives a killed container and the fake clock's spec file
// is shared. The container's port 6379 is published on 127.0.0.1 only, on a
// port chosen here, so it stays the same across Kill and Restart. Inside its
// own network namespace redis-server listens on every interface with
// protected mode off, since Docker's port forwarding reaches it from the
// bridge, not from loopback.
//
// Ryuk is disabled (TESTCONTAINERS_RYUK_DISABLED=true, unless set): it would
// have to be pulled. Without it a killed test binary leaves its containers
// behind; the next use of the backend removes containers whose owning
// process is gone (see reapOrphans).

const (
	// containerRoot is where the server's directory is mounted.
	containerRoot = "/rlock"
	redisPort     = "6379/tcp"

	labelKind  = "org.rlock.integration"
	labelOwner = "org.rlock.integration.owner"
)

var dockerInit = sync.OnceValue(func() error {
	if _, ok := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !ok {
		if err := os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true"); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := newDockerClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	reapOrphans(ctx, cli)
	return nil
})

// dockerAvailable reports whether a Docker daemon answers. The answer is
// kept for the life of the process.
func dockerAvailable() error { return dockerInit() }

func newDockerClient(ctx context.Context) (*client.Client, error) {
	tc, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, unavailable(BackendDocker, "%w", err)
	}
	if _, err := tc.Ping(ctx, client.PingOptions{}); err != nil {
		_ = tc.Close()
		return nil, unavailable(BackendDocker, "%w", err)
	}
	return tc.Client, nil
}

// dockerServer is one container.
type dockerServer struct {
	opts   Options
	cli    *client.Client
	ctr    *testcontainers.DockerContainer
	root   string
	data   string
	port   int
	clock  *fakeClock
	paused bool
}

func newDocker(ctx context.Context, opts Options) (*dockerServer, error) {
	cli, err := newDockerClient(ctx)
	if err != nil {
		return nil, err
	}
	d := &dockerServer{opts: opts, cli: cli}
	fail := func(err error) (*dockerServer, error) {
		return nil, errors.Join(err, d.close(ctx))
	}
	image, err := ensureImage(ctx, cli)
	if err != nil {
		return fail(err)
	}
	if d.root, err = makeRoot(); err != nil {
		return fail(err)
	}
	d.data = filepath.Join(d.root, "data")
	if err := os.Mkdir(d.data, 0o755); err != nil {
		return fail(fmt.Errorf("rlock: integration: %w", err))
	}
	if opts.ClockRate > 0 {
		if d.clock, err = newFakeClock(d.root, opts.ClockRate, BackendDocker); err != nil {
			return fail(err)
		}
	}
	for attempt := 1; ; attempt++ {
		if d.port, err = freePort(); err != nil {
			return fail(err)
		}
		err = d.create(ctx, image)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "already allocated") &&
			!strings.Contains(err.Error(), "address already in use") || attempt == portAttempts {
			return fail(err)
		}
	}
	if err := d.ready(ctx); err != nil {
		return fail(err)
	}
	return d, nil
}

// create creates and starts the container.
func (d *dockerServer) create(ctx context.Context, image string) error {
	args := []string{
		"--port", "6379",
		"--bind", "0.0.0.0",
		"--protected-mode", "no",
		"--dir", containerRoot + "/data",
		"--daemonize", "no",
		"--save", "",
	}
	if d.opts.Persist {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if d.opts.Password != "" {
		args = append(args, "--requirepass", d.opts.Password)
	}
	args = append(args, d.opts.Args...)
	env := map[string]string{}
	if d.clock != nil {
		for _, kv := range d.clock.envAt(containerRoot + "/" + filepath.Base(d.clock.spec)) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		if err := d.clock.started(time.Now()); err != nil {
			return err
		}
	}
	port := network.MustParsePort(redisPort)
	ctr, err := testcontainers.Run(ctx, image,
		testcontainers.WithCmd(args...),
		testcontainers.WithExposedPorts(redisPort),
		testcontainers.WithEnv(env),
		testcontainers.WithLabels(map[string]string{labelKind: "server", labelOwner: ownerID()}),
		testcontainers.WithLogger(tclog.NewNoopLogger()),
		testcontainers.WithConfigModifier(func(c *container.Config) {
			// Files in the mounted directory belong to the test's user.
			c.User = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
		}),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{port: {{
				HostIP:   netip.MustParseAddr("127.0.0.1"),
				HostPort: strconv.Itoa(d.port),
			}}}
			hc.Binds = append(hc.Binds, d.root+":"+containerRoot)
		}),
	)
	if ctr != nil {
		d.ctr = ctr
	}
	if err != nil {
		return fmt.Errorf("rlock: integration: start container: %w", err)
	}
	if d.clock != nil {
		return d.clock.started(time.Now())
	}
	return nil
}

// ready waits for PING and calibrates the clock.
func (d *dockerServer) ready(ctx context.Context) error {
	if err := waitReady(ctx, d.directAddr(), d.opts.Password, nil); err != nil {
		return err
	}
	return d.calibrate(ctx)
}

func (d *dockerServer) calibrate(ctx context.Context) error {
	if d.clock == nil || !d.clock.needsCalibration() || d.paused {
		return nil
	}
	before := time.Now()
	fake, err := serverTime(ctx, d.directAddr(), d.opts.Password)
	if err != nil {
		return err
	}
	after := time.Now()
	return d.clock.calibrate(fake, before.Add(after.Sub(before)/2))
}

func (d *dockerServer) directAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port))
}

func (d *dockerServer) id() string { return d.ctr.GetContainerID() }

// state inspects the container, bounded by a short timeout of its own.
func (d *dockerServer) state(ctx context.Context) (*container.State, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := d.cli.ContainerInspect(ctx, d.id(), client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("rlock: integration: inspect container: %w", err)
	}
	if res.Container.State == nil {
		return nil, errors.New("rlock: integration: inspect container: no state")
	}
	return res.Container.State, nil
}

func (d *dockerServer) running() bool {
	st, err := d.state(context.Background())
	return err == nil && st.Running
}

func (d *dockerServer) start(ctx context.Context) error {
	if d.clock != nil {
		if err := d.clock.started(time.Now()); err != nil {
			return err
		}
	}
	if _, err := d.cli.ContainerStart(ctx, d.id(), client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("rlock: integration: start container: %w", err)
	}
	d.paused = false
	if d.clock != nil {
		if err := d.clock.started(time.Now()); err != nil {
			return err
		}
	}
	return d.ready(ctx)
}

func (d *dockerServer) kill(ctx context.Context) error {
	if !d.running() {
		return ErrNotRunning
	}
	// The daemon sends SIGKILL to a paused container's processes too.
	wait := d.cli.ContainerWait(ctx, d.id(), client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	if _, err := d.cli.ContainerKill(ctx, d.id(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("rlock: integration: kill container: %w", err)
	}
	select {
	case <-wait.Result:
	case err := <-wait.Error:
		return fmt.Errorf("rlock: integration: wait for container to stop: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("rlock: integration: wait for container to stop: %w", context.Cause(ctx))
	}
	d.paused = false
	return nil
}

func (d *dockerServer) wipe() error {
	if err := os.RemoveAll(d.data); err != nil {
		return fmt.Errorf("rlock: integration: wipe data: %w", err)
	}
	if err := os.Mkdir(d.data, 0o755); err != nil {
		return fmt.Errorf("rlock: integration: wipe data: %w", err)
	}
	return nil
}

func (d *dockerServer) pause(ctx context.Context) error {
	st, err := d.state(ctx)
	switch {
	case err != nil:
		return err
	case !st.Running:
		return ErrNotRunning
	case st.Paused:
		return nil
	}
	if _, err := d.cli.ContainerPause(ctx, d.id(), client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("rlock: integration: pause container: %w", err)
	}
	d.paused = true
	return nil
}

func (d *dockerServer) resume(ctx context.Context) error {
	st, err := d.state(ctx)
	switch {
	case err != nil:
		return err
	case !st.Running:
		return ErrNotRunning
	case !st.Paused:
		return nil
	}
	if _, err := d.cli.ContainerUnpause(ctx, d.id(), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("rlock: integration: resume container: %w", err)
	}
	d.paused = false
	return nil
}

func (d *dockerServer) setClockRate(ctx context.Context, rate float64) error {
	if d.clock == nil {
		return ErrNoClock
	}
	if err := d.clock.setRate(time.Now(), rate); err != nil {
		return err
	}
	if !d.running() {
		return nil
	}
	return d.calibrate(ctx)
}

func (d *dockerServer) close(ctx context.Context) error {
	var errs []error
	if d.ctr != nil {
		if err := d.ctr.Terminate(ctx); err != nil {
			errs = append(errs, fmt.Errorf("rlock: integration: remove container: %w", err))
		}
	}
	if d.root != "" {
		errs = append(errs, os.RemoveAll(d.root))
	}
	if d.cli != nil {
		errs = append(errs, d.cli.Close())
	}
	return errors.Join(errs...)
}
