package local_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/local"
)

// Two of three members stopped for good and replaced by empty ones: after
// the grace period the survivor seeds the next epoch from its own data
// (ForceNewCluster), the replacements join, and no acknowledged key is lost.
func TestQuorumLossRecoveryFromSurvivor(t *testing.T) {
	tc := newCluster(t, t.TempDir(), 3, 2*time.Second)
	tc.opts.RecoveryGrace = 5 * time.Second
	if err := tc.lay.WriteConfig(tc.opts, tc.ports); err != nil {
		t.Fatal(err)
	}
	tc.startAll()
	tc.waitHealthy(60 * time.Second)
	_, before := tc.waitConfirmed(30 * time.Second)
	c := tc.client()
	putKeys(t, c, "acked", 200)

	for _, n := range []string{"m1", "m2"} {
		if err := tc.sup.Stop(n, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// Their slots are replaced by new, empty members (as Nomad would).
	fresh, err := local.AllocatePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	tc.ports = []local.MemberPorts{tc.ports[0], fresh[0], fresh[1]}
	if err := tc.lay.WriteConfig(tc.opts, tc.ports); err != nil {
		t.Fatal(err)
	}
	// The replacements reuse the names m1 and m2 with new ports and empty
	// data dirs (the old ones are moved out of the way, as a lost host's).
	for _, n := range []string{"m1", "m2"} {
		if err := os.Rename(filepath.Join(tc.lay.DataDir(), n), filepath.Join(t.TempDir(), n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"m1", "m2"} {
		if err := tc.sup.Start(n); err != nil {
			t.Fatal(err)
		}
	}
	st, rec := tc.waitConfirmedAfter(before.Epoch+1, 120*time.Second)
	if rec.Epoch != before.Epoch+1 || rec.Seeder != "m0" || rec.Source != "data" {
		t.Fatalf("record after recovery %+v", rec)
	}
	for _, m := range st.Members {
		if !m.Healthy {
			t.Fatalf("member %s not healthy after recovery", m.Name)
		}
	}
	c2 := tc.client()
	checkKeys(t, c2, "acked", 200)
	waitFor(t, 60*time.Second, "3 voters", func() (bool, string) {
		v, l, names, err := memberList(c2)
		return v == 3 && l == 0, fmt.Sprintf("%d voters %d learners %v %v", v, l, names, err)
	})
}
