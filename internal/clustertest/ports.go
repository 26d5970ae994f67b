package clustertest

import (
	"net/url"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/localmode"
	"github.com/etcd-nomad/etcd-nomad/provider"
)

// FreePorts returns n distinct free TCP ports on 127.0.0.1, failing t when
// there are none. The ports come from localmode.FreePorts, the one
// place that finds free ports (local mode allocates its members' with it).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ps, err := localmode.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// FreeURL is an http URL on 127.0.0.1 at a free port: an embedded etcd's
// listen and advertise URL.
func FreeURL(t testing.TB) url.URL {
	t.Helper()
	u, err := url.Parse(provider.URL("http", "127.0.0.1", FreePorts(t, 1)[0]))
	if err != nil {
		t.Fatal(err)
	}
	return *u
}
