package lock

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Calls bounded by their caller's ctx while a connection is being made
// (issue 29, stage 3: "no waiter waits on a connection being made").
//
// rueidis makes a connection again when the one a request was to go on
// has closed (a timeout, a reset): the first request to find it so dials
// and sends HELLO, bounded by its own ctx; every other request that
// comes meanwhile waits for that connection, and does not look at its
// ctx while it waits (rueidis's mux, sync.WaitGroup.Wait). With the
// master stopped, the dial succeeds (the kernel accepts) and HELLO waits
// its whole deadline: a call with a short ctx returned up to one
// CommandTimeout late, while another request of the Client (a settler,
// another call) was the one making the connection.
//
// So while a connection may be in the making, a request sent on a
// caller's behalf runs on one of the Client's workers, and the caller
// waits for its answer and its own ctx: when the ctx ends first, the
// caller gets the ctx's error, which the code that sent the request
// reads as a lost answer (the request's outcome unknown: recorded and
// settled, as for a timeout); the worker finishes the request and drops
// its answer. Otherwise (nearly always: no connection is being made) a
// request is sent directly, at no extra cost.
//
// "May be in the making" is told by the dial itself, for a Client that
// New connected (its rueidis DialCtxFn): from a dial's start until the
// new connection's first read returns (its handshake's answer), or it is
// closed, or the dial timeout passed (rueidis bounds a handshake by it);
// and, for any Client, FromClient's too, for two max(CommandTimeout,
// DialTimeout) after a request of the Client failed other than by a
// cancellation (its connection may then be closed, and made again by the
// next request): on a Client of FromClient the background's requests
// (renewals, latch deletions) share the callers' connections and count
// too.
//
// Owner: the Client; the wrapper and its tracker are made in newClient
// and never change. Guard: atomics.

// Cancellations. rueidis sends a request alone on its connection on the
// caller's goroutine and bounds the wait for its reply by the ctx's
// deadline alone, set as the connection's deadline (SetDeadline, just
// before the write); it never looks at a cancellation there. So a caller's
// send whose ctx can be cancelled (sendCtx.watchable) is armed while it
// is sent directly: it is registered by its deadline (made unique to the
// nanosecond), and the connection whose SetDeadline names that deadline
// is the one that awaits its reply (shakingConn.cur), until the first
// bytes of a reply are read; a batch's (DoMulti: a request with its
// WAIT, which rueidis sends on a connection of its own), until the send
// returns, so that a cancellation ends a WAIT pending after the script
// answered too (the whole batch's outcome is then unknown, as when its
// deadline passes). When the caller's ctx ends meanwhile, that
// connection is severed (below): rueidis's read fails at once, it closes
// the connection, and the caller gets the send's deadline error, which
// the code that sent the request reads as a lost answer (its outcome
// unknown: recorded and settled, as for a deadline). Nothing else is
// cut: a connection awaits at most one direct request at a time; a cut
// that comes after the reply began, or after another request set the
// connection's deadline (rueidis clears it when it switches the
// connection to pipelining), does nothing (a cancelled call whose reply
// has begun returns with its answer or at its deadline).
//
// A cut connection is severed: from the cut on, its every read and write
// fails with errCut, and its deadline stays now. rueidis fails with that
// error every request it queued behind the cut one on the connection
// (they arrived while it was alone in flight, and rueidis writes them
// only once it returned), and closes it. So errCut on any request but
// the cut one tells that the request was never written: boundRC sends it
// again (its Completed is not recycled: rueidis keeps a command that
// failed), on a connection made again, through a worker when it is sent
// on a caller's behalf (ends), up to resends times. A cut thus fails
// no other request sent through boundRC, whatever else is in flight
// (rueidis gives ErrClosing instead of errCut to requests queued while it
// closes the connection itself, and those are not sent again), and a
// cancelled call returns at its cancellation beside the Client's other
// requests (until 2026-11-30 a cut was made only while the cut request
// was the Client's only one in flight, and a cancelled call returned at
// its deadline otherwise). A request sent again on a worker is not armed:
// should it be alone on its new connection when its caller's ctx ends,
// the caller returns (handOff) and the worker's send ends at its
// deadline. rueidis sends a read-only command failed with errCut again
// itself, on the caller's goroutine: a query is therefore run on a
// worker from the start (runQuery). An armed send's deadline is moved a nanosecond or more
// earlier, so that no other request's deadline names it. When rueidis
// shortens the deadline (its ConnWriteTimeout) no connection names it,
// and the send is bounded by that deadline, as before. Only New's
// connections are tracked; a Client of FromClient keeps that bound.
// Requests an application sends on Client.Redis() do not go through
// boundRC: one queued behind a cut request fails with errCut, which says
// it was not sent.

// dials tracks when a connection of a Client may be in the making.
type dials struct {
	inflight atomic.Int64 // dials started and not ended
	// shaking counts connections dialled whose handshake's answer has not
	// been read (nor the connection closed); each counts until
	// shakeUntil at most: rueidis bounds a handshake by the dial timeout
	// (it sends HELLO, and before Redis 6 falls back to a second round
	// trip, which is not counted).
	shaking    atomic.Int64
	shakeUntil atomic.Int64 // Unix ns
	// faultUntil is when a connection closed by a request's failure has
	// been made again (Unix ns).
	faultUntil atomic.Int64
	hello      time.Duration // how long a handshake may take after its dial
	fault      time.Duration // how long after a failed request a connection may be re-made

	// tracked: the connections are dial's (a Client of New), so a
	// caller's cancellation can cut the read of its reply.
	tracked bool
	armed   atomic.Int64 // sends registered in sends
	smu     sync.Mutex
	sends   map[int64]*sendCtx // armed sends by deadline (Unix ns); guarded by smu

	// cut: Close's teardown gave up on closing the connections
	// gracefully. rueidis sends a PING on closing a connection and waits
	// for its answer up to a second, which a stopped master never gives:
	// from cutAll on, every write fails (shakingConn.Write) and every
	// read returns at once (cutAll sets each open connection's deadline
	// to now, and SetDeadline keeps it so; a connection dialled later
	// writes its handshake first), so rueidis closes each connection
	// without waiting. Set once, by
	// Client.teardown's timer: one CommandTimeout after every request of
	// the Client has returned (and no later than one CommandTimeout after
	// Close returned); a master that answers has closed them gracefully
	// by then, the replies of requests an application sent on
	// Client.Redis() included.
	cut   atomic.Bool
	cmu   sync.Mutex
	conns map[*shakingConn]struct{} // open connections; guarded by cmu
}

// cutAll makes every connection of the Client fail at once, and every
// write on a connection dialled from now on (teardown's, above).
func (d *dials) cutAll() {
	d.cut.Store(true)
	d.cmu.Lock()
	defer d.cmu.Unlock()
	for c := range d.conns {
		_ = c.Conn.SetDeadline(time.Now())
	}
}

// arm registers s, a caller's send about to go out directly, so that the
// connection that awaits its reply can be cut when the caller's ctx
// ends; disarm undoes it once the send returned. s's deadline moves
// earlier by a few nanoseconds if another armed send has the same.
func (d *dials) arm(s *sendCtx) {
	d.smu.Lock()
	if d.sends == nil {
		d.sends = map[int64]*sendCtx{}
	}
	// One nanosecond earlier at least: a deadline another request may
	// share (a sibling ctx's, one of a coarse clock) never names this
	// send.
	s.dl = s.dl.Add(-time.Nanosecond)
	k := s.dl.UnixNano()
	for d.sends[k] != nil {
		s.dl = s.dl.Add(-time.Nanosecond)
		k--
	}
	d.sends[k] = s
	d.armed.Add(1)
	d.smu.Unlock()
	s.watchCut()
}

func (d *dials) disarm(s *sendCtx) {
	c := s.unwatchCut()
	if c != nil {
		c.release(s)
	}
	d.smu.Lock()
	delete(d.sends, s.dl.UnixNano())
	d.armed.Add(-1)
	d.smu.Unlock()
}

// sendAt is the armed send whose deadline is t, or nil.
func (d *dials) sendAt(t time.Time) *sendCtx {
	if t.IsZero() || d.armed.Load() == 0 {
		return nil
	}
	d.smu.Lock()
	defer d.smu.Unlock()
	return d.sends[t.UnixNano()]
}

// making reports whether a request sent now may wait for a connection
// being made.
func (d *dials) making() bool {
	if d.inflight.Load() > 0 {
		return true
	}
	if d.shaking.Load() > 0 && before(&d.shakeUntil) {
		return true
	}
	return before(&d.faultUntil)
}

// before reports whether now is before the time in u (Unix ns; 0: never).
func before(u *atomic.Int64) bool {
	t := u.Load()
	return t != 0 && time.Now().UnixNano() < t
}

// extend sets u to t unless it is later already.
func extend(u *atomic.Int64, t time.Time) {
	n := t.UnixNano()
	for {
		v := u.Load()
		if v >= n || u.CompareAndSwap(v, n) {
			return
		}
	}
}

// dial is the rueidis DialCtxFn of a Client New makes: rueidis's own
// dial, tracked until the connection's first read returns.
func (d *dials) dial(ctx context.Context, dst string, nd *net.Dialer, cfg *tls.Config) (conn net.Conn, err error) {
	d.inflight.Add(1)
	defer d.inflight.Add(-1)
	if cfg != nil {
		td := tls.Dialer{NetDialer: nd, Config: cfg}
		conn, err = td.DialContext(ctx, "tcp", dst)
	} else {
		conn, err = nd.DialContext(ctx, "tcp", dst)
	}
	if err != nil {
		return nil, err
	}
	extend(&d.shakeUntil, time.Now().Add(d.hello))
	d.shaking.Add(1)
	sc := &shakingConn{Conn: conn, d: d}
	d.cmu.Lock()
	if d.conns == nil {
		d.conns = map[*shakingConn]struct{}{}
	}
	d.conns[sc] = struct{}{}
	d.cmu.Unlock()
	return sc, nil
}

// errCut is the error of every read and write on a connection severed
// for a caller's cancellation (Cancellations, above). rueidis gives it to
// the cut request and to every request queued behind it, none of which
// was written.
var errCut = errors.New("rlock: connection closed to end a cancelled call's wait; a request that fails with this error was not sent")

// shakingConn is a connection dialled by dials.dial: counted as shaking
// until its first read returns or it is closed; and the armed send whose
// reply it awaits, if any, and whether it was severed for that send's
// cancellation (Cancellations, above).
type shakingConn struct {
	net.Conn
	d    *dials
	done atomic.Bool

	mu      sync.Mutex // orders cur's changes and a cut's deadline
	cur     atomic.Pointer[sendCtx]
	severed atomic.Bool // set once, under mu, by the cut
}

// sever cuts the connection for s, the armed send whose reply it awaits:
// its deadline is now from here on, and every read and write fails with
// errCut. Under c.mu.
func (c *shakingConn) sever(s *sendCtx) {
	c.severed.Store(true)
	s.cutMade.Store(true)
	_ = c.Conn.SetDeadline(time.Now())
}

// SetDeadline implements net.Conn: rueidis sets a request's deadline just
// before it writes a request alone on the connection; the armed send with
// that deadline, if any, is the one whose reply the connection now
// awaits (a deadline of now if its caller's ctx has already ended).
func (c *shakingConn) SetDeadline(t time.Time) error {
	s := c.d.sendAt(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.d.cut.Load() || c.severed.Load() {
		// Teardown gave up on the connection, or it was cut: its
		// deadline stays now. rueidis reads without writing first in one
		// place, the reader it starts for pub/sub hooks after clearing
		// the deadline.
		return c.Conn.SetDeadline(time.Now())
	}
	if s == nil && c.cur.Load() == nil {
		return c.Conn.SetDeadline(t)
	}
	cut, ok := false, true
	if s != nil {
		cut, ok = s.attach(c)
	}
	if !ok {
		s = nil // s awaits its reply on another connection
	}
	c.cur.Store(s)
	if cut {
		c.sever(s)
		return nil
	}
	return c.Conn.SetDeadline(t)
}

// cut severs the connection when it still awaits s's reply, none of
// which has been read.
func (c *shakingConn) cut(s *sendCtx) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur.Load() == s {
		c.sever(s)
	}
}

// release forgets s, whose send returned.
func (c *shakingConn) release(s *sendCtx) {
	c.mu.Lock()
	c.cur.CompareAndSwap(s, nil)
	c.mu.Unlock()
}

func (c *shakingConn) shaken() {
	if !c.done.Load() && c.done.CompareAndSwap(false, true) {
		c.d.shaking.Add(-1)
	}
}

// Read implements net.Conn.
func (c *shakingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && c.severed.Load() {
		err = errCut
	}
	c.shaken()
	if n > 0 {
		if s := c.cur.Load(); s != nil && !s.batch {
			// A reply has begun: no cut from now on (a batch's: until
			// the send returns).
			c.mu.Lock()
			c.cur.CompareAndSwap(s, nil)
			c.mu.Unlock()
		}
	}
	return n, err
}

// Write implements net.Conn: it fails once the Client's teardown gave up
// on its connections (dials.cut), or the connection was severed.
func (c *shakingConn) Write(b []byte) (int, error) {
	if c.severed.Load() {
		return 0, errCut
	}
	if c.d.cut.Load() {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

// Close implements net.Conn.
func (c *shakingConn) Close() error {
	c.shaken()
	c.d.cmu.Lock()
	delete(c.d.conns, c)
	c.d.cmu.Unlock()
	return c.Conn.Close()
}

// saw notes a request's failure that was not an answer: its connection
// may be closed, and the next request then makes a new one. A deadline
// counts, the caller's too: rueidis closes a connection whose request
// alone on it timed out. A cancellation does not: rueidis sees one only
// in pipelining mode, and keeps the connection then.
func (d *dials) saw(err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	extend(&d.faultUntil, time.Now().Add(d.fault))
}

// boundRC is the rueidis client a Client sends its callers' requests
// with: Do and DoMulti as described above; the rest is rueidis's.
type boundRC struct {
	rueidis.Client
	d *dials
	// lend runs a function on one of the Client's workers; false once
	// closed. nil: every request is sent directly, its failures noted
	// (the background's client, background).
	lend func(func()) bool
}

// background is b for the Client's background requests (renewals, latch
// deletions): sent directly, their failures noted. On a Client of
// FromClient they share the callers' connections, and a renewal that
// failed opens the window as a caller's request does.
func (b *boundRC) background() *boundRC {
	return &boundRC{Client: b.Client, d: b.d}
}

// on is b for node, one of rc's nodes (a cluster's).
func (b *boundRC) on(node rueidis.Client) rueidis.Client {
	if node == b.Client {
		return b
	}
	return &boundRC{Client: node, d: b.d, lend: b.lend}
}

// ends returns the channel that ends the caller's wait for a request
// sent with ctx, or nil when the request is sent directly. A caller's
// request (ctx is not a settler's send, and b is not the background's)
// is handed to a worker while a connection is being made, or when it is
// sent again after errCut (again) whether or not a dial has started yet:
// the requests queued behind a cut one are all sent again at once, before
// the first of them starts making the connection again, and the others
// then wait for that dial in rueidis without looking at their ctx (review
// of 64db129: a cancelled TryLock returned 1.8 s late).
func (b *boundRC) ends(ctx context.Context, again bool) <-chan struct{} {
	if b.lend == nil || !(again || b.d.making()) {
		return nil
	}
	if s, ok := ctx.(*sendCtx); ok && !s.caller {
		return nil
	}
	return ctx.Done()
}

// resends is how many times a request failed with errCut is sent again
// at most: each needs another cut (or a connection that failed with one),
// so a few is plenty; the bound keeps a client whose connections keep
// failing so (rueidis stores a failed dial's error on its dead wire) from
// spinning until the ctx ends. What still fails so reads as an unknown
// outcome, as any failure without an answer.
const resends = 4

// Do implements rueidis.Client: cmd is sent again while it fails with
// errCut, unsent behind a cut request (Cancellations, above).
func (b *boundRC) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	r := b.doOnce(ctx, cmd, false)
	for k := 0; k < resends && r.NonRedisError() == errCut; k++ {
		r = b.doOnce(ctx, cmd, true)
	}
	return r
}

// doOnce is one send of Do's; again: cmd was queued behind a cut request
// (ends).
func (b *boundRC) doOnce(ctx context.Context, cmd rueidis.Completed, again bool) rueidis.RedisResult {
	if err := ctx.Err(); err != nil {
		// Never sent (rueidis would not send it either): no failure of
		// the connection's.
		return rueidis.NewErrorResult(err)
	}
	if end := b.ends(ctx, again); end != nil { // the closure only here: none on the hot path
		return handOff(b, ctx, end, func() rueidis.RedisResult { return b.do(ctx, nil, cmd) }, rueidis.NewErrorResult)
	}
	s := b.armable(ctx)
	if s == nil {
		return b.do(ctx, nil, cmd)
	}
	b.d.arm(s)
	defer b.d.disarm(s)
	return b.do(ctx, s, cmd)
}

// armable is ctx as a send to arm (Cancellations), or nil: a caller's send
// whose ctx can be cancelled, on a Client whose connections are tracked.
func (b *boundRC) armable(ctx context.Context) *sendCtx {
	if b.lend == nil || !b.d.tracked {
		return nil
	}
	if s, ok := ctx.(*sendCtx); ok && s.watchable() {
		return s
	}
	return nil
}

// do sends cmd, and notes its failure unless it is a cut's (Cancellations,
// above): a cut connection is made again by a dial the Client tracks, so
// the cut opens no window of its own. When armed (the send's armed
// context, or nil) was cut, its failure reads as its deadline: the
// request's outcome is unknown.
func (b *boundRC) do(ctx context.Context, armed *sendCtx, cmd rueidis.Completed) rueidis.RedisResult {
	r := b.Client.Do(ctx, cmd)
	if err := r.NonRedisError(); err != nil {
		if armed != nil && armed.cutMade.Load() {
			return rueidis.NewErrorResult(context.DeadlineExceeded)
		}
		if err != errCut {
			b.d.saw(err)
		}
	}
	return r
}

// doMulti is do for a batch.
func (b *boundRC) doMulti(ctx context.Context, armed *sendCtx, multi []rueidis.Completed) []rueidis.RedisResult {
	rs := b.Client.DoMulti(ctx, multi...)
	if armed != nil && armed.cutMade.Load() {
		for k, r := range rs {
			if r.NonRedisError() != nil {
				rs[k] = rueidis.NewErrorResult(context.DeadlineExceeded)
			}
		}
		return rs
	}
	return b.sawAll(rs)
}

// DoMulti implements rueidis.Client: the commands that fail with errCut,
// unsent behind a cut request (Cancellations, above), are sent again, up
// to resends times.
func (b *boundRC) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	rs := b.doMultiOnce(ctx, multi, false)
	for range resends {
		var again []int
		for k, r := range rs {
			if r.NonRedisError() == errCut {
				again = append(again, k)
			}
		}
		if again == nil {
			return rs
		}
		sub := make([]rueidis.Completed, len(again))
		for i, k := range again {
			sub[i] = multi[k]
		}
		for i, r := range b.doMultiOnce(ctx, sub, true) {
			rs[again[i]] = r
		}
	}
	return rs
}

// doMultiOnce is one send of DoMulti's (again: doOnce's).
func (b *boundRC) doMultiOnce(ctx context.Context, multi []rueidis.Completed, again bool) []rueidis.RedisResult {
	if err := ctx.Err(); err != nil {
		return errResults(err, len(multi))
	}
	if end := b.ends(ctx, again); end != nil {
		return handOff(b, ctx, end, func() []rueidis.RedisResult { return b.doMulti(ctx, nil, multi) },
			func(err error) []rueidis.RedisResult { return errResults(err, len(multi)) })
	}
	s := b.armable(ctx)
	if s == nil {
		return b.doMulti(ctx, nil, multi)
	}
	s.batch = true
	b.d.arm(s)
	defer b.d.disarm(s)
	return b.doMulti(ctx, s, multi)
}

// handOff runs do on one of the Client's workers (inline once Close
// stopped lending) and returns its result, or cut's of ctx's error when
// end (ctx's) comes first: an answer that came as ctx ended counts.
func handOff[T any](b *boundRC, ctx context.Context, end <-chan struct{}, do func() T, cut func(error) T) T {
	ch := make(chan T, 1)
	if !b.lend(func() { ch <- do() }) {
		return do()
	}
	select {
	case r := <-ch:
		return r
	case <-end:
		select {
		case r := <-ch:
			return r
		default:
			return cut(ctxErr(ctx))
		}
	}
}

// errResults is n results of err.
func errResults(err error, n int) []rueidis.RedisResult {
	rs := make([]rueidis.RedisResult, n)
	for k := range rs {
		rs[k] = rueidis.NewErrorResult(err)
	}
	return rs
}

func (b *boundRC) sawAll(rs []rueidis.RedisResult) []rueidis.RedisResult {
	for _, r := range rs {
		if err := r.NonRedisError(); err != nil && err != errCut {
			b.d.saw(err)
			break
		}
	}
	return rs
}

// ctxErr is ctx's error once it ended (its Done closed).
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.Canceled
}
