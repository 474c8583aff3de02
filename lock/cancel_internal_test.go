package lock

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rlock-go/rlock/integration"
)

// An independent review of a6c64cb found: one sendCtx armed twice
// (Script.Run's EVAL after EVALSHA's NOSCRIPT, same ctx) was not cut the
// second time: disarmed stayed true, and cutNow returned at once.
func TestCancelRearmedSendIsCut(t *testing.T) {
	d := &dials{tracked: true}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	sc := &shakingConn{Conn: a, d: d}
	d.shaking.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newSendCtx(ctx, 2*time.Second, time.Time{}, true)
	buf := make([]byte, 64)
	// EVALSHA, answered NOSCRIPT.
	d.arm(s)
	_ = sc.SetDeadline(s.dl)
	go func() { _, _ = b.Write([]byte("-NOSCRIPT\r\n")) }()
	if _, err := sc.Read(buf); err != nil {
		t.Fatal(err)
	}
	d.disarm(s)
	// EVAL, with the same ctx; the caller cancels 50 ms later.
	d.arm(s)
	_ = sc.SetDeadline(s.dl)
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := sc.Read(buf)
	end := time.Now()
	took := end.Sub(start)
	d.disarm(s)
	// The time every CPU was stalled does not count (integration.Stalled):
	// stop 41's CI machine froze the process for 700 ms and more. Not cut,
	// the read returns at the 2 s deadline.
	stalled := integration.Stalled(start, end)
	t.Logf("second send's read: %v after %v (%v of it stalled)", err, took.Round(time.Millisecond), stalled.Round(time.Millisecond))
	if took-stalled > 500*time.Millisecond {
		t.Errorf("the second send of one sendCtx was not cut by its cancellation: read returned after %v (%v of it stalled)", took.Round(time.Millisecond), stalled.Round(time.Millisecond))
	}
}

// The same review: a request that was not armed (here: a query's ctx,
// a sibling of the caller's with the same deadline, as
// context.WithDeadline(bg, D) gives each of several goroutines) is
// matched to the armed send of that deadline, and cut when that send's
// caller is cancelled, though its own ctx has not ended. An armed
// send's deadline is now moved a nanosecond earlier.
func TestCancelUnarmedRequestWithTheSameDeadlineIsNotCut(t *testing.T) {
	d := &dials{tracked: true}
	a1, b1 := net.Pipe()
	defer a1.Close()
	defer b1.Close()
	a2, b2 := net.Pipe()
	defer a2.Close()
	defer b2.Close()
	c1 := &shakingConn{Conn: a1, d: d}
	c2 := &shakingConn{Conn: a2, d: d}
	dl := time.Now().Add(2 * time.Second)
	ctx1, cancel1 := context.WithDeadline(context.Background(), dl)
	defer cancel1()
	ctx2, cancel2 := context.WithDeadline(context.Background(), dl)
	defer cancel2()
	s1 := newSendCtx(ctx1, 3*time.Second, time.Time{}, true) // dl: ctx1's
	d.arm(s1)
	defer d.disarm(s1)
	_ = c1.SetDeadline(s1.dl)
	d2, _ := ctx2.Deadline() // the unarmed request (cmdCtx(ctx2)) on c2
	_ = c2.SetDeadline(d2)
	time.AfterFunc(50*time.Millisecond, cancel1)
	start := time.Now()
	_, err := c2.Read(make([]byte, 8))
	took := time.Since(start)
	t.Logf("the unarmed request's read: %v after %v (its ctx: %v)", err, took.Round(time.Millisecond), ctx2.Err())
	if errors.Is(err, os.ErrDeadlineExceeded) && took < time.Second && ctx2.Err() == nil {
		t.Errorf("a request whose ctx had not ended was cut by another call's cancellation")
	}
}

// The same review: a cut is reported by rueidis as
// context.DeadlineExceeded, which saw counts as a fault: every cut opens
// the connection-making window for 2 × max(CommandTimeout, DialTimeout),
// during which every caller's send goes through a worker (the cost the
// steady state avoids), though the dial tracker sees the remake itself.
// A cut now opens no window of its own.
func TestCancelACutOpensNoWindow(t *testing.T) {
	srv := integration.Redis(t, integration.Options{})
	c, err := New(context.Background(), Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	h, err := c.Mutex("cancel:warm").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(srv.Pause(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// A ForceUnlock: no settler follows its cut (a cut acquire's settles
	// at once, and may meet the closing connection, which opens the
	// window as any failed request does).
	go func() { _, err := c.Mutex("cancel:cut").ForceUnlock(ctx); done <- err }()
	time.Sleep(100 * time.Millisecond) // the fault's timing: the request is on the wire (nothing signals it, the master is stopped)
	cancel()
	err = <-done
	must(srv.Resume(context.Background()))
	t.Logf("cut call: %v", err)
	// Time itself: a reconnection made meanwhile has ended its handshake,
	// while a window the cut opened would last 2 × max(CommandTimeout,
	// DialTimeout), 6 s with the defaults.
	time.Sleep(time.Second)
	if c.crc.d.making() {
		t.Errorf("1 s after a cut (master resumed), the window is open: until %v from now", time.Until(time.Unix(0, c.crc.d.faultUntil.Load())).Round(time.Millisecond))
	}
}
