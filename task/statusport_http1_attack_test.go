package task

// Taken over from the security review's TestAttackStatusPortALPN and
// inverted: the status port says what it serves.

import (
	"crypto/tls"
	"testing"
)

// The status port serves HTTP/1.1 alone and says so in ALPN, to a client
// offering h2 too (through GetConfigForClient, as with TLS auto): one
// request at a time per connection, so the connection caps bound the
// requests in flight. On the reviewed commit it negotiated no
// protocol (GetConfigForClient returned a config copied before ServeTLS
// added h2) while the code and README claimed HTTP/2 streams were capped.
func TestStatusPortServesHTTP1Only(t *testing.T) {
	m, cfg := statusTarget(t, true, someKeys(t))
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2", "http/1.1"}
	c, err := tls.Dial("tcp", statusAddr(m), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("the status port negotiated %q with a client offering h2 and http/1.1, want http/1.1", p)
	}
}
