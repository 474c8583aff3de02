package integration

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration/internal/backendkit"
)

func testStartAnswersPing(t *testing.T, s *Server) {
	ctx := testCtx(t)
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := backendkit.Ping(ctx, s.Addr(), "s3cret"); err != nil {
		t.Fatalf("ping through proxy: %v", err)
	}
	if err := backendkit.Ping(ctx, s.Addr(), ""); err == nil {
		t.Fatal("ping without the password succeeded")
	}
	for _, a := range []string{s.Addr(), s.DirectAddr()} {
		if host, _, _ := net.SplitHostPort(a); host != "127.0.0.1" {
			t.Errorf("address %s is not on loopback", a)
		}
	}
}

func testKill(t *testing.T, s *Server) {
	ctx := testCtx(t)
	if err := s.Kill(ctx); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	var d net.Dialer
	if c, err := d.DialContext(ctx, "tcp", s.DirectAddr()); err == nil {
		c.Close()
		t.Fatal("killed server accepted a connection")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial killed server: %v, want connection refused", err)
	}
	if err := backendkit.Ping(ctx, s.Addr(), ""); err == nil {
		t.Fatal("killed server answered through the proxy")
	}
	for name, f := range map[string]func(context.Context) error{
		"Kill": s.Kill, "Pause": s.Pause, "Resume": s.Resume,
	} {
		if err := f(ctx); !errors.Is(err, ErrNotRunning) {
			t.Errorf("%s of a killed server: %v, want ErrNotRunning", name, err)
		}
	}
	if err := s.Restart(ctx, RestartOptions{}); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := backendkit.Ping(ctx, s.Addr(), ""); err != nil {
		t.Fatalf("restarted server: %v", err)
	}
}

func testPause(t *testing.T, s *Server) {
	ctx := testCtx(t)
	c := newClient(t, s.Addr(), "")
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("PING before Pause: %v", err)
	}
	if err := s.Pause(ctx); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := backendkit.Ping(shortCtx(t), s.DirectAddr(), ""); !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		t.Fatalf("PING to a paused server: %v, want a timeout", err)
	}
	if err := s.Resume(ctx); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

func testPartition(t *testing.T, s *Server) {
	ctx := testCtx(t)
	c := newClient(t, s.Addr(), "")
	if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if err := s.Partition(ctx); err != nil {
		t.Fatalf("Partition: %v", err)
	}
	if err := c.Do(shortCtx(t), c.B().Get().Key("k").Build()).Error(); err == nil {
		t.Fatal("GET through a partition succeeded")
	}
	if err := backendkit.Ping(shortCtx(t), s.Addr(), ""); err == nil {
		t.Fatal("PING through a partition succeeded")
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("PING on DirectAddr during a partition: %v", err)
	}
	if err := s.Heal(ctx); err != nil {
		t.Fatalf("Heal: %v", err)
	}
	if err := backendkit.Ping(ctx, s.Addr(), ""); err != nil {
		t.Fatalf("PING after Heal: %v", err)
	}
	// The client's connection was cut; rueidis reconnects on the next
	// command, which may itself see the cut.
	got, err := c.Do(ctx, c.B().Get().Key("k").Build()).ToString()
	if err != nil {
		got, err = c.Do(ctx, c.B().Get().Key("k").Build()).ToString()
	}
	if err != nil || got != "v" {
		t.Fatalf("GET after Heal: %q, %v", got, err)
	}
}

func testHeldConnection(t *testing.T, s *Server) {
	ctx := testCtx(t)
	if err := s.Partition(ctx); err != nil {
		t.Fatalf("Partition: %v", err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.Addr())
	if err != nil {
		t.Fatalf("dial during partition: %v", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	buf := make([]byte, 7)
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := conn.Read(buf); err == nil {
		t.Fatalf("read %q during partition", buf[:n])
	}
	if err := s.Heal(ctx); err != nil {
		t.Fatalf("Heal: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("read after Heal: %q, %v", buf[:n], err)
	}
}

func testRestart(t *testing.T, b Backend) {
	type tc struct {
		name    string
		opts    Options
		kill    bool
		restart RestartOptions
		keeps   bool
	}
	for _, c := range []tc{
		{"wipe", Options{}, true, RestartOptions{}, false},
		{"keep data without persistence", Options{}, true, RestartOptions{KeepData: true}, false},
		{"persist keep data after kill", Options{Persist: true}, true, RestartOptions{KeepData: true, Delay: 50 * time.Millisecond}, true},
		{"persist keep data while running", Options{Persist: true}, false, RestartOptions{KeepData: true}, true},
		{"persist wipe", Options{Persist: true}, false, RestartOptions{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.opts
			o.Backend = b
			s := Redis(t, o)
			ctx := testCtx(t)
			cl := newClient(t, s.Addr(), "")
			if err := cl.Do(ctx, cl.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			if c.kill {
				if err := s.Kill(ctx); err != nil {
					t.Fatalf("Kill: %v", err)
				}
			}
			start := time.Now()
			if err := s.Restart(ctx, c.restart); err != nil {
				t.Fatalf("Restart: %v", err)
			}
			if took := time.Since(start); took < c.restart.Delay {
				t.Errorf("Restart took %v, less than its Delay %v", took, c.restart.Delay)
			}
			// A fresh client: the old one's connection died with the server.
			cl = newClient(t, s.Addr(), "")
			got, err := cl.Do(ctx, cl.B().Get().Key("k").Build()).ToString()
			switch {
			case err != nil && !rueidis.IsRedisNil(err):
				t.Fatalf("GET after Restart: %v", err)
			case c.keeps && got != "v":
				t.Fatalf("GET after Restart = %q, %v; want the key kept", got, err)
			case !c.keeps && err == nil:
				t.Fatalf("GET after Restart = %q; want the key lost", got)
			}
		})
	}
}

func testCloseIsIdempotent(t *testing.T, s *Server) {
	ctx := testCtx(t)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	var d net.Dialer
	for _, a := range []string{s.Addr(), s.DirectAddr()} {
		if c, err := d.DialContext(ctx, "tcp", a); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after Close", a)
		}
	}
	for name, f := range map[string]func(context.Context) error{
		"Kill": s.Kill, "Pause": s.Pause, "Partition": s.Partition, "Ping": s.Ping,
	} {
		if err := f(ctx); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func testMasters(t *testing.T, b Backend) {
	servers := Masters(t, 3, Options{Backend: b})
	ctx := testCtx(t)
	seen := map[string]bool{}
	for _, s := range servers {
		for _, a := range []string{s.Addr(), s.DirectAddr()} {
			if seen[a] {
				t.Fatalf("address %s used twice", a)
			}
			seen[a] = true
		}
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
