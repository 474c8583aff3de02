package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// faultServer starts a server for a fault test: the proxy is the same on
// every backend, so one backend is enough.
func faultServer(t *testing.T) *Server {
	t.Helper()
	return Redis(t, Options{Backend: BackendProcess})
}

// inject injects r or fails the test.
func inject(t *testing.T, s *Server, r Rule) *Fault {
	t.Helper()
	f, err := s.Inject(r)
	if err != nil {
		t.Fatalf("Inject(%v): %v", r.Action, err)
	}
	return f
}

// waitFault waits for f or fails the test.
func waitFault(t *testing.T, ctx context.Context, f *Fault, hits int) {
	t.Helper()
	if err := f.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got := f.Hits(); got != hits {
		t.Fatalf("Hits() = %d, want %d", got, hits)
	}
}

// getDirect reads key on DirectAddr; "" with ok false when it is missing.
func getDirect(t *testing.T, ctx context.Context, direct rueidis.Client, key string) (string, bool) {
	t.Helper()
	v, err := direct.Do(ctx, direct.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false
	}
	if err != nil {
		t.Fatalf("direct GET %s: %v", key, err)
	}
	return v, true
}

// rawConn is a connection that speaks RESP by hand, for exact control of
// what is sent when.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	var d net.Dialer
	c, err := d.DialContext(testCtx(t), "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

// send writes the commands in one write, as a client pipelines them.
func (rc *rawConn) send(cmds ...[]string) {
	rc.t.Helper()
	var b strings.Builder
	for _, cmd := range cmds {
		fmt.Fprintf(&b, "*%d\r\n", len(cmd))
		for _, a := range cmd {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := rc.c.Write([]byte(b.String())); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// expect reads one reply and fails the test unless its bytes are want.
func (rc *rawConn) expect(want string) {
	rc.t.Helper()
	rep, err := readRESPReply(rc.r)
	if err != nil || string(rep.raw) != want {
		rc.t.Fatalf("reply %q, %v; want %q", rep.raw, err, want)
	}
}

// expectClosed fails the test unless the connection ends without another
// reply.
func (rc *rawConn) expectClosed() {
	rc.t.Helper()
	if rep, err := readRESPReply(rc.r); err == nil || isTimeout(err) {
		rc.t.Fatalf("read %q, %v; want the connection reset", rep.raw, err)
	}
}

func cmd(args ...string) []string { return args }

func TestFaultDropRequest(t *testing.T) {
	s := faultServer(t)
	ctx := testCtx(t)
	c := newClient(t, s.Addr(), "")
	direct := newClient(t, s.DirectAddr(), "")
	f := inject(t, s, Rule{Match: Command("set").WithArg("dropped"), Action: DropRequest})

	// Pipelined: the command before the dropped one runs, the dropped one
	// and the one behind it do not, and the client sees all three fail.
	res := c.DoMulti(ctx,
		c.B().Set().Key("before").Value("1").Build(),
		c.B().Set().Key("dropped").Value("1").Build(),
		c.B().Set().Key("behind").Value("1").Build())
	for i, r := range res {
		if err := r.Error(); err == nil {
			t.Errorf("command %d of the pipeline succeeded; want the reset connection's error", i)
		}
	}
	waitFault(t, ctx, f, 1)
	for key, ran := range map[string]bool{"before": true, "dropped": false, "behind": false} {
		if _, ok := getDirect(t, ctx, direct, key); ok != ran {
			t.Errorf("SET %s ran: %v, want %v", key, ok, ran)
		}
	}

	// The rule has retired: the next SET goes through on a new connection.
	raw := dialRaw(t, s.Addr())
	raw.send(cmd("SET", "dropped", "2"))
	raw.expect("+OK\r\n")
	if got := f.Hits(); got != 1 {
		t.Errorf("Hits() = %d after the rule retired, want 1", got)
	}
}

func TestFaultDropReply(t *testing.T) {
	s := faultServer(t)
	ctx := testCtx(t)
	c := newClient(t, s.Addr(), "")
	direct := newClient(t, s.DirectAddr(), "")
	f := inject(t, s, Rule{Match: Command("SET").WithArg("k"), Action: DropReply})
	if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(); err == nil {
		t.Fatal("SET whose reply was dropped succeeded")
	}
	waitFault(t, ctx, f, 1)
	if v, _ := getDirect(t, ctx, direct, "k"); v != "v" {
		t.Fatalf("direct GET k = %q, want the dropped reply's SET to have run", v)
	}

	// Replies before the dropped one arrive, and then the connection ends.
	f = inject(t, s, Rule{Match: Command("SET").WithArg("k2"), Action: DropReply})
	raw := dialRaw(t, s.Addr())
	raw.send(cmd("SET", "k1", "v"), cmd("SET", "k2", "v"), cmd("SET", "k3", "v"))
	raw.expect("+OK\r\n")
	raw.expectClosed()
	waitFault(t, ctx, f, 1)
}

func TestFaultResetAfterRequest(t *testing.T) {
	s := faultServer(t)
	ctx := testCtx(t)
	c := newClient(t, s.Addr(), "")
	direct := newClient(t, s.DirectAddr(), "")
	f := inject(t, s, Rule{Match: Command("INCR"), Action: ResetAfterRequest})
	if err := c.Do(ctx, c.B().Incr().Key("n").Build()).Error(); err == nil {
		t.Fatal("INCR reset after its request succeeded")
	}
	waitFault(t, ctx, f, 1)
	// Wait returned: Redis has closed the proxy's connection, so it has
	// run everything forwarded on it.
	if v, _ := getDirect(t, ctx, direct, "n"); v != "1" {
		t.Fatalf("direct GET n = %q, want 1: the request reached Redis", v)
	}
}

func TestFaultResetAfterReply(t *testing.T) {
	s := faultServer(t)
	ctx := testCtx(t)
	f := inject(t, s, Rule{Match: Command("ECHO").WithArg("last"), Action: ResetAfterReply})
	raw := dialRaw(t, s.Addr())
	raw.send(cmd("ECHO", "first"), cmd("ECHO", "last"), cmd("ECHO", "behind"))
	raw.expect("$5\r\nfirst\r\n")
	raw.expect("$4\r\nlast\r\n")
	raw.expectClosed()
	waitFault(t, ctx, f, 1)
}

func TestFaultLateRequest(t *testing.T) {
	s := faultServer(t)
	ctx := testCtx(t)
	c := newClient(t, s.Addr(), "")
	direct := newClient(t, s.DirectAddr(), "")
	f := inject(t, s, Rule{Match: Command("INCR").WithArg("n"), Action: LateRequest(300 * time.Millisecond)})
	if err := c.Do(ctx, c.B().Incr().Key("n").Build()).Error(); err == nil {
		t.Fatal("INCR held back as a late request succeeded")
	}
	// The client's attempt failed and the copy has not run yet: the
	// client sends it again, on a new connection, and is answered first.
	if v, _ := getDirect(t, ctx, direct, "n"); v != "" {
		t.Fatalf("direct GET n = %q before the late copy, want none", v)
	}
	if n, err := c.Do(ctx, c.B().Incr().Key("n").Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("INCR sent again = %d, %v; want 1", n, err)
	}
	waitFault(t, ctx, f, 1)
	// Wait returned: the late copy has run, after the one sent again.
	if v, _ := getDirect(t, ctx, direct, "n"); v != "2" {
		t.Fatalf("direct GET n = %q, want 2: the late copy ran too", v)
	}
	if got := LateRequest(time.Second).String(); got != "LateRequest(1s)" {
		t.Fatalf("String() = %q", got)
	}
}

func TestFaultDelay(t *testing.T) {
	const d = 500 * time.Millisecond
	for _, c := range []struct {
		name   string
		action Action
		// want is what the delayed GET reads when the key is changed during
		// the delay: the new value if the request was held, the old one if
		// the reply was.
		want string
	}{
		{"request", DelayRequest(d), "during"},
		{"reply", DelayReply(d), "before"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := faultServer(t)
			ctx := testCtx(t)
			cl := newClient(t, s.Addr(), "")
			direct := newClient(t, s.DirectAddr(), "")
			if err := direct.Do(ctx, direct.B().Set().Key("k").Value("before").Build()).Error(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			// The matcher runs when the delay is about to begin.
			matched := make(chan struct{}, 1)
			get := Command("GET").WithArg("k")
			f := inject(t, s, Rule{Action: c.action, Match: MatchFunc(func(cmd []string) bool {
				if !get.Match(cmd) {
					return false
				}
				select {
				case matched <- struct{}{}:
				default:
				}
				return true
			})})

			type result struct {
				vals []string
				errs []error
				took time.Duration
			}
			done := make(chan result, 1)
			go func() {
				start := time.Now()
				// SET behind the delayed GET on the same connection.
				res := cl.DoMulti(ctx, cl.B().Get().Key("k").Build(), cl.B().Set().Key("behind").Value("1").Build())
				var r result
				r.took = time.Since(start)
				for _, x := range res {
					v, err := x.ToString()
					r.vals, r.errs = append(r.vals, v), append(r.errs, err)
				}
				done <- r
			}()
			select {
			case <-matched:
			case <-ctx.Done():
				t.Fatal("the delayed GET was never matched")
			}
			if c.action.kind == actDelayRequest {
				if _, ok := getDirect(t, ctx, direct, "behind"); ok {
					t.Error("the command behind a delayed request ran during the delay")
				}
			}
			if err := direct.Do(ctx, direct.B().Set().Key("k").Value("during").Build()).Error(); err != nil {
				t.Fatalf("SET during the delay: %v", err)
			}
			r := <-done
			if r.errs[0] != nil || r.errs[1] != nil {
				t.Fatalf("delayed pipeline: %v", r.errs)
			}
			if r.took < d {
				t.Errorf("delayed pipeline took %v, want at least %v", r.took, d)
			}
			if r.vals[0] != c.want {
				t.Errorf("delayed GET = %q, want %q", r.vals[0], c.want)
			}
			waitFault(t, ctx, f, 1)
		})
	}
}

func TestFaultTimesAcrossConnections(t *testing.T) {
	s := faultServer(t)
	ctx := testCtx(t)
	f := inject(t, s, Rule{Match: Command("SET"), Action: DropRequest, Times: 2})
	if err := f.Wait(shortCtx(t)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait before any match: %v, want context.DeadlineExceeded", err)
	}
	for range 2 {
		raw := dialRaw(t, s.Addr())
		raw.send(cmd("SET", "k", "v"))
		raw.expectClosed()
	}
	waitFault(t, ctx, f, 2)
	raw := dialRaw(t, s.Addr())
	raw.send(cmd("SET", "k", "v"))
	raw.expect("+OK\r\n")
	if got := f.Hits(); got != 2 {
		t.Fatalf("Hits() = %d after the rule retired, want 2", got)
	}
}

func TestFaultOrderRemoveClose(t *testing.T) {
	s := faultServer(t)
	ctx := testCtx(t)

	// The first rule injected that matches acts; the next one waits its turn.
	first := inject(t, s, Rule{Match: Command("GET"), Action: DelayReply(0)})
	second := inject(t, s, Rule{Match: Command("GET").WithArg("x"), Action: DropReply})
	raw := dialRaw(t, s.Addr())
	raw.send(cmd("GET", "x"))
	raw.expect("$-1\r\n")
	waitFault(t, ctx, first, 1)
	if second.Hits() != 0 {
		t.Fatal("the second rule acted on a command the first one took")
	}
	raw.send(cmd("GET", "x"))
	raw.expectClosed()
	waitFault(t, ctx, second, 1)

	// A removed rule no longer acts, and Wait says so.
	removed := inject(t, s, Rule{Match: Command("SET"), Action: DropRequest})
	removed.Remove()
	removed.Remove()
	if err := removed.Wait(ctx); !errors.Is(err, ErrFaultRemoved) {
		t.Fatalf("Wait after Remove: %v, want ErrFaultRemoved", err)
	}
	raw = dialRaw(t, s.Addr())
	raw.send(cmd("SET", "k", "v"))
	raw.expect("+OK\r\n")
	if removed.Hits() != 0 {
		t.Fatal("a removed rule acted")
	}

	for _, r := range []Rule{
		{},
		{Match: Command("GET")},
		{Action: DropReply},
		{Match: Command("GET"), Action: DelayReply(-time.Second)},
		{Match: Command("GET"), Action: DropReply, Times: -1},
	} {
		if _, err := s.Inject(r); err == nil {
			t.Errorf("Inject(%+v) accepted an invalid rule", r)
		}
	}

	pending := inject(t, s, Rule{Match: Command("SET"), Action: DropRequest})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := pending.Wait(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Inject(Rule{Match: Command("GET"), Action: DropReply}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Inject after Close: %v, want ErrClosed", err)
	}
}

// TestFaultPushFramesRESP3 shows that push frames on a RESP3 connection,
// subscribe confirmations and messages, are not taken for replies: a rule
// on a command sent after them still acts on that command's reply.
func TestFaultPushFramesRESP3(t *testing.T) {
	s := faultServer(t)
	ctx := testCtx(t)
	direct := newClient(t, s.DirectAddr(), "")
	publish := func(msg string) {
		t.Helper()
		n, err := direct.Do(ctx, direct.B().Publish().Channel("ch").Message(msg).Build()).AsInt64()
		if err != nil || n != 1 {
			t.Fatalf("PUBLISH %s: %d receivers, %v; want 1", msg, n, err)
		}
	}

	t.Run("raw", func(t *testing.T) {
		raw := dialRaw(t, s.Addr())
		raw.send(cmd("HELLO", "3"))
		if rep, err := readRESPReply(raw.r); err != nil || rep.kind != '%' {
			t.Fatalf("HELLO 3: %q, %v", rep.raw, err)
		}
		raw.send(cmd("SUBSCRIBE", "ch"))
		raw.expect(">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
		publish("m1")
		raw.expect(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nm1\r\n")
		raw.send(cmd("PING"))
		raw.expect("+PONG\r\n")

		// A message pushed while ECHO waits for its reply must not be
		// taken for that reply.
		f := inject(t, s, Rule{Match: Command("ECHO"), Action: ResetAfterReply})
		publish("m2")
		raw.send(cmd("ECHO", "mine"))
		raw.expect(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nm2\r\n")
		raw.expect("$4\r\nmine\r\n")
		raw.expectClosed()
		waitFault(t, ctx, f, 1)
	})

	t.Run("rueidis", func(t *testing.T) {
		// One connection, so that the subscription and the commands share it.
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:       []string{s.Addr()},
			DisableCache:      true,
			DisableRetry:      true,
			PipelineMultiplex: -1,
			Dialer:            netDialer(),
		})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer c.Close()
		subscribed := inject(t, s, Rule{Match: Command("SUBSCRIBE"), Action: DelayRequest(0)})
		msgs := make(chan string, 10)
		rctx, cancel := context.WithCancel(ctx)
		var receiver sync.WaitGroup
		defer receiver.Wait()
		defer cancel()
		receiver.Go(func() {
			_ = c.Receive(rctx, c.B().Subscribe().Channel("ch").Build(), func(m rueidis.PubSubMessage) { msgs <- m.Message })
		})
		waitFault(t, ctx, subscribed, 1)
		// Redis answers in order: once PING is answered, SUBSCRIBE has run.
		if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
			t.Fatalf("PING: %v", err)
		}
		for _, m := range []string{"m1", "m2", "m3"} {
			publish(m)
			if got := <-msgs; got != m {
				t.Fatalf("received %q, want %q", got, m)
			}
			if err := c.Do(ctx, c.B().Set().Key("k").Value(m).Build()).Error(); err != nil {
				t.Fatalf("SET after %s: %v", m, err)
			}
		}
		f := inject(t, s, Rule{Match: Command("GET").WithArg("k"), Action: DropReply})
		if err := c.Do(ctx, c.B().Get().Key("k").Build()).Error(); err == nil {
			t.Fatal("GET whose reply was dropped succeeded")
		}
		waitFault(t, ctx, f, 1)
	})
}

// TestFaultRESP2SubscribeStopsPairing shows that a RESP2 connection in
// subscribed mode, whose replies are not one per command, is left alone by
// reply rules, while a plain connection is not.
func TestFaultRESP2SubscribeStopsPairing(t *testing.T) {
	s := faultServer(t)
	ctx := testCtx(t)
	f := inject(t, s, Rule{Match: Command("PING"), Action: ResetAfterReply})
	sub := dialRaw(t, s.Addr())
	sub.send(cmd("SUBSCRIBE", "ch"))
	sub.expect("*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
	sub.send(cmd("PING"))
	sub.expect("*2\r\n$4\r\npong\r\n$0\r\n\r\n")
	sub.send(cmd("PING", "alive"))
	sub.expect("*2\r\n$4\r\npong\r\n$5\r\nalive\r\n")
	if f.Hits() != 0 {
		t.Fatal("a reply rule acted on a subscribed RESP2 connection")
	}
	plain := dialRaw(t, s.Addr())
	plain.send(cmd("PING"))
	plain.expect("+PONG\r\n")
	plain.expectClosed()
	waitFault(t, ctx, f, 1)
}
