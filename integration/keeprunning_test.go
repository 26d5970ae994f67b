package integration_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// plantRecord writes r over the record under the cluster lock (as Consul
// restoring an old snapshot of its KV would), retrying while the members'
// writes race it.
func (tc *testCluster) plantRecord(r coord.Record) coord.Record {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	co, err := backends.Coordinator(tc.config())
	if err != nil {
		tc.t.Fatal(err)
	}
	for {
		l, err := co.Lock(ctx, "test-plant")
		if err != nil {
			tc.t.Fatal(err)
		}
		cur, err := co.Record(ctx)
		if err != nil {
			tc.t.Fatal(err)
		}
		r.Index = cur.Index
		got, err := co.UpdateRecord(ctx, l, r)
		l.Unlock(context.Background())
		if err == nil {
			return got
		}
		if !errors.Is(err, coord.ErrConflict) {
			tc.t.Fatal(err)
		}
	}
}

// Review of the operator model (session 13, F4): a healthy cluster beside
// an unconfirmed restore record of the next epoch (an operator's restore
// recorded while the old cluster regained its quorum, or Consul bringing
// it back) waits for good: the seeder never restores beside a quorum, the
// others keep their data, and 'recover' refuses beside a quorum; only
// deleting the Consul key freed it. Every member's wait now names 'recover
// -keep-running', which records the running cluster in its place (fenced:
// a quorum of its healthy voters answers); no key is lost. With no quorum
// answering it refuses and records nothing.
func TestKeepRunningFreesAClusterBesideARecordThatNeverStarted(t *testing.T) {
	tier.Starts(t, "etcd-nomad member processes")
	tc := newCluster(t, t.TempDir(), 3, 2*time.Second)
	tc.startAll()
	tc.waitHealthy(60 * time.Second)
	_, before := tc.waitConfirmed(30 * time.Second)
	putKeys(t, tc.client(), "acked", 100)

	restore := coord.Record{Token: "planted-restore-token", Epoch: before.Epoch + 1, Seeder: "m0", Source: "snapshot:gone-snapshot",
		LastConfirmedToken: before.Token, LastConfirmedEpoch: before.Epoch, Operator: true, SourceRevision: 2, AcceptedRevision: 2}
	tc.plantRecord(restore)
	waitFor(t, 60*time.Second, "every member waits for an operator, naming recover -keep-running", func() (bool, string) {
		st, err := tc.status()
		if err != nil {
			return false, err.Error()
		}
		ok := len(st.Members) == 3
		for _, m := range st.Members {
			ok = ok && m.Healthy && strings.Contains(m.Reason, "recover -keep-running")
		}
		return ok, status.Format(st)
	})
	if code, out := tc.cli("recover", "-from", "m0"); code == 0 || !strings.Contains(out, "answers as a healthy voter") {
		t.Fatalf("recover -from m0 beside a quorum: exit %d: %s", code, out)
	}
	code, out := tc.cli("recover", "-keep-running")
	if code != 0 {
		t.Fatalf("recover -keep-running: exit %d: %s", code, out)
	}
	t.Logf("recover -keep-running: %s", out)
	if rec := tc.record(); rec.Token != before.Token || rec.Epoch != before.Epoch || rec.ClusterID != before.ClusterID || rec.Operator {
		t.Fatalf("record after recover -keep-running: %+v, want the running cluster's %+v", rec, before)
	}
	waitFor(t, 60*time.Second, "every member healthy, none waiting for an operator", func() (bool, string) {
		st, err := tc.status()
		if err != nil {
			return false, err.Error()
		}
		ok := len(st.Members) == 3
		for _, m := range st.Members {
			ok = ok && m.Healthy && !strings.Contains(m.Reason, "operator")
		}
		return ok, status.Format(st)
	})
	c := tc.client()
	checkKeys(t, c, "acked", 100)
	putKeys(t, c, "after", 10)

	// Again, now with no quorum: refused, nothing recorded.
	planted := tc.plantRecord(restore)
	for _, n := range []string{"m1", "m2"} {
		if err := tc.sup.Stop(n, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "m0 without a quorum", func() (bool, string) {
		st, err := tc.status()
		if err != nil {
			return false, err.Error()
		}
		for _, m := range st.Members {
			if m.Healthy {
				return false, status.Format(st)
			}
		}
		return true, ""
	})
	if code, out := tc.cli("recover", "-keep-running"); code == 0 || !strings.Contains(out, "no quorum of a running cluster answers") {
		t.Fatalf("recover -keep-running without a quorum: exit %d: %s", code, out)
	}
	if rec := tc.record(); rec.Index != planted.Index || rec.Token != restore.Token {
		t.Fatalf("record after a refused recover -keep-running: %+v, want the planted %+v", rec, planted)
	}
}
