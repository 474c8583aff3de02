package docker

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

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/integration/internal/backendkit"
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

func init() { integration.Register(integration.BackendDocker, driver{}) }

// driver is the integration.Driver of BackendDocker.
type driver struct{}

func (driver) Available() error { return dockerInit() }

func (driver) Start(ctx context.Context, opts integration.Options) (integration.Instance, error) {
	d, err := newDocker(ctx, opts)
	if err != nil {
		return nil, err
	}
	return d, nil
}

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

func newDockerClient(ctx context.Context) (*client.Client, error) {
	tc, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, integration.Unavailable(integration.BackendDocker, "%w", err)
	}
	if _, err := tc.Ping(ctx, client.PingOptions{}); err != nil {
		_ = tc.Close()
		return nil, integration.Unavailable(integration.BackendDocker, "%w", err)
	}
	return tc.Client, nil
}

// dockerServer is one container.
type dockerServer struct {
	opts   integration.Options
	cli    *client.Client
	ctr    *testcontainers.DockerContainer
	root   string
	data   string
	port   int
	clock  *backendkit.Clock
	paused bool
}

func newDocker(ctx context.Context, opts integration.Options) (*dockerServer, error) {
	cli, err := newDockerClient(ctx)
	if err != nil {
		return nil, err
	}
	d := &dockerServer{opts: opts, cli: cli}
	fail := func(err error) (*dockerServer, error) {
		return nil, errors.Join(err, d.Close(ctx))
	}
	image, err := ensureImage(ctx, cli)
	if err != nil {
		return fail(err)
	}
	if d.root, err = backendkit.MakeRoot(); err != nil {
		return fail(err)
	}
	d.data = filepath.Join(d.root, "data")
	if err := os.Mkdir(d.data, 0o755); err != nil {
		return fail(fmt.Errorf("rlock: integration: %w", err))
	}
	if opts.ClockRate > 0 {
		if d.clock, err = backendkit.NewClock(d.root, opts.ClockRate, string(integration.BackendDocker)); err != nil {
			return fail(err)
		}
	}
	for attempt := 1; ; attempt++ {
		if d.port, err = backendkit.FreePort(); err != nil {
			return fail(err)
		}
		err = d.create(ctx, image)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "already allocated") &&
			!strings.Contains(err.Error(), "address already in use") || attempt == backendkit.PortAttempts {
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
		for _, kv := range d.clock.EnvAt(containerRoot + "/" + filepath.Base(d.clock.Spec())) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		if err := d.clock.Started(time.Now()); err != nil {
			return err
		}
	}
	port := network.MustParsePort(redisPort)
	ctr, err := testcontainers.Run(ctx, image,
		testcontainers.WithCmd(args...),
		testcontainers.WithExposedPorts(redisPort),
		testcontainers.WithEnv(env),
		testcontainers.WithLabels(map[string]string{labelKind: "server", labelOwner: backendkit.OwnerID()}),
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
		return d.clock.Started(time.Now())
	}
	return nil
}

// ready waits for PING and calibrates the clock.
func (d *dockerServer) ready(ctx context.Context) error {
	if err := backendkit.WaitReady(ctx, d.DirectAddr(), d.opts.Password, nil); err != nil {
		return err
	}
	return d.calibrate(ctx)
}

func (d *dockerServer) calibrate(ctx context.Context) error {
	if d.clock == nil || !d.clock.NeedsCalibration() || d.paused {
		return nil
	}
	before := time.Now()
	fake, err := backendkit.ServerTime(ctx, d.DirectAddr(), d.opts.Password)
	if err != nil {
		return err
	}
	after := time.Now()
	return d.clock.Calibrate(fake, before.Add(after.Sub(before)/2))
}

func (d *dockerServer) DirectAddr() string {
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

func (d *dockerServer) Running() bool {
	st, err := d.state(context.Background())
	return err == nil && st.Running
}

func (d *dockerServer) Start(ctx context.Context) error {
	if d.clock != nil {
		if err := d.clock.Started(time.Now()); err != nil {
			return err
		}
	}
	if _, err := d.cli.ContainerStart(ctx, d.id(), client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("rlock: integration: start container: %w", err)
	}
	d.paused = false
	if d.clock != nil {
		if err := d.clock.Started(time.Now()); err != nil {
			return err
		}
	}
	return d.ready(ctx)
}

func (d *dockerServer) Kill(ctx context.Context) error {
	if !d.Running() {
		return integration.ErrNotRunning
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

func (d *dockerServer) Wipe() error {
	if err := os.RemoveAll(d.data); err != nil {
		return fmt.Errorf("rlock: integration: wipe data: %w", err)
	}
	if err := os.Mkdir(d.data, 0o755); err != nil {
		return fmt.Errorf("rlock: integration: wipe data: %w", err)
	}
	return nil
}

func (d *dockerServer) Pause(ctx context.Context) error {
	st, err := d.state(ctx)
	switch {
	case err != nil:
		return err
	case !st.Running:
		return integration.ErrNotRunning
	case st.Paused:
		return nil
	}
	err = retryTransient(ctx, func() error {
		_, err := d.cli.ContainerPause(ctx, d.id(), client.ContainerPauseOptions{})
		return err
	}, func(st *container.State) bool { return st.Paused }, d.state)
	if err != nil {
		return fmt.Errorf("rlock: integration: pause container: %w", err)
	}
	d.paused = true
	return nil
}

func (d *dockerServer) Resume(ctx context.Context) error {
	st, err := d.state(ctx)
	switch {
	case err != nil:
		return err
	case !st.Running:
		return integration.ErrNotRunning
	case !st.Paused:
		return nil
	}
	err = retryTransient(ctx, func() error {
		_, err := d.cli.ContainerUnpause(ctx, d.id(), client.ContainerUnpauseOptions{})
		return err
	}, func(st *container.State) bool { return !st.Paused }, d.state)
	if err != nil {
		return fmt.Errorf("rlock: integration: resume container: %w", err)
	}
	d.paused = false
	return nil
}

func (d *dockerServer) SetClockRate(ctx context.Context, rate float64) error {
	if d.clock == nil {
		return integration.ErrNoClock
	}
	if err := d.clock.SetRate(time.Now(), rate); err != nil {
		return err
	}
	if !d.Running() {
		return nil
	}
	return d.calibrate(ctx)
}

func (d *dockerServer) Close(ctx context.Context) error {
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

// reapOrphans removes containers left by processes of this machine that no
// longer run. Errors are ignored: reaping is a courtesy.
func reapOrphans(ctx context.Context, cli *client.Client) {
	self := backendkit.OwnerID()
	if self == "" {
		return
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", labelOwner),
	})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		if !backendkit.OwnerGone(self, c.Labels[labelOwner]) {
			continue
		}
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
}
