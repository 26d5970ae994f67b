package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
)

// Two of three members stopped for good and replaced by empty ones: after
// the grace period the survivor seeds the next epoch from its own data
// (ForceNewCluster), the replacements join, and no acknowledged key is lost.
func TestQuorumLossRecoveryFromSurvivor(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	t.Parallel() // its own directory and ports: see harness_test.go
	tc, before := startRecoverable(t, 5*time.Second)
	c := tc.client()
	putKeys(t, c, "acked", 200)

	for _, n := range []string{"m1", "m2"} {
		if err := tc.sup.Stop(n, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// The survivor restarts while quorum is lost: its etcd never becomes
	// ready, and recovering must still be able to stop it.
	if err := tc.sup.Stop("m0", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := tc.sup.Start("m0"); err != nil {
		t.Fatal(err)
	}
	// Their slots are replaced by new, empty members (as Nomad would).
	tc.replaceEmpty()
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

// A member records a recovery (the next epoch, from its data) and is then
// lost for good with its data, before it starts that epoch. Once it has
// been missing from the member list for recovery_grace, the remaining
// members take over: the one with the best data of the epoch before records
// the epoch after, and no acknowledged key is lost.
func TestRecoveryTakenOverWhenSeederNeverReturns(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	t.Parallel() // its own directory and ports: see harness_test.go
	tc, before := startRecoverable(t, 3*time.Second)
	putKeys(t, tc.client(), "acked", 100)
	for _, n := range []string{"m0", "m1", "m2"} {
		if err := tc.sup.Stop(n, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// What m2 would have written before it vanished: the next epoch,
	// unconfirmed, to be seeded from its own data.
	co, err := backends.Coordinator(tc.config())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := co.Lock(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := co.Record(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.UpdateRecord(ctx, l, coord.Record{Token: "seed-of-a-lost-member", Epoch: before.Epoch + 1, Seeder: "m2", Source: "data", Index: cur.Index}); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// m2 is gone with its host: out of the member list, its data elsewhere.
	if err := os.Rename(filepath.Join(tc.lay.DataDir(), "m2"), filepath.Join(t.TempDir(), "m2")); err != nil {
		t.Fatal(err)
	}
	tc.ports = tc.ports[:2]
	if err := tc.lay.WriteConfig(tc.opts, tc.ports); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"m0", "m1"} {
		if err := tc.sup.Start(n); err != nil {
			t.Fatal(err)
		}
	}
	_, rec := tc.waitConfirmedAfter(before.Epoch+2, 2*time.Minute)
	if rec.Epoch != before.Epoch+2 || rec.Source != "data" || (rec.Seeder != "m0" && rec.Seeder != "m1") {
		t.Fatalf("record after the takeover %+v, want epoch %d from the data of m0 or m1", rec, before.Epoch+2)
	}
	c := tc.client()
	checkKeys(t, c, "acked", 100)
	waitFor(t, 60*time.Second, "2 voters", func() (bool, string) {
		v, l, names, err := memberList(c)
		return v == 2 && l == 0, fmt.Sprintf("%d voters %d learners %v %v", v, l, names, err)
	})
}

// startRecoverable starts 3 members with automatic recovery after grace
// and returns the cluster and its confirmed record.
func startRecoverable(t *testing.T, grace time.Duration) (*testCluster, coord.Record) {
	t.Helper()
	tc := newCluster(t, t.TempDir(), 3, 2*time.Second)
	tc.opts.RecoveryGrace = grace
	if err := tc.lay.WriteConfig(tc.opts, tc.ports); err != nil {
		t.Fatal(err)
	}
	tc.startAll()
	tc.waitHealthy(60 * time.Second)
	_, rec := tc.waitConfirmed(30 * time.Second)
	return tc, rec
}
