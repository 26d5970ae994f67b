package task

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Review rev19d W1: a /status answer of another cluster's member (at a
// stale address, its CA shared) names no record of this cluster: its
// meta_epoch must not push this cluster's next epoch; one of this
// cluster's (or naming none) counts.
func TestAnotherClustersPeerMetaEpochCountsForNothing(t *testing.T) {
	k := newKit(t, "a")
	m := k.member("a", nil)
	for _, c := range []struct {
		cluster string
		want    uint64
	}{{"other", 0}, {"kit", 7}, {"", 7}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(status.Member{Name: "b", Cluster: c.cluster, MetaEpoch: 7})
		}))
		host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		p, _ := strconv.Atoi(port)
		out, unreachable := m.peerStatuses(context.Background(), []provider.Instance{{Name: "b", Address: host, StatusPort: p}})
		srv.Close()
		if unreachable != 0 || len(out) != 1 {
			t.Fatalf("cluster %q: %d unreachable, %d answers", c.cluster, unreachable, len(out))
		}
		if out[0].MetaEpoch != c.want {
			t.Errorf("an answer of cluster %q naming meta_epoch 7: counted %d, want %d", c.cluster, out[0].MetaEpoch, c.want)
		}
	}
}
