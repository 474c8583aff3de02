package backendkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Ping dials addr, authenticates when password is set, sends PING and waits
// for PONG, all within ctx. It speaks RESP by hand so that waiting for a
// server starts no client goroutines.
func Ping(ctx context.Context, addr, password string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("rlock: integration: ping %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	// Unblock reads when ctx is cancelled without a deadline.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	r := bufio.NewReader(c)
	if password != "" {
		if err := RoundTrip(c, r, "+OK", "AUTH", password); err != nil {
			return fmt.Errorf("rlock: integration: ping %s: %w", addr, err)
		}
	}
	if err := RoundTrip(c, r, "+PONG", "PING"); err != nil {
		return fmt.Errorf("rlock: integration: ping %s: %w", addr, err)
	}
	return nil
}

// ServerTime reads the server's clock with TIME.
func ServerTime(ctx context.Context, addr, password string) (time.Time, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return time.Time{}, fmt.Errorf("rlock: integration: time %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	r := bufio.NewReader(c)
	if password != "" {
		if err := RoundTrip(c, r, "+OK", "AUTH", password); err != nil {
			return time.Time{}, fmt.Errorf("rlock: integration: time %s: %w", addr, err)
		}
	}
	if _, err := c.Write([]byte("*1\r\n$4\r\nTIME\r\n")); err != nil {
		return time.Time{}, fmt.Errorf("rlock: integration: time %s: %w", addr, err)
	}
	// *2 $len sec $len usec
	var fields []int64
	for i := 0; i < 5; i++ {
		line, err := r.ReadString('\n')
		if err != nil {
			return time.Time{}, fmt.Errorf("rlock: integration: time %s: %w", addr, err)
		}
		if i == 2 || i == 4 {
			n, err := strconv.ParseInt(strings.TrimRight(line, "\r\n"), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("rlock: integration: time %s: %w", addr, err)
			}
			fields = append(fields, n)
		}
	}
	return time.Unix(fields[0], fields[1]*1000), nil
}

// RoundTrip sends one command and checks its one-line reply.
func RoundTrip(c net.Conn, r *bufio.Reader, want string, args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if got := strings.TrimRight(line, "\r\n"); got != want {
		return fmt.Errorf("%s: got %q, want %q", args[0], got, want)
	}
	return nil
}

// WaitReady pings addr until it answers, the process exits (exited is
// closed) or ctx ends. There is no readiness signal from redis-server other
// than its answering, so this polls, with a short fixed interval.
func WaitReady(ctx context.Context, addr, password string, exited <-chan struct{}) error {
	const interval = 10 * time.Millisecond
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		attempt, cancel := context.WithTimeout(ctx, time.Second)
		err := Ping(attempt, addr, password)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("rlock: integration: redis-server exited while starting: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("rlock: integration: redis-server not ready: %w", errors.Join(context.Cause(ctx), err))
		case <-t.C:
		}
	}
}
