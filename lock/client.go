package lock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/pubsub"
	"github.com/rlock-go/rlock/reentrant"
	"github.com/rlock-go/rlock/watchdog"
)

// Client holds locks on one Redis master, or on one Redis Cluster. It owns
// the background work for them: one watchdog loop renewing every lock it
// holds, one subscription connection per master for every waiter, and
// nothing per lock. A Client is safe for concurrent use; make one per
// process and master (or cluster).
type Client struct {
	cfg     Config
	rc      rueidis.Client
	owned   bool // rc was created by New, so Close closes it
	addr    string
	id      string
	publish string
	hub     subscriber
	wd      *watchdog.Registry
	obs     *Observer

	done    chan struct{} // closed by Close: waits end with ErrClosed
	stopBg  context.CancelFunc
	bg      sync.WaitGroup // the watchdog loop and the latch cleaner
	latches chan string    // unlock latches to delete

	mu       sync.Mutex
	closed   bool
	ops      sync.WaitGroup
	holdings map[holdKey]*holding
}

// subscriber is where waiters subscribe: a pubsub.Hub (one connection),
// or pubsub.Shards (one Hub per cluster master) for sharded pub/sub in a
// cluster.
type subscriber interface {
	Subscribe(ctx context.Context, name string) (*pubsub.Waiter, error)
	Close()
}

// New connects to the master in cfg (or, with cfg.Cluster, to the
// cluster its Addrs seed) and returns a Client. The connection is
// checked, and rlock's scripts loaded, in one round trip per node bounded
// by ctx and cfg.DialTimeout.
//
// May return ErrInvalid, ErrUnavailable, ErrAuth.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if ctx == nil {
		return nil, invalidf("nil context")
	}
	cfg, err := cfg.withDefaults(true)
	if err != nil {
		return nil, err
	}
	dial := cfg.DialTimeout
	if dl, ok := ctx.Deadline(); ok {
		dial = min(dial, time.Until(dl))
	}
	if dial <= 0 {
		return nil, errors.Join(masterErr(cfg.Addrs[0], "connect", context.DeadlineExceeded), ctx.Err())
	}
	opt := rueidis.ClientOption{
		InitAddress:       cfg.Addrs,
		Username:          cfg.Username,
		Password:          cfg.Password,
		TLSConfig:         cfg.TLS,
		SelectDB:          cfg.DB,
		ForceSingleClient: !cfg.Cluster,
		DisableCache:      true,
		AlwaysRESP2:       cfg.AlwaysRESP2,
		Dialer:            net.Dialer{Timeout: dial},
		ConnWriteTimeout:  max(cfg.CommandTimeout, time.Second),
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, masterErr(cfg.Addrs[0], "connect", err)
	}
	if cfg.Cluster && rc.Mode() != rueidis.ClientModeCluster {
		rc.Close()
		return nil, invalidf("Cluster set, but %s is not a cluster node (cluster-enabled no)", cfg.Addrs[0])
	}
	// The first round trip checks the connection and loads the scripts,
	// so that the first renewal tick is one round trip too. In a cluster,
	// on every node.
	pctx, cancel := context.WithTimeout(ctx, dial)
	defer cancel()
	if err := loadScripts(pctx, rc); err != nil {
		rc.Close()
		return nil, errors.Join(err, ctx.Err())
	}
	c, err := newClient(pctx, rc, cfg, true)
	if err != nil {
		rc.Close()
		return nil, errors.Join(err, ctx.Err())
	}
	return c, nil
}

// loadScripts loads rlock's scripts on rc's master, or on every node of a
// cluster, concurrently.
func loadScripts(ctx context.Context, rc rueidis.Client) error {
	if rc.Mode() != rueidis.ClientModeCluster {
		if err := reentrant.Load(ctx, rc); err != nil {
			return masterErr(firstNode(rc), "connect", err)
		}
		return nil
	}
	nodes := rc.Nodes()
	errs := make(chan error, len(nodes))
	for addr, n := range nodes {
		go func() { errs <- masterErr(addr, "connect", reentrant.Load(ctx, n)) }()
	}
	var all []error
	for range nodes {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// firstNode returns the lowest address among rc's nodes.
func firstNode(rc rueidis.Client) string {
	addr := ""
	for a := range rc.Nodes() {
		if addr == "" || a < addr {
			addr = a
		}
	}
	return addr
}

// FromClient returns a Client on an existing rueidis client, connected to
// one standalone master or (rueidis.ClientModeCluster) to a Redis
// Cluster; cfg.Cluster is then implied. Close does not close rc.
// cfg.Addrs, credentials, TLS, DB, DialTimeout and AlwaysRESP2 are rc's
// business and are ignored. Scripts are not loaded: their first use
// loads them (a NOSCRIPT answer costs one more round trip).
//
// With a cluster client and PubSubAuto, FromClient sends one PUBSUB
// SHARDNUMSUB to choose the pub/sub mode, bounded by CommandTimeout (it
// has no context of the caller's to use: pass PubSubPlain or
// PubSubSharded to avoid it).
//
// May return ErrInvalid, ErrUnavailable (the PUBSUB SHARDNUMSUB probe).
func FromClient(rc rueidis.Client, cfg Config) (*Client, error) {
	if rc == nil {
		return nil, invalidf("nil rueidis client")
	}
	switch rc.Mode() {
	case rueidis.ClientModeStandalone:
		cfg.Cluster = false
	case rueidis.ClientModeCluster:
		cfg.Cluster = true
	default:
		return nil, invalidf("rueidis client in %v mode: only a standalone master or a cluster is supported", rc.Mode())
	}
	cfg, err := cfg.withDefaults(false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.CommandTimeout)
	defer cancel()
	return newClient(ctx, rc, cfg, false)
}

// shardedPubSub resolves cfg.PubSub: PubSubAuto is sharded in a cluster
// whose nodes answer PUBSUB SHARDNUMSUB (Redis >= 7), plain elsewhere.
func shardedPubSub(ctx context.Context, rc rueidis.Client, cfg Config) (bool, error) {
	switch {
	case cfg.PubSub == PubSubSharded:
		return true, nil
	case cfg.PubSub == PubSubPlain || !cfg.Cluster:
		return false, nil
	}
	err := rc.Do(ctx, rc.B().PubsubShardnumsub().Build()).Error()
	if err == nil {
		return true, nil
	}
	if _, ok := rueidis.IsRedisErr(err); ok {
		return false, nil // unknown subcommand: Redis < 7
	}
	return false, masterErr(firstNode(rc), "connect", err)
}

func newClient(ctx context.Context, rc rueidis.Client, cfg Config, owned bool) (*Client, error) {
	addr := firstNode(rc)
	if len(cfg.Addrs) > 0 && (addr == "" || cfg.Cluster) {
		addr = cfg.Addrs[0]
	}
	sharded, err := shardedPubSub(ctx, rc, cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:      cfg,
		rc:       rc,
		owned:    owned,
		addr:     addr,
		id:       cfg.ClientID,
		publish:  reentrant.Publish,
		obs:      cfg.Observer,
		done:     make(chan struct{}),
		latches:  make(chan string, 4096),
		holdings: map[holdKey]*holding{},
	}
	if c.id == "" {
		c.id = reentrant.NewClientID()
	}
	if sharded {
		c.publish = reentrant.ShardedPublish
	}
	if sharded && cfg.Cluster {
		c.hub = pubsub.NewShards(rc, pubsub.Options{})
	} else {
		// Plain pub/sub in a cluster: one connection to any node, since
		// PUBLISH reaches the subscribers of every node.
		c.hub = pubsub.New(rc, pubsub.Options{Sharded: sharded})
	}
	wd, err := watchdog.New(rc, watchdog.Config{
		Lease:    cfg.WatchdogTimeout,
		Interval: cfg.RenewInterval,
		OnTick:   c.onTick,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	c.wd = wd
	bg, stop := context.WithCancel(context.Background())
	c.stopBg = stop
	c.bg.Add(2)
	go func() { defer c.bg.Done(); c.wd.Run(bg) }()
	go func() { defer c.bg.Done(); c.cleanLatches(bg) }()
	return c, nil
}

// ID returns the client id, the first part of every holder field.
func (c *Client) ID() string { return c.id }

// Addr returns the master's address; in a cluster, the first seed
// address (or, from FromClient, the lowest node address). Observer events
// carry it.
func (c *Client) Addr() string { return c.addr }

// Redis returns the underlying rueidis client, for commands of your own.
func (c *Client) Redis() rueidis.Client { return c.rc }

// enter registers a call; it fails once the Client is closed.
func (c *Client) enter() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.ops.Add(1)
	return nil
}

func (c *Client) exit() { c.ops.Done() }

// cmdCtx bounds one command by the caller's ctx and CommandTimeout.
func (c *Client) cmdCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.CommandTimeout)
}

// Close refuses new calls, ends waits in progress with ErrClosed,
// releases every lock the Client holds (bounded by ctx), cancels their
// Held contexts with cause ErrClosed, stops the watchdog and the
// subscription, deletes the unlock latches it left, and closes the connection if New opened it. A second
// Close returns ErrClosed.
//
// May return ErrClosed, ErrUnavailable (some locks could not be released:
// they expire after their lease).
func (c *Client) Close(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	close(c.done)
	c.mu.Unlock()

	// Calls in flight see done and return; wait for them so that none
	// acquires after the release below.
	waited := make(chan struct{})
	go func() { c.ops.Wait(); close(waited) }()
	var errs []error
	select {
	case <-waited:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("rlock: close: waiting for calls in flight: %w", ctx.Err()))
		<-waited // calls end promptly: they select on c.done
	}

	c.mu.Lock()
	holdings := make([]*holding, 0, len(c.holdings))
	for _, h := range c.holdings {
		holdings = append(holdings, h)
	}
	c.holdings = map[holdKey]*holding{}
	c.mu.Unlock()
	for _, h := range holdings {
		if err := c.releaseAll(ctx, h); err != nil {
			errs = append(errs, err)
		}
	}
	c.stopBg() // the latch cleaner deletes what is queued, then ends
	c.bg.Wait()
	c.hub.Close()
	if c.owned {
		c.rc.Close()
	}
	return errors.Join(errs...)
}

// releaseAll releases every hold of h, for Close.
func (c *Client) releaseAll(ctx context.Context, h *holding) error {
	c.mu.Lock()
	helds := h.helds
	h.helds = nil
	c.mu.Unlock()
	var err error
	for i := len(helds) - 1; i >= 0; i-- {
		held := helds[i]
		if err == nil && h.lost == nil {
			start := time.Now()
			var res reentrant.ReleaseResult
			res, err = c.release(ctx, held, nil)
			if c.obs != nil && c.obs.Release != nil {
				c.obs.Release(ctx, Release{Name: h.name, Addr: c.addr, Owner: held.owner, Released: res == reentrant.Released,
					HeldFor: start.Sub(held.at), Duration: time.Since(start), Closed: true, Err: err})
			}
		}
		held.finish(ErrClosed)
	}
	c.wd.Remove(h.entry)
	return err
}

// latchFlushDelay is how long answered unlock latches gather before the
// cleaner deletes them together.
const latchFlushDelay = time.Second

// cleanLatches deletes answered unlock latches in batches, off the
// Unlock path (they also expire by themselves).
func (c *Client) cleanLatches(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			c.deleteLatches(nil)
			return
		case k := <-c.latches:
			// Gather a second's worth, then delete them in one round trip:
			// off the Unlock path, and not one command per Unlock.
			t := time.NewTimer(latchFlushDelay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			c.deleteLatches(&k)
		}
	}
}

// deleteLatches deletes first (if any) and every latch queued behind it,
// in one round trip. Its context is not the loop's: the last batch, at
// Close, must still go out.
func (c *Client) deleteLatches(first *string) {
	// A new slice each time: rueidis's writer may still read the last one
	// after DoMulti returned.
	var batch []rueidis.Completed
	if first != nil {
		batch = append(batch, c.rc.B().Del().Key(*first).Build())
	}
	for len(batch) < cap(c.latches) {
		select {
		case k := <-c.latches:
			batch = append(batch, c.rc.B().Del().Key(k).Build())
			continue
		default:
		}
		break
	}
	if len(batch) > 0 {
		ctx, cancel := c.cmdCtx(context.Background())
		c.rc.DoMulti(ctx, batch...)
		cancel()
	}
}

func (c *Client) onTick(t watchdog.Tick) {
	if c.obs == nil || c.obs.Renew == nil {
		return
	}
	var err error
	if t.Err != nil {
		err = masterErr(c.addr, "renew", t.Err)
	}
	c.obs.Renew(Renew{
		Addr: c.addr, Commands: t.Commands, RoundTrips: t.RoundTrips,
		Renewed: t.Renewed, Lost: t.Lost, Failed: t.Failed, Duration: t.Duration, Err: err,
	})
}
