package provider_test

import (
	"net/url"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/provider"
)

// An instance's URLs put an IPv6 address in brackets, so that its colons
// are never taken for the port's, and parse back to the instance's host.
func TestInstanceURLs(t *testing.T) {
	for _, c := range []struct {
		scheme, address string
		host            string // the URL's host part, without the port
	}{
		{"https", "10.0.0.7", "10.0.0.7"},
		{"http", "node-1.example", "node-1.example"},
		{"https", "fd00::7", "[fd00::7]"},
		{"http", "::1", "[::1]"},
	} {
		in := provider.Instance{Name: "m0", Address: c.address, ClientPort: 2379, PeerPort: 2380, StatusPort: 2381}
		for _, u := range []struct{ got, port string }{
			{in.ClientURL(c.scheme), "2379"},
			{in.PeerURL(c.scheme), "2380"},
			{in.StatusURL(c.scheme), "2381"},
		} {
			if want := c.scheme + "://" + c.host + ":" + u.port; u.got != want {
				t.Errorf("%s: URL = %q, want %q", c.address, u.got, want)
			}
			p, err := url.Parse(u.got)
			if err != nil {
				t.Fatalf("%s: URL %q does not parse: %v", c.address, u.got, err)
			}
			if p.Scheme != c.scheme || p.Hostname() != c.address || p.Port() != u.port {
				t.Errorf("%s: URL %q parses to %q %q %q", c.address, u.got, p.Scheme, p.Hostname(), p.Port())
			}
		}
	}
}
