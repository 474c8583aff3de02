package lock

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/internal/slots"
	"github.com/rlock-go/rlock/observe"
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
	crc     *boundRC // rc, for requests sent on a caller's behalf (bounded.go)
	owned   bool     // rc was created by New, so Close closes it
	addr    string
	id      string
	publish string
	hub     subscriber
	wd      *watchdog.Registry
	obs     *observe.Observer

	done    chan struct{} // closed by Close: waits end with ErrClosed
	stopBg  context.CancelFunc
	bg      sync.WaitGroup // the watchdog loop, the latch cleaner, the master follower, the workers
	wk      workers        // goroutines lent to package multilock (workers.go)
	cleaner latchCleaner   // deletes unlock latches (latches.go)

	e          *env            // what its holds use (hold.go)
	settleCtx  context.Context // ends settlers: cancelled by Close
	stopSettle context.CancelFunc
	settling   tally // settlers of unsettled requests, and UNSUBSCRIBEs

	route route // which master owns a name

	mu     sync.Mutex
	closed bool
	ops    tally // calls in flight (enter, exit)
	index  map[holdKey]*hold
	queues waitQueues

	reps replicas // for the WAIT after acquires and releases

	// left: when Close returned before its teardown ended (its ctx
	// ended; Unix ns, 0 until then): teardown cuts the connections one
	// CommandTimeout after it at the latest.
	left atomic.Int64
}

// subscriber is where waiters subscribe: a pubsub.Hub (one connection),
// or pubsub.Shards (one Hub per cluster master) for sharded pub/sub in a
// cluster.
type subscriber interface {
	Subscribe(ctx context.Context, name string) (*pubsub.Waiter, error)
	Observe(ctx context.Context, name string) (*pubsub.Waiter, error)
	Close()
}

// New connects to the master in cfg (or, with cfg.Cluster, to the
// cluster its Addrs seed; with cfg.MasterSet, to the master its
// sentinels name) and returns a Client. The connection is checked, and
// rlock's scripts loaded, in one round trip per node bounded by ctx and
// cfg.DialTimeout.
//
// With MasterSet, a master set the sentinels do not monitor, or Addrs
// that are not sentinels, are ErrInvalid; sentinels none of which
// answers, ErrUnavailable; credentials refused by a sentinel or by the
// master, ErrAuth. The error names the master set and its sentinels.
//
// An address (without MasterSet or Cluster) whose server answers ROLE as
// a replica is ErrUnavailable, naming the master it follows: every lock
// there would be refused (READONLY). A failover may be under way; call
// New again to ride it out, as rlock run --wait does.
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
	where := cfg.Addrs[0]
	if cfg.MasterSet != "" {
		where = sentinels(cfg)
	}
	if dial <= 0 {
		return nil, join(masterErr(where, "connect", context.DeadlineExceeded), ctx.Err())
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
		// A lock's commands and replies are small, and a Client keeps a
		// few connections (the callers' pipelined ones, a dedicated one
		// for background round trips, one for pub/sub): rueidis's
		// default buffers, half a MiB each way per connection, are for
		// large values. A renewal batch larger than this is written in
		// several flushes.
		ReadBufferEachConn:  connBuffer,
		WriteBufferEachConn: connBuffer,
	}
	if cfg.MasterSet != "" {
		opt.Sentinel = sentinelOption(cfg, dial)
	}
	// Every connection New's client makes is tracked, so that a caller's
	// request never waits for one being made past its ctx (bounded.go).
	d := &dials{hello: dial, tracked: true}
	opt.DialCtxFn = d.dial
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		if cfg.MasterSet != "" {
			return nil, sentinelErr(cfg, err)
		}
		return nil, masterErr(where, "connect", err)
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
		return nil, join(err, ctx.Err())
	}
	c, err := newClient(pctx, rc, cfg, d)
	if err != nil {
		rc.Close()
		return nil, join(err, ctx.Err())
	}
	return c, nil
}

// loadScripts loads rlock's scripts on rc's master, or on every node of a
// cluster, one node after the other (each in one round trip): New is not
// a hot path, and its ctx bounds them all.
func loadScripts(ctx context.Context, rc rueidis.Client) error {
	if rc.Mode() != rueidis.ClientModeCluster {
		if err := reentrant.Load(ctx, rc); err != nil {
			return masterErr(firstNode(rc), "connect", err)
		}
		return nil
	}
	var all []error
	for addr, n := range rc.Nodes() {
		all = append(all, masterErr(addr, "connect", reentrant.Load(ctx, n)))
	}
	return join(all...)
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
// one standalone master, (rueidis.ClientModeCluster) to a Redis Cluster,
// whence cfg.Cluster, or (rueidis.ClientModeSentinel) through Redis
// Sentinel to the master of a master set, which the Client follows across
// failovers as with Config.MasterSet. Close does not close rc.
// cfg.Addrs, credentials, TLS, DB, DialTimeout, AlwaysRESP2, MasterSet
// and the sentinel credentials are rc's business and are ignored.
// Scripts are not loaded: their first use loads them (a NOSCRIPT answer
// costs one more round trip). The watchdog's renewals and the cleaning of
// unlock latches share rc's connections with the callers' requests (a
// Client of New sends them on a dedicated connection): rc's dedicated
// connections may all be in use by the application's blocking commands.
//
// A call whose ctx is cancelled (rather than past its deadline) while
// its request is alone on its connection returns only at the request's
// answer or CommandTimeout on a Client of FromClient (Mutex.Lock), since
// rueidis serves such a request bounded by its deadline only; a Client
// of New, which dials its connections itself, cuts the request's
// connection instead. An application that needs every cancellation
// honoured at once on a Client of FromClient gives it a rueidis client
// with AlwaysPipelining: rueidis
// then returns at the ctx's end itself, and the request is settled in the
// background as any cut one. Except while the request waits for its
// connection to be made, on the caller's goroutine, bounded by rc's
// dial timeout and ConnWriteTimeout: rueidis dials each of its pipelined
// connections (PipelineMultiplex) on the first request that draws it, and
// again after one broke; and a request with replica sync, whose WAIT makes
// it a blocking command, takes a connection of rueidis's blocking pool of
// its own, dialled when none is free (another such request in flight)
// and after one was cancelled or failed (rueidis closes it then). A Client
// of New sees its own dials; a Client of FromClient does not. Pipelining
// costs CPU, and latency on some
// machines: in docs/benchmarks.md's runs of 2026-11-29, the floor over
// rueidis's pipelining mode took 1.29 times the direct floor's CPU per
// cycle (0.90 times its p50), and 1.03–1.17 times its p50 on a slower
// machine (session 20); on a third (session 21), such a Client's
// uncontended Lock+Unlock took 1.60–1.73 times Redisson's scripts sent
// raw, against 1.11–1.14 times for a Client of New.
//
// With a cluster client and PubSubAuto, FromClient sends one PUBSUB
// SHARDNUMSUB to choose the pub/sub mode; with a sentinel client, one
// ROLE, to refuse a client that sends commands to a replica (ReplicaOnly,
// SendToReplicas). Either is bounded by CommandTimeout (it has no context
// of the caller's to use). A standalone rc is asked nothing: unlike New,
// FromClient accepts a replica given as the master, and its first acquire
// is refused (READONLY, ErrUnavailable saying the server is a replica);
// nor does it ask the master's replicas before the first acquire.
//
// May return ErrInvalid, ErrUnavailable (the PUBSUB SHARDNUMSUB or ROLE
// probe).
func FromClient(rc rueidis.Client, cfg Config) (*Client, error) {
	if rc == nil {
		return nil, invalidf("nil rueidis client")
	}
	switch rc.Mode() {
	case rueidis.ClientModeStandalone, rueidis.ClientModeSentinel:
		cfg.Cluster = false
	case rueidis.ClientModeCluster:
		cfg.Cluster = true
	default:
		return nil, invalidf("rueidis client in %v mode: only a standalone master, a cluster or a sentinel client is supported", rc.Mode())
	}
	cfg.MasterSet, cfg.SentinelUsername, cfg.SentinelPassword = "", "", ""
	cfg, err := cfg.withDefaults(false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.CommandTimeout)
	defer cancel()
	if rc.Mode() == rueidis.ClientModeSentinel {
		if err := checkSentinelClient(ctx, rc); err != nil {
			return nil, err
		}
	}
	return newClient(ctx, rc, cfg, nil)
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

// newClient makes a Client on rc: New's, whose dials d tracks (owned: Close
// closes it), or the caller's (d nil).
func newClient(ctx context.Context, rc rueidis.Client, cfg Config, d *dials) (*Client, error) {
	owned := d != nil
	if d == nil {
		d = &dials{}
	}
	// A failed request's connection is made again by the next request:
	// its dial and handshake take up to one DialTimeout each, unless the
	// request that makes it has less time (bounded.go).
	d.fault = 2 * max(cfg.CommandTimeout, cfg.DialTimeout)
	addr := firstNode(rc)
	if len(cfg.Addrs) > 0 && (addr == "" || cfg.Cluster) {
		addr = cfg.Addrs[0]
	}
	sharded, err := shardedPubSub(ctx, rc, cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:     cfg,
		rc:      rc,
		owned:   owned,
		addr:    addr,
		id:      cfg.ClientID,
		publish: reentrant.Publish,
		obs:     cfg.Observer,
		done:    make(chan struct{}),
		index:   map[holdKey]*hold{},
	}
	c.route.rc, c.route.addr, c.route.cluster, c.route.timeout = rc, addr, cfg.Cluster, cfg.CommandTimeout
	// rc is rueidis's Sentinel client, whose master changes with
	// failovers (route.master, followMaster).
	c.route.sentinel = rc.Mode() == rueidis.ClientModeSentinel
	c.route.enter, c.route.exit, c.route.spawn = c.enter, c.exit, c.wk.spawn
	c.wk.bg = &c.bg
	c.crc = &boundRC{Client: rc, d: d, lend: c.wk.lend}
	// The background's requests: on a Client of FromClient they share the
	// callers' connections, and their failures tell of a connection the
	// next request makes again (bounded.go). New's go apart (owned), on
	// connections its dial tracker sees.
	bgrc := rueidis.Client(rc)
	if !owned {
		bgrc = c.crc.background()
	}
	c.cleaner = latchCleaner{rc: bgrc, owned: owned, cluster: rc.Mode() == rueidis.ClientModeCluster, timeout: cfg.CommandTimeout, latches: make(chan string, latchQueue), full: make(chan struct{}, 1)}
	c.queues.m, c.queues.settling, c.queues.spawn, c.queues.timeout = map[queueKey]*queue{}, &c.settling, c.wk.spawn, cfg.CommandTimeout
	c.settleCtx, c.stopSettle = context.WithCancel(context.Background())
	c.reps.rc, c.reps.cfg, c.reps.at, c.reps.readSlots, c.reps.refreshSlots = rc, cfg, c.route.at, c.route.readSlots, c.route.refreshSlots
	c.reps.ctx, c.reps.bg, c.reps.spawn = c.settleCtx, &c.bg, c.wk.spawn
	c.reps.crc = c.crc
	c.e = &env{rc: c.crc, cfg: cfg, obs: c.obs, done: c.done,
		mu: &c.mu, index: c.index, recordMin: unlockLatchTTL, latches: c.cleaner.latches, latchesFull: c.cleaner.full, settling: &c.settling,
		at: c.route.at, errAt: c.route.errAt, sync: c.reps.sync, acked: c.reps.acked, kick: c.queues.kick, spawn: c.wk.spawn}
	c.cleaner.ttl = c.e.recordTTL()
	if owned {
		if err := c.reps.askAtNew(ctx, c.addr, c.route.sentinel); err != nil {
			c.stopSettle()
			c.wk.close() // a ROLE may have run on a worker (bounded.go)
			return nil, masterErr(c.addr, "connect", err)
		}
	}
	if cfg.Cluster {
		if t, err := slots.Read(ctx, rc); err == nil {
			c.route.table.Store(&t)
			c.route.asked.Store(time.Now().UnixNano())
		}
	}
	if c.id == "" {
		c.id = reentrant.NewClientID()
	}
	c.subscriber(sharded)
	wd, err := watchdog.New(bgrc, watchdog.Config{
		Lease:    cfg.WatchdogTimeout,
		Interval: cfg.RenewInterval,
		OnTick:   c.onTick,
		Sync:     c.reps.renewSync,
		Acked:    c.reps.acked,
		Apart:    owned,
		// A renewal given up on is waited for this long before a new
		// acquisition of its field goes out (R3-6): the bound a goroutine
		// may outlive Close by.
		Straggle: 2 * cfg.CommandTimeout,
	})
	if err != nil {
		c.stopSettle()
		c.wk.close()
		return nil, invalidf("%v", err)
	}
	c.wd = wd
	c.e.wd, c.e.publish, c.e.settleCtx = wd, c.publish, c.settleCtx
	c.start()
	return c, nil
}

// subscriber chooses how the Client publishes and where its waiters
// subscribe.
func (c *Client) subscriber(sharded bool) {
	if sharded {
		c.publish = reentrant.ShardedPublish
	}
	if sharded && c.cfg.Cluster {
		c.hub = pubsub.NewShards(c.rc, pubsub.Options{})
	} else {
		// Plain pub/sub in a cluster: one connection to any node, since
		// PUBLISH reaches the subscribers of every node.
		c.hub = pubsub.New(c.rc, pubsub.Options{Sharded: sharded})
	}
	c.queues.hub = c.hub
}

// start starts the Client's background goroutines.
func (c *Client) start() {
	bg, stop := context.WithCancel(context.Background())
	c.stopBg = stop
	c.bg.Add(2)
	go func() { defer c.bg.Done(); c.wd.Run(bg) }()
	go func() { defer c.bg.Done(); c.cleaner.run(bg) }()
	if c.route.sentinel {
		c.bg.Add(1)
		go func() { defer c.bg.Done(); c.followMaster(bg) }()
	}
}

// valid reports whether c was made by New or FromClient: a nil or zero
// Client answers ErrInvalid.
func (c *Client) valid() bool { return c != nil && c.done != nil }

// ID returns the client id, the first part of every holder field ("" for
// a nil or zero Client).
func (c *Client) ID() string {
	if !c.valid() {
		return ""
	}
	return c.id
}

// Addr returns the master's address; with Sentinel, the master the
// Client talks to now, which changes with failovers; in a cluster, the
// first seed address (or, from FromClient, the lowest node address).
// Errors and Observer events about one lock name the master that holds
// it instead: in a cluster, the owner of its slot.
func (c *Client) Addr() string {
	if !c.valid() {
		return ""
	}
	return c.route.master()
}

// Redis returns the underlying rueidis client, for commands of your own
// (nil for a nil or zero Client).
func (c *Client) Redis() rueidis.Client {
	if !c.valid() {
		return nil
	}
	return c.rc
}

// enter registers a call; it fails once the Client is closed.
func (c *Client) enter() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.ops.Add(1) // under c.mu: Close, which sets closed under it, then waits for this call
	return nil
}

func (c *Client) exit() { c.ops.Done() }

// cmdCtx bounds one command by the caller's ctx and CommandTimeout.
func (e *env) cmdCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.cfg.CommandTimeout)
}

// releaseCtx is ctx bounded by one release of name sent on a caller's
// behalf: one CommandTimeout; on a master with replicas, one
// CommandTimeout and the WAIT it carries for each of the sends a release
// makes until a replica acknowledged it (sendRelease).
func (e *env) releaseCtx(ctx context.Context, name string) (context.Context, context.CancelFunc) {
	s, _ := e.sync(ctx, name) // the count sendRelease uses; a refused ROLE still sends the WAIT
	if s.Replicas == 0 {
		return context.WithTimeout(ctx, e.cfg.CommandTimeout)
	}
	return context.WithTimeout(ctx, maxUnsynced*(e.cfg.CommandTimeout+s.Extra()))
}

// syncExtra is how much longer than CommandTimeout a request with a WAIT
// for replicas may take (none with replica sync off).
func (e *env) syncExtra() time.Duration {
	if e.cfg.ReplicaSyncTimeout <= 0 {
		return 0
	}
	return reentrant.Sync{Replicas: 1, Timeout: e.cfg.ReplicaSyncTimeout}.Extra()
}

// Close refuses new calls, ends waits in progress with ErrClosed,
// releases every lock the Client holds (bounded by ctx), cancels their
// Held contexts with cause ErrClosed, stops the watchdog and the
// subscription, deletes the unlock latches it left, and closes the connection if New opened it. A second
// Close returns ErrClosed.
//
// Close returns when ctx ends, also while a call of another goroutine
// still has its request in flight (a request ends at its CommandTimeout):
// its error then names the lock, and that call, which sees the Client
// closed, returns ErrClosed and gives back what its request granted; the
// connection stays open until it has (within its CommandTimeout and one
// give-back). What is left in Redis expires within its lease.
//
// May return ErrClosed, ErrUnavailable (some locks could not be released:
// they expire after their lease), ErrInvalid (a nil or zero Client, a nil
// ctx).
func (c *Client) Close(ctx context.Context) error {
	if !c.valid() {
		return invalidf("Close of a nil or zero Client: make Clients with New or FromClient")
	}
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

	// Calls in flight see done and return, but for a request on the
	// wire, which ends at its CommandTimeout (or its caller's ctx): wait
	// for them within ctx, not past it. A call that is still running
	// holds its hold's turn, so closeHold below names that lock and
	// leaves it to the call, which sees the Client closed: a grant its
	// request makes is never born (born checks done, and its generation
	// after making it) but given back, on the connection teardown closes
	// only once the calls have returned.
	var errs []error
	if n := c.ops.wait(ctx); n > 0 {
		errs = append(errs, wrapf(ctx.Err(), "close: %d calls in flight had not returned (each gives back what its request granted, within one CommandTimeout, with replicas one per WAIT its release is sent with)", n))
	}
	// Every Held ends now, with ErrClosed, before any release of Close's:
	// once one has run, another Client may be granted its lock (the hold
	// spin model's CLOSE_LATE). A generation judged lost first keeps its
	// loss.
	c.e.ending.Store(true)
	c.mu.Lock()
	for _, l := range c.index {
		if g := l.g.Load(); g != nil {
			g.stop(ErrClosed)
		}
	}
	c.mu.Unlock()

	// The holds are listed before the settlers stop: a settler stopped
	// while it released a hold nobody has (a grant of an acquire cut by
	// its ctx) leaves it with a count but no request to settle, and the
	// map forgets such a hold when its last user leaves; Close releases
	// what it left.
	c.mu.Lock()
	holds := make([]*hold, 0, len(c.index))
	for _, l := range c.index {
		holds = append(holds, l)
	}
	c.mu.Unlock()
	// Background settlers stop (each within one command): Close settles
	// what they left itself, briefly; a request that cannot be settled
	// now expires with its lease.
	c.stopSettle()
	if n := c.settling.wait(ctx); n > 0 {
		// Past Close's ctx: they end within one command (teardown joins
		// their workers); what they did not settle expires with its lease.
		errs = append(errs, wrapf(ctx.Err(), "close: %d settlers of requests whose answers were lost were still running", n))
	}
	for _, l := range holds {
		if err := l.closeHold(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	c.wk.close()            // busy workers end after their function
	c.cleaner.closing = ctx // read by the cleaner once stopBg is done
	c.stopBg()              // the latch cleaner deletes what is queued (within ctx), then ends
	torn := make(chan struct{})
	go c.teardown(torn)
	select {
	case <-torn:
	case <-ctx.Done():
		// What is left to do holds nothing: the loops end within one
		// command, and the connections close gracefully or, one
		// CommandTimeout after this return at the latest, at once
		// (teardown). It goes on in the background.
		c.left.Store(time.Now().UnixNano())
	}
	return join(errs...)
}

// teardown joins the Client's background goroutines, then closes its
// subscriptions and, when New made it, its connection; it closes torn
// when done. Close waits for it within its ctx (R3-7). A New Client's
// connections close gracefully (rueidis's PING on close answers every
// reply still due, those of requests the application sent on Redis()
// included) for one CommandTimeout once every request of the Client has
// returned, and no longer than one CommandTimeout after Close returned;
// then they are cut (dials.cutAll): a master that does not answer kept
// rueidis's close waiting a second. The cut is not stopped when rc.Close
// returns: a cluster client closes its connections in the background.
func (c *Client) teardown(torn chan<- struct{}) {
	defer close(torn)
	// Calls Close did not wait for (its ctx ended) give back what their
	// requests granted on this connection: each returns within its
	// CommandTimeout, plus a give-back's.
	c.ops.wait(context.Background())
	c.bg.Wait()
	if c.owned {
		// Every request of the Client has returned (issue 29, stage 3).
		cutAt := time.Now().Add(c.cfg.CommandTimeout)
		if l := c.left.Load(); l != 0 {
			if t := time.Unix(0, l).Add(c.cfg.CommandTimeout); t.Before(cutAt) {
				cutAt = t
			}
		}
		time.AfterFunc(time.Until(cutAt), c.crc.d.cutAll)
	}
	c.hub.Close()
	if c.owned {
		c.rc.Close()
	}
}

// connBuffer is the read and the write buffer of each connection New
// makes.
const connBuffer = 64 << 10

func (c *Client) onTick(t watchdog.Tick) {
	if c.obs == nil || c.obs.Renew == nil {
		return
	}
	var err error
	addr := c.route.master()
	if t.Err != nil {
		err = masterErr(addr, "renew", t.Err)
	}
	c.obs.Renew(observe.Renew{
		Addr: addr, Commands: t.Commands, RoundTrips: t.RoundTrips,
		Renewed: t.Renewed, Lost: t.Lost, Failed: t.Failed, Duration: t.Duration, Err: err,
	})
}
