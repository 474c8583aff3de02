package integration

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// flow forwards one link frame by frame, applying the proxy's faults. It
// reads each command from the client and each reply from the server as a
// whole RESP frame, and pairs replies with the commands they answer, as the
// client does, so that a rule can act on the reply to a command it matched.
//
// The request side runs on its own goroutine and the reply side on the
// caller's; pipe joins both.
type flow struct {
	p *proxy
	l *link

	// draining is set once the request side has reset the client: the
	// server side is then half-closed, and replies are read and discarded
	// until the server closes its side, so that every command forwarded
	// before the reset runs.
	draining atomic.Bool
	reset    chan struct{} // closed when draining is set, to end delays
	// drained is the fault that reset the client from the request side. It
	// counts as acted once Redis has closed the connection, having run
	// every command forwarded before the reset. Set by the request side;
	// read by pipe once both sides have ended.
	drained *Fault

	mu       sync.Mutex
	queue    []expected // commands forwarded and not yet answered, oldest first
	unpaired bool       // pairing has stopped for good on this link
	resp3    bool       // HELLO 3 succeeded on this link
}

// expected is a forwarded command awaiting its in-band reply.
type expected struct {
	cmd  []string
	kind expectKind
}

type expectKind uint8

const (
	// expectReply: exactly one in-band reply.
	expectReply expectKind = iota
	// expectSubscribe: a (P|S)(UN)SUBSCRIBE. On RESP3 it is answered with
	// push frames only; on RESP2 with arrays that look like replies, one per
	// channel, and the connection enters subscribed mode, so pairing stops.
	expectSubscribe
	// expectStream: MONITOR or CLIENT REPLY; the replies stop being one per
	// command, so pairing stops.
	expectStream
)

// pipe forwards the link both ways until either side closes or the link is
// cut, and leaves it cut.
func (p *proxy) pipe(l *link) {
	f := &flow{p: p, l: l, reset: make(chan struct{})}
	var requests sync.WaitGroup
	requests.Go(f.requests)
	f.replies()
	requests.Wait()
	if f.drained != nil {
		p.faults.done(f.drained, true)
	}
}

// requests forwards commands from the client to the server.
//
// Frames are written in batches: a batch is flushed when the client has sent
// nothing more yet, and before any fault acts, so that commands ahead of the
// one it acts on reach Redis first.
func (f *flow) requests() {
	r := bufio.NewReader(f.l.client)
	rr := respReader{r: r}
	w := bufio.NewWriter(f.l.server)
	for {
		req, err := rr.readRequest()
		if err != nil {
			if errors.Is(err, errMalformed) {
				// Not a command Redis can read: pass everything through as
				// it comes (Redis answers with an error and closes).
				f.stopPairing()
				if _, err := w.Write(req.raw); err == nil && w.Flush() == nil {
					_, _ = io.Copy(f.l.server, r)
				}
			}
			f.l.cut()
			return
		}
		var fault *Fault
		if len(req.args) > 0 {
			fault = f.p.faults.claim(false, req.args)
		}
		if fault != nil {
			if err := w.Flush(); err != nil {
				f.p.faults.done(fault, false)
				f.l.cut()
				return
			}
			switch fault.rule.Action.kind {
			case actDropRequest:
				f.resetClient()
				f.drained = fault
				return
			case actDelayRequest:
				if !f.sleep(fault.rule.Action.delay) {
					f.p.faults.done(fault, false)
					return // the link was cut
				}
			case actLateRequest:
				f.late(w, req, fault)
				return
			}
		}
		if len(req.args) > 0 {
			f.expect(req.args)
		}
		if fault != nil && fault.rule.Action.kind == actResetAfterRequest {
			// From here no reply reaches the client: not even this
			// command's, which Redis may send before the reset below.
			f.drain()
		}
		_, err = w.Write(req.raw)
		if err == nil && (fault != nil || r.Buffered() == 0) {
			err = w.Flush()
		}
		if fault != nil {
			if err == nil && fault.rule.Action.kind == actResetAfterRequest {
				f.resetClient()
				f.drained = fault
				return
			}
			f.p.faults.done(fault, err == nil)
		}
		if err != nil {
			f.l.cut()
			return
		}
	}
}

// replies forwards replies from the server to the client.
// Frames are batched as in requests.
func (f *flow) replies() {
	defer f.l.cut()
	r := bufio.NewReader(f.l.server)
	rr := respReader{r: r}
	w := bufio.NewWriter(f.l.client)
	for {
		rep, err := rr.readReply()
		if err != nil {
			if errors.Is(err, errMalformed) && !f.draining.Load() {
				f.stopPairing()
				if _, err := w.Write(rep.raw); err == nil && w.Flush() == nil {
					_, _ = io.Copy(f.l.client, r)
				}
			}
			return
		}
		if f.draining.Load() {
			continue
		}
		var fault *Fault
		if rep.kind != '>' { // push frames answer no command
			if cmd, ok := f.pair(rep.kind); ok {
				fault = f.p.faults.claim(true, cmd)
			}
		}
		if fault != nil {
			if err := w.Flush(); err != nil {
				f.p.faults.done(fault, false)
				if f.draining.Load() {
					continue
				}
				return
			}
			switch fault.rule.Action.kind {
			case actDropReply:
				f.l.cut()
				f.p.faults.done(fault, true)
				return
			case actDelayReply:
				if !f.sleep(fault.rule.Action.delay) {
					// Cut, or reset by the request side: the next read
					// fails or drains.
					f.p.faults.done(fault, false)
					continue
				}
			}
		}
		_, err = w.Write(rep.raw)
		if err == nil && (fault != nil || r.Buffered() == 0) {
			err = w.Flush()
		}
		if fault != nil {
			if err == nil && fault.rule.Action.kind == actResetAfterReply {
				f.l.cut()
				f.p.faults.done(fault, true)
				return
			}
			f.p.faults.done(fault, err == nil)
		}
		if err != nil {
			if !f.draining.Load() {
				return
			}
			w.Reset(f.l.client) // drop what could not be written
		}
	}
}

// resetClient resets the client's connection and half-closes the server's,
// so that Redis runs every command already forwarded, then sees the end of
// the connection; replies meanwhile are discarded.
func (f *flow) resetClient() {
	f.drain()
	if tc, ok := f.l.client.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = f.l.client.Close()
	if tc, ok := f.l.server.(*net.TCPConn); !ok || tc.CloseWrite() != nil {
		f.l.cut()
	}
}

// late resets the client's connection and forwards req to Redis after the
// fault's delay, then closes the proxy's side gracefully: Redis runs it,
// and its reply is discarded. The fault counts the hit when the link ends.
func (f *flow) late(w *bufio.Writer, req request, fault *Fault) {
	f.drain()
	if tc, ok := f.l.client.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = f.l.client.Close()
	t := time.NewTimer(fault.rule.Action.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-f.l.done:
		f.p.faults.done(fault, false)
		return
	}
	f.expect(req.args)
	_, err := w.Write(req.raw)
	if err == nil {
		err = w.Flush()
	}
	tc, ok := f.l.server.(*net.TCPConn)
	if err != nil || !ok || tc.CloseWrite() != nil {
		f.p.faults.done(fault, false)
		f.l.cut()
		return
	}
	f.drained = fault
}

// drain stops forwarding replies to the client. Only the request side
// calls it.
func (f *flow) drain() {
	if !f.draining.Swap(true) {
		close(f.reset)
	}
}

// sleep waits for d and reports whether it did: false when the link was cut
// or the client reset meanwhile.
func (f *flow) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.l.done:
		return false
	case <-f.reset:
		return false
	}
}

// expect records a command about to be forwarded.
func (f *flow) expect(cmd []string) {
	kind := expectReply
	switch strings.ToUpper(cmd[0]) {
	case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE":
		kind = expectSubscribe
	case "MONITOR":
		kind = expectStream
	case "CLIENT":
		if len(cmd) > 1 && strings.EqualFold(cmd[1], "REPLY") {
			kind = expectStream
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.unpaired {
		f.queue = append(f.queue, expected{cmd: cmd, kind: kind})
	}
}

// pair returns the command an in-band reply of the given kind answers, or
// false when pairing has stopped on this link. A reply that no command
// awaits stops pairing, rather than risk a wrong pair.
func (f *flow) pair(kind byte) ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for !f.unpaired && len(f.queue) > 0 {
		head := f.queue[0]
		if head.kind == expectReply {
			f.queue = f.queue[1:]
			switch {
			case strings.EqualFold(head.cmd[0], "HELLO") && kind == '%':
				f.resp3 = true
			case strings.EqualFold(head.cmd[0], "HELLO") && kind == '*',
				strings.EqualFold(head.cmd[0], "RESET") && kind == '+':
				f.resp3 = false
			}
			return head.cmd, true
		}
		if head.kind == expectSubscribe && f.resp3 {
			f.queue = f.queue[1:] // answered by pushes only
			continue
		}
		break
	}
	f.unpaired = true
	f.queue = nil
	return nil, false
}

// stopPairing stops pairing for good on this link.
func (f *flow) stopPairing() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unpaired = true
	f.queue = nil
}
