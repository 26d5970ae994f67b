package task

import (
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

func mustMeta(t *testing.T, m *Member) datadir.Meta {
	t.Helper()
	meta, err := m.dir.ReadMeta()
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// failStart runs m's start with its peer port bound: embed.StartEtcd fails
// after MarkStarted wrote StartedToken, before etcd opened the data (a
// crash before ready leaves the same metadata).
func failStart(t *testing.T, m *Member) {
	t.Helper()
	u, err := url.Parse(m.peerURL(m.self))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := m.start("m0", "", "existing", "m0="+m.peerURL(m.self)); err == nil {
		t.Fatal("the start succeeded with its peer port bound")
	} else {
		t.Logf("start: %v", err)
	}
}

// sourceQuorum is an observation of m0 (local) beside m1 and m2, healthy
// voters of the source line (token, epoch, cluster id) at revision rev.
func sourceQuorum(rec *planner.Record, local planner.Local, token string, epoch, clusterID uint64, rev int64) planner.Observation {
	voter := func(name string, id uint64) planner.PeerStatus {
		return planner.PeerStatus{Name: name, MemberID: id, Token: token, Epoch: epoch, ClusterID: clusterID, Running: true, Healthy: true, Revision: rev}
	}
	return planner.Observation{ClusterName: "kit", Self: planner.Self{Name: "m0"}, DesiredSize: 3, HoldsLock: true, RecoveryGrace: 1,
		Instances: []planner.Instance{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}, Record: rec, Local: local,
		Peers: []planner.PeerStatus{voter("m1", 2), voter("m2", 3)}}
}

// An installed restore whose start failed after MarkStarted is reported
// started (not Unstarted: 'recover -keep-running' never sets it aside
// without -accept-data-loss), and beside a quorum that came back it is
// still fenced, the fence naming 'recover -keep-running
// -accept-data-loss' (review rev14c-data R1,
// TestRev14cFailedStartMarksAnInstalledRestoreStarted).
func TestFailedStartOfAnInstalledRestoreIsFencedWithAWayOut(t *testing.T) {
	m, src := seededStopped(t)
	// What an installed restore leaves: data (here the seed's, standing
	// in for the snapshot's) whose metadata names the recorded epoch,
	// with no member id and no cluster id.
	if err := m.dir.WriteMeta(datadir.Meta{Cluster: src.Cluster, Name: "m0", Token: "tok3", Epoch: src.Epoch + 1, Stopped: true}); err != nil {
		t.Fatal(err)
	}
	if !mustMeta(t, m).Unstarted() {
		t.Fatal("the installed restore is not unstarted before any start")
	}
	failStart(t, m)
	l := m.dir.Observe(false)
	t.Logf("after the failed start: ForceNewPending %v Unstarted %v member %x cluster %x", l.ForceNewPending, l.Unstarted, l.MemberID, l.ClusterID)
	if l.Unstarted {
		t.Errorf("a start that began reports the installed restore Unstarted: 'recover -keep-running' would set it aside as a copy of the snapshot")
	}
	rec := &planner.Record{Token: "tok3", Epoch: src.Epoch + 1, Seeder: "m0", Source: planner.SnapshotSource("snap"), LastConfirmedToken: src.Token, LastConfirmedEpoch: src.Epoch}
	d := planner.Plan(sourceQuorum(rec, l, src.Token, src.Epoch, src.ClusterID, l.Revision+100))
	t.Logf("plan: %s: %s", d.Kind, d.Reason)
	if d.Kind != planner.Wait || !strings.Contains(d.Reason, "recover -keep-running -accept-data-loss") {
		t.Errorf("beside tok2's quorum the failed restore does not wait naming 'recover -keep-running -accept-data-loss': %s: %s", d.Kind, d.Reason)
	}
}

// seededStopped seeds m0, writes to it and stops it; src is its metadata.
func seededStopped(t *testing.T) (*Member, datadir.Meta) {
	t.Helper()
	k := newKit(t, "m0")
	m := k.member("m0", nil)
	cli := k.seedForTest(m)
	put(t, cli, "before", "kept")
	src := mustMeta(t, m)
	m.stopEtcd()
	return m, src
}

// failedForceNewStart seeds m0 with a write, records a recovery from its
// data (tok3, the next epoch), rewrites its metadata for it (ForceNewFrom)
// and runs its start, which fails after MarkStarted (failStart). src is
// the data's own incarnation.
func failedForceNewStart(t *testing.T) (*Member, datadir.Meta, *planner.Record) {
	t.Helper()
	m, src := seededStopped(t)
	meta := src
	meta.ForceNewFrom("tok3", src.Epoch+1)
	if err := m.dir.WriteMeta(meta); err != nil {
		t.Fatal(err)
	}
	rec := &planner.Record{Token: "tok3", Epoch: src.Epoch + 1, Seeder: "m0", Source: planner.FromData, LastConfirmedToken: src.Token, LastConfirmedEpoch: src.Epoch}
	m.mu.Lock()
	m.record = rec
	m.mu.Unlock()
	failStart(t, m)
	return m, src, rec
}

// A recovery from data whose ForceNewCluster start failed after
// MarkStarted is still fenced beside the source line's quorum, back
// meanwhile with writes past this data's revision: before the fix the
// planner started it (Rejoin) and start() used ForceNewCluster, a
// one-member epoch 3 beside tok2 (review rev14c-data R3,
// TestRev14cFailedForceNewStartIsStillFencedBesideAQuorum).
func TestFailedForceNewStartIsStillFencedBesideAQuorum(t *testing.T) {
	m, src, rec := failedForceNewStart(t)
	l := m.dir.Observe(false)
	t.Logf("after the failed start: ForceNewPending %v Unstarted %v token %s epoch %d member %x cluster %x", l.ForceNewPending, l.Unstarted, l.Token, l.Epoch, l.MemberID, l.ClusterID)
	d := planner.Plan(sourceQuorum(rec, l, src.Token, src.Epoch, src.ClusterID, l.Revision+100))
	t.Logf("plan: %s: %s", d.Kind, d.Reason)
	if d.Kind != planner.Wait || !strings.Contains(d.Reason, "recover -keep-running -accept-data-loss") {
		t.Errorf("beside a quorum of the source line the failed recovery does not wait naming 'recover -keep-running -accept-data-loss': %s: %s", d.Kind, d.Reason)
	}
}

// A recovery from data whose ForceNewCluster start failed after
// MarkStarted, then Consul lost the record: the next start, without
// ForceNewCluster, keeps the recovery's token and epoch (DropForceNew):
// the failed start may have committed the removal of the other members to
// the WAL already, and named as its source again the data would run as a
// second cluster of the source's identity (review rev15-data F2; this
// reverses rev14c-data R4's fix, which named the source again).
func TestFailedForceNewStartThenRecordLostKeepsTheRecoveryEpoch(t *testing.T) {
	m, src, _ := failedForceNewStart(t)
	pending, err := m.dir.ReadMeta()
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.record = nil // Consul lost its state
	m.mu.Unlock()
	if err := m.start("m0", "", "existing", m.initialCluster("m0", nil)); err != nil {
		t.Fatal(err)
	}
	m.waitReady(t)
	if _, forced := m.running(); forced {
		t.Fatal("started with ForceNewCluster without a record naming the recovery")
	}
	after := m.waitMeta(t, func(mt datadir.Meta) bool { return mt.ClusterID != 0 })
	if after.Token != pending.Token || after.Epoch != pending.Epoch || after.Token == src.Token {
		t.Errorf("metadata after the start without ForceNewCluster: token %s epoch %d cluster %x, want the recovery's token %s epoch %d, never the source's %s epoch %d",
			after.Token, after.Epoch, after.ClusterID, pending.Token, pending.Epoch, src.Token, src.Epoch)
	}
}
