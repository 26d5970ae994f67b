package statusport

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// statusListener admits the status port's connections: at most max in
// all and at most perSource from one source (sourceOf). A connection over
// its source's cap is closed at once. At the global cap a new connection
// takes the place of the connection idle longest (a keep-alive connection
// between requests, as the HTTP server reports through connState), so
// keep-alive connections refreshed before the idle timeout cannot hold the
// cap; with no idle connection it waits, the connections behind it in the
// kernel's backlog, until one closes (each is bounded by the server's
// header, read and write timeouts). A connection in a request is never
// closed here. Accept is called from one goroutine (http.Server.Serve).
type statusListener struct {
	net.Listener
	max, perSource int

	mu       sync.Mutex
	cond     *sync.Cond // signalled when a connection closes or goes idle, and on Close
	conns    map[*statusConn]struct{}
	bySource map[netip.Prefix]int
	closed   bool
}

type statusConn struct {
	net.Conn
	l      *statusListener
	source netip.Prefix
	// idleSince is when the connection went idle, zero while it is new
	// or in a request. Guarded by l.mu.
	idleSince time.Time
}

func newStatusListener(ln net.Listener, max, perSource int) *statusListener {
	l := &statusListener{Listener: ln, max: max, perSource: perSource,
		conns: map[*statusConn]struct{}{}, bySource: map[netip.Prefix]int{}}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// sourceOf is what the per-source limits count, from a remote address
// (host:port): the IPv4 address, or the /64 of an IPv6 one (a single host
// commonly holds a whole /64).
func sourceOf(remote string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Prefix{}
	}
	ip := ap.Addr().Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

func (l *statusListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		sc := &statusConn{Conn: c, l: l, source: sourceOf(c.RemoteAddr().String())}
		admitted, err := l.admit(sc)
		if err != nil {
			c.Close()
			return nil, err
		}
		if admitted {
			return sc, nil
		}
		c.Close() // over its source's cap
	}
}

// admit counts sc in, once there is room for it; false if its source is
// at its cap.
func (l *statusListener) admit(sc *statusConn) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bySource[sc.source] >= l.perSource {
		return false, nil
	}
	for len(l.conns) >= l.max {
		if l.closed {
			return false, net.ErrClosed
		}
		var victim *statusConn
		for c := range l.conns {
			if !c.idleSince.IsZero() && (victim == nil || c.idleSince.Before(victim.idleSince)) {
				victim = c
			}
		}
		if victim == nil {
			l.cond.Wait()
			continue
		}
		l.releaseLocked(victim)
		// Closed outside the lock: the server's own Close of it then
		// finds it released already.
		l.mu.Unlock()
		victim.Conn.Close()
		l.mu.Lock()
	}
	l.conns[sc] = struct{}{}
	l.bySource[sc.source]++
	return true, nil
}

func (l *statusListener) releaseLocked(c *statusConn) {
	if _, ok := l.conns[c]; !ok {
		return
	}
	delete(l.conns, c)
	if l.bySource[c.source]--; l.bySource[c.source] <= 0 {
		delete(l.bySource, c.source)
	}
	l.cond.Broadcast()
}

func (c *statusConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return err
}

// connState is the server's http.Server.ConnState: it marks connections
// idle between requests.
func (l *statusListener) connState(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(*statusConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateIdle:
		sc.idleSince = time.Now()
		l.cond.Broadcast()
	default:
		sc.idleSince = time.Time{}
	}
}

func (l *statusListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}
