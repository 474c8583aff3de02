package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// proxyDialTimeout bounds the proxy's dial to the server. The server is on
// loopback, so a slow dial means it is paused with a full accept backlog.
const proxyDialTimeout = 5 * time.Second

// proxy is a loopback TCP proxy in front of one server. It owns one accept
// goroutine, and per connection one dial goroutine and then two copy
// goroutines; close joins them all.
type proxy struct {
	ln     net.Listener
	target string
	ctx    context.Context // cancelled by close, to end dials in flight
	cancel context.CancelFunc

	mu          sync.Mutex
	partitioned bool
	closed      bool
	links       map[*link]struct{} // forwarding connections
	held        map[net.Conn]struct{}
	wg          sync.WaitGroup

	faults faultSet // rules applied to forwarded traffic
}

// link is one client connection forwarded to the server.
type link struct {
	client, server net.Conn
	once           sync.Once
	done           chan struct{} // closed by cut
}

// cut closes both sides; a reset tells the client at once.
func (l *link) cut() {
	l.once.Do(func() {
		if tc, ok := l.client.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = l.client.Close()
		_ = l.server.Close()
		close(l.done)
	})
}

// listenProxy returns a proxy that listens but does not accept yet:
// connections wait in the kernel's backlog until serve. Its address is
// known before the server behind it starts, so that the server can
// announce it (replica-announce-port).
func listenProxy() (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("rlock: integration: proxy listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &proxy{
		ln:     ln,
		ctx:    ctx,
		cancel: cancel,
		links:  make(map[*link]struct{}),
		held:   make(map[net.Conn]struct{}),
	}, nil
}

// serve starts forwarding to target. It is called once, before any other
// method but addr and close.
func (p *proxy) serve(target string) {
	p.target = target
	p.wg.Go(p.accept)
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // listener closed
		}
		p.mu.Lock()
		switch {
		case p.closed:
			_ = c.Close()
		case p.partitioned:
			p.held[c] = struct{}{}
		default:
			p.wg.Go(func() { p.forward(c) })
		}
		p.mu.Unlock()
	}
}

// forward dials the server for client c and forwards both ways, applying
// the proxy's faults, until either side closes or the link is cut.
func (p *proxy) forward(c net.Conn) {
	ctx, cancel := context.WithTimeout(p.ctx, proxyDialTimeout)
	var d net.Dialer
	s, err := d.DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		// Server down: reset the client as the server itself would refuse it.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
		return
	}
	l := &link{client: c, server: s, done: make(chan struct{})}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		l.cut()
		return
	case p.partitioned:
		// The partition began while we dialled: hold the client as if it had
		// connected during the partition.
		p.held[c] = struct{}{}
		p.mu.Unlock()
		_ = s.Close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()

	p.pipe(l)

	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// partition cuts every forwarding link and holds new connections.
func (p *proxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partitioned = true
	for l := range p.links {
		l.cut()
	}
}

// heal forwards held connections and new ones again.
func (p *proxy) heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.partitioned = false
	for c := range p.held {
		delete(p.held, c)
		p.wg.Go(func() { p.forward(c) })
	}
	return nil
}

// close stops accepting, cuts every connection and waits for every
// goroutine of the proxy.
func (p *proxy) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.faults.close()
	p.cancel()
	err := p.ln.Close()
	for l := range p.links {
		l.cut()
	}
	for c := range p.held {
		_ = c.Close()
		delete(p.held, c)
	}
	p.mu.Unlock()
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("rlock: integration: proxy close: %w", err)
	}
	return nil
}
