package integration_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
)

// Losing the coordinator's state (Consul wiped: no record, no CA) while a
// member is down: the running members store the cluster's CA and record
// again, and the member that starts meanwhile offers the CA it kept, never
// a new one its peers do not trust. It rejoins with its data.
func TestCoordinatorStateLossKeepsTheCA(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	t.Parallel() // its own directory and ports: see harness_test.go
	tc := newCluster(t, t.TempDir(), 3, 5*time.Second)
	tc.startAll()
	st := tc.waitHealthy(60 * time.Second)
	cli := tc.client()
	putKeys(t, cli, "k", 100)
	caFile := filepath.Join(tc.lay.CoordDir(), "kv-ca")
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	rec := tc.record()
	oldID := st.Members[1].MemberID

	if err := tc.sup.Stop("m1", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"record.json", "kv-ca"} {
		if err := os.Remove(filepath.Join(tc.lay.CoordDir(), f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.sup.Start("m1"); err != nil {
		t.Fatal(err)
	}
	// Read the coordinator's files directly: the status command cannot
	// connect until the CA is stored again.
	waitFor(t, 60*time.Second, "the cluster's CA and record stored again", func() (bool, string) {
		got, err := os.ReadFile(caFile)
		if err != nil {
			return false, err.Error()
		}
		if !bytes.Equal(got, ca) {
			return false, "another CA is stored"
		}
		b, err := os.ReadFile(filepath.Join(tc.lay.CoordDir(), "record.json"))
		if err != nil {
			return false, err.Error()
		}
		var r coord.Record
		if err := json.Unmarshal(b, &r); err != nil {
			return false, err.Error()
		}
		return r.ClusterID == rec.ClusterID && r.Epoch == rec.Epoch, fmt.Sprintf("record %+v, was %+v", r, rec)
	})
	st = tc.waitHealthy(90 * time.Second)
	if st.Members[1].MemberID != oldID || st.ClusterID != fmt.Sprintf("%x", rec.ClusterID) {
		t.Fatalf("m1 is %x in cluster %s, want %x in %x", st.Members[1].MemberID, st.ClusterID, oldID, rec.ClusterID)
	}
	voters, learners, _, err := memberList(cli)
	if err != nil || voters != 3 || learners != 0 {
		t.Fatalf("membership: %d voters %d learners (%v)", voters, learners, err)
	}
	checkKeys(t, cli, "k", 100)
}
