package task

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/etcd-nomad/etcd-nomad/task/backup"
)

// recoverFromData is the decision a lone survivor of epoch 1 acts on.
func recoverFromData(name string) planner.Decision {
	return planner.Decision{Kind: planner.RecoverQuorum, Name: name, From: planner.FromData,
		Record: &planner.Record{Token: coord.NewToken(), Epoch: 2, Seeder: name, Source: planner.FromData}}
}

// Invariant 4, "the next epoch is recorded before anyone starts": when the
// record update fails, etcd must not have been started with
// ForceNewCluster and the data must still say epoch 1 with no ForceNew flag
// left for a later start to honour. (Recorded after the start, a crash
// between the two leaves the only copy at epoch 2 while the record says 1:
// it is then set aside.)
func TestRecoveryRecordsTheNextEpochBeforeForceNewCluster(t *testing.T) {
	k := newKit(t, "m0")
	fc := &faultyCoord{Coordinator: k.co}
	m := k.member("m0", fc)
	cli := k.seedForTest(m)
	put(t, cli, "survivor", "kept")
	before, err := m.dir.ReadMeta()
	if err != nil {
		t.Fatal(err)
	}

	fc.updates = nil // the seed's confirmation
	fc.failUpdate = true
	m.lockForTest(t)
	d := recoverFromData("m0")
	err = m.act(context.Background(), planner.Observation{}, d)
	if !errors.Is(err, errInjected) {
		t.Fatalf("recovery with a failing record update returned %v, want the injected failure", err)
	}
	if len(fc.updates) != 1 || fc.updates[0].Epoch != 2 {
		t.Fatalf("record updates attempted: %+v, want one of epoch 2", fc.updates)
	}
	if _, force := m.running(); force {
		t.Fatal("etcd was started with ForceNewCluster although the next epoch was not recorded")
	}
	meta, err := m.dir.ReadMeta()
	if err != nil {
		t.Fatal(err)
	}
	if meta.Epoch != 1 || meta.Token != before.Token || meta.ForceNew || meta.ClusterID != before.ClusterID {
		t.Fatalf("metadata after the failed recovery: %+v, want it untouched: %+v", meta, before)
	}
	rec, err := k.co.Record(context.Background())
	if err != nil || rec.Epoch != 1 || rec.ClusterID == 0 {
		t.Fatalf("record after the failed recovery: %+v (%v), want epoch 1 confirmed", rec, err)
	}
	m.releaseLock(context.Background())

	// The same decision with the record written: epoch 2 from this data.
	fc.failUpdate = false
	m.lockForTest(t)
	if err := m.act(context.Background(), planner.Observation{}, d); err != nil {
		t.Fatalf("recovery: %v", err)
	}
	m.releaseLock(context.Background())
	rec, err = k.co.Record(context.Background())
	if err != nil || rec.Epoch != 2 || rec.Token != d.Record.Token || rec.ClusterID != 0 || rec.Source != planner.FromData {
		t.Fatalf("record after the recovery: %+v (%v), want epoch 2 of token %s, unconfirmed, from data", rec, err, d.Record.Token)
	}
	if run, force := m.running(); !run || !force {
		t.Fatalf("after the recovery etcd running=%v force_new_cluster=%v, want both", run, force)
	}
	m.waitReady(t)
	meta = m.waitMeta(t, func(mt datadir.Meta) bool { return !mt.ForceNew })
	if meta.Epoch != 2 || meta.Token != d.Record.Token || meta.ClusterID == 0 {
		t.Fatalf("metadata after the recovery: %+v, want epoch 2 of the new token with its cluster id", meta)
	}
	if v := getVal(t, k.client(m), "survivor"); v != "kept" {
		t.Fatalf("survivor's key after the recovery: %q, want %q", v, "kept")
	}
}

// A member that dies right after recording the next epoch (before its
// restart) resumes the recovery from its own data when it comes back: the
// data survives and the new epoch is confirmed.
func TestRecoveryCrashAfterRecordResumesFromTheData(t *testing.T) {
	k := newKit(t, "m0")
	fc := &faultyCoord{Coordinator: k.co}
	m := k.member("m0", fc)
	cli := k.seedForTest(m)
	put(t, cli, "survivor", "kept")

	fc.crashAfterUpdate = true
	m.lockForTest(t)
	d := recoverFromData("m0")
	if err := m.act(context.Background(), planner.Observation{}, d); !errors.Is(err, errInjected) {
		t.Fatalf("recovery that crashes after the record: %v, want the injected failure", err)
	}
	m.halt() // the process dies

	rec, err := k.co.Record(context.Background())
	if err != nil || rec.Epoch != 2 || rec.ClusterID != 0 || rec.Seeder != "m0" {
		t.Fatalf("record after the crash: %+v (%v), want epoch 2 recorded by m0, unconfirmed", rec, err)
	}
	if meta, err := m.dir.ReadMeta(); err != nil || meta.Epoch != 1 {
		t.Fatalf("metadata after the crash: %+v (%v), want epoch 1 (the restart has not happened)", meta, err)
	}

	// The restarted process runs the whole loop.
	again := k.member("m0", nil)
	stop := runLoop(t, again)
	defer stop()
	var last coord.Record
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		last, _ = k.co.Record(context.Background())
		if last.Epoch == 2 && last.ClusterID != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recovery never confirmed after the restart; record %+v, aside %v, decision %s", last, again.asideEntries(t), again.reason())
		}
	}
	if aside := again.asideEntries(t); len(aside) != 0 {
		t.Fatalf("data was set aside after the restart: %v", aside)
	}
	if v := getVal(t, k.client(again), "survivor"); v != "kept" {
		t.Fatalf("survivor's key after the resumed recovery: %q, want %q", v, "kept")
	}
}

// runLoop runs m's supervisor loop until the returned stop is called (also
// at the end of the test); stop waits for Run to return.
func runLoop(t *testing.T, m *Member) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
			// Run's shutdown closed etcd; halt must not close it again.
			m.proc.Take()
		case <-time.After(15 * time.Second):
			t.Errorf("member %s did not stop within 15s", m.opts.Name)
		}
	}
	t.Cleanup(stop)
	return stop
}

// Invariants 4 and 7 for a recovery from a snapshot: the next epoch is
// recorded before the data is set aside for the snapshot's, and the data is
// renamed, never deleted.
func TestRecoveryFromSnapshotRecordsBeforeReplacingTheData(t *testing.T) {
	k := newKit(t, "m0")
	store, err := file.New(filepath.Join(k.dir, "snapshots"), k.cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	fc := &faultyCoord{Coordinator: k.co}
	m := k.memberWith("m0", fc, &backup.Snapshots{Store: store})
	cli := k.seedForTest(m)
	put(t, cli, "saved", "in-snapshot")
	rec, _ := k.co.Record(context.Background())
	ctx := context.Background()
	snap, err := snapshot.Save(ctx, snapshot.From{Endpoint: m.clientURL(m.self), SpoolDir: k.dir}, store, snapshot.Source{Cluster: k.cl.Name, ClusterID: strconv.FormatUint(rec.ClusterID, 16), Epoch: 1}, snapshot.Encryption{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	put(t, cli, "after", "only-in-data")
	before, _ := m.dir.ReadMeta()

	d := planner.Decision{Kind: planner.RecoverQuorum, Name: "m0", From: planner.FromSnapshot, Snapshot: snap.Name,
		Record: &planner.Record{Token: coord.NewToken(), Epoch: 2, Seeder: "m0", Source: planner.SnapshotSource(snap.Name)}}
	fc.failUpdate = true
	m.lockForTest(t)
	if err := m.act(ctx, planner.Observation{}, d); !errors.Is(err, errInjected) {
		t.Fatalf("recovery from a snapshot with a failing record update: %v, want the injected failure", err)
	}
	m.releaseLock(ctx)
	if aside := m.asideEntries(t); len(aside) != 0 {
		t.Fatalf("data set aside although the next epoch was not recorded: %v", aside)
	}
	if meta, err := m.dir.ReadMeta(); err != nil || meta != before {
		t.Fatalf("metadata after the failed recovery: %+v (%v), want %+v", meta, err, before)
	}

	fc.failUpdate = false
	m.lockForTest(t)
	if err := m.act(ctx, planner.Observation{}, d); err != nil {
		t.Fatalf("recovery from snapshot: %v", err)
	}
	m.releaseLock(ctx)
	if run, _ := m.running(); run {
		t.Fatal("etcd still runs the old data after the snapshot was installed")
	}
	aside := m.asideEntries(t)
	if len(aside) != 1 || !strings.HasSuffix(aside[0], "-recovered-over") {
		t.Fatalf("aside after the recovery: %v, want one recovered-over entry", aside)
	}
	old := filepath.Join(m.dir.AsideDir(), aside[0])
	if b, err := os.ReadFile(filepath.Join(old, datadir.MetaFile)); err != nil || !strings.Contains(string(b), before.Token) {
		t.Fatalf("the old data's metadata was not kept aside: %v", err)
	}
	if ents, err := os.ReadDir(filepath.Join(old, "etcd", "member", "wal")); err != nil || len(ents) == 0 {
		t.Fatalf("the old data's WAL was not kept aside: %v", err)
	}
	meta, err := m.dir.ReadMeta()
	if err != nil || meta.Epoch != 2 || meta.Token != d.Record.Token || meta.Name != "m0" {
		t.Fatalf("metadata after the install: %+v (%v), want epoch 2 of the new token", meta, err)
	}
	if rec, err := k.co.Record(ctx); err != nil || rec.Epoch != 2 || planner.Source(rec.Source) != d.Record.Source {
		t.Fatalf("record after the recovery: %+v (%v)", rec, err)
	}

	// The next loop starts the installed data (Rejoin).
	if err := m.act(ctx, planner.Observation{}, planner.Decision{Kind: planner.Rejoin, Name: "m0"}); err != nil {
		t.Fatal(err)
	}
	m.waitReady(t)
	cli2 := k.client(m)
	if v := getVal(t, cli2, "saved"); v != "in-snapshot" {
		t.Fatalf("key from the snapshot: %q", v)
	}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := cli2.Get(gctx, "saved")
	cancel()
	if err != nil || resp.Header.Revision < 1_000_000 {
		t.Fatalf("revision after the restore: %v (%v), want bumped past 1000000 so watchers never go back", resp, err)
	}
}

// Invariant 7: setting data aside renames it, with the etcd data and the
// metadata intact, and stops etcd first.
func TestSetAsideRenamesTheDataNeverDeletes(t *testing.T) {
	k := newKit(t, "m0")
	m := k.member("m0", nil)
	cli := k.seedForTest(m)
	put(t, cli, "k", "v")
	before, _ := m.dir.ReadMeta()

	d := planner.Decision{Kind: planner.SetAside, Name: "m0", Aside: planner.AsideRemoved, Reason: "member 1234 is no longer in the cluster: stopping and setting its data aside"}
	if err := m.act(context.Background(), planner.Observation{}, d); err != nil {
		t.Fatal(err)
	}
	if run, _ := m.running(); run {
		t.Fatal("etcd still runs after its data was set aside")
	}
	if _, err := os.Stat(m.dir.Current()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("current/ still exists after set aside: %v", err)
	}
	aside := m.asideEntries(t)
	if len(aside) != 1 || !strings.HasSuffix(aside[0], "-removed") {
		t.Fatalf("aside: %v, want one entry tagged removed", aside)
	}
	moved := datadir.Dir{Root: t.TempDir()}
	if err := os.Rename(filepath.Join(m.dir.AsideDir(), aside[0]), moved.Current()); err != nil {
		t.Fatal(err)
	}
	if meta, err := moved.ReadMeta(); err != nil || meta != before {
		t.Fatalf("metadata set aside: %+v (%v), want %+v", meta, err, before)
	}
	if !moved.HasEtcdData() || moved.Revision() < 2 {
		t.Fatalf("the set-aside data lost etcd's WAL or backend (revision %d)", moved.Revision())
	}
}

// Invariant 1 at the action: a seed whose create-only record write fails
// (another member seeded meanwhile) starts nothing and leaves no metadata
// (it wrote its own first, so that /status named the seed meanwhile).
func TestSeedStartsNothingWhenTheRecordExists(t *testing.T) {
	k := newKit(t, "m0", "m1")
	m0 := k.member("m0", nil)
	k.seedForTest(m0)

	m1 := k.member("m1", nil)
	m1.lockForTest(t)
	m1.mu.Lock()
	m1.record = nil // observed before m0's record appeared
	m1.mu.Unlock()
	d := planner.Decision{Kind: planner.Seed, Name: "m1", Record: &planner.Record{Token: coord.NewToken(), Epoch: 1, Seeder: "m1"}}
	err := m1.act(context.Background(), planner.Observation{}, d)
	if !errors.Is(err, coord.ErrRecordExists) {
		t.Fatalf("second seed: %v, want ErrRecordExists", err)
	}
	if run, _ := m1.running(); run {
		t.Fatal("a second seeder started etcd")
	}
	if _, err := m1.dir.ReadMeta(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the second seeder wrote metadata: %v", err)
	}
}

// hookCoord is a real coordinator that runs beforeCreate just before a
// record is created.
type hookCoord struct {
	coord.Coordinator
	beforeCreate func()
}

func (h *hookCoord) CreateRecord(ctx context.Context, l coord.Lock, r coord.Record) (coord.Record, error) {
	h.beforeCreate()
	return h.Coordinator.CreateRecord(ctx, l, r)
}

// Invariant 1: a seed names its incarnation on /status before its record
// exists. Otherwise a peer observing between the record's creation and the
// metadata, after Consul lost its state, sees no record and no seed here
// and seeds a second epoch 1 (sim seed 30200).
func TestSeedIsVisibleBeforeItsRecord(t *testing.T) {
	k := newKit(t, "m0")
	var seen status.Member
	var m0 *Member
	m0 = k.member("m0", &hookCoord{Coordinator: k.co, beforeCreate: func() { seen, _ = m0.health(context.Background()) }})
	m0.lockForTest(t)
	tok := coord.NewToken()
	d := planner.Decision{Kind: planner.Seed, Name: "m0", Record: &planner.Record{Token: tok, Epoch: 1, Seeder: "m0"}}
	if err := m0.act(context.Background(), planner.Observation{}, d); err != nil {
		t.Fatalf("seed: %v", err)
	}
	if seen.Token != tok || seen.Epoch != 1 {
		t.Fatalf("/status while the record was created named token %q epoch %d; want the seed's %q epoch 1", seen.Token, seen.Epoch, tok)
	}
	if st, _ := m0.health(context.Background()); st.Token != tok {
		t.Fatalf("/status after the seed names token %q, want %q", st.Token, tok)
	}
}

// joinLearner seeds m0 and adds m1 as a learner; it returns both and a
// client on m0.
func joinLearner(t *testing.T, k *kit) (*Member, *Member, *clientv3.Client) {
	t.Helper()
	m0 := k.member("m0", nil)
	cli := k.seedForTest(m0)
	m1 := k.member("m1", nil)
	m1.lockForTest(t)
	rec := m1.record
	o := planner.Observation{Record: &planner.Record{ClusterID: rec.ClusterID, Token: rec.Token, Epoch: rec.Epoch, Seeder: rec.Seeder}}
	if err := m1.act(context.Background(), o, planner.Decision{Kind: planner.JoinAsLearner, Name: "m1"}); err != nil {
		t.Fatalf("join as learner: %v", err)
	}
	m1.releaseLock(context.Background())
	return m0, m1, cli
}

// memberList reads the membership through cli.
func memberList(t *testing.T, cli *clientv3.Client) *clientv3.MemberListResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	return resp
}

// Invariant 3: a new member is added as a learner (never as a voter) and
// becomes a voter only by a promotion; while it is a learner its /health
// answers 503 naming the role, and a member without the lock changes
// nothing.
func TestJoinAddsALearnerThenPromotes(t *testing.T) {
	k := newKit(t, "m0", "m1", "m2")
	m0, m1, cli := joinLearner(t, k)
	resp := memberList(t, cli)
	if len(resp.Members) != 2 {
		t.Fatalf("members after the join: %v", resp.Members)
	}
	var learnerID uint64
	for _, mem := range resp.Members {
		if mem.PeerURLs[0] == m1.peerURL(m1.self) {
			if !mem.IsLearner {
				t.Fatalf("m1 was added as a voter: %+v", mem)
			}
			learnerID = mem.ID
		}
	}
	if learnerID == 0 {
		t.Fatalf("m1 is not in the membership: %v", resp.Members)
	}
	m1.waitReady(t)
	meta := m1.waitMeta(t, func(mt datadir.Meta) bool { return mt.MemberID != 0 })
	if meta.MemberID != learnerID || meta.Epoch != 1 {
		t.Fatalf("m1's metadata %+v, want member %x of epoch 1", meta, learnerID)
	}

	// A learner is not healthy: Consul and Nomad's update block must not
	// count it as a voter.
	if err := m1.serveStatus(); err != nil {
		t.Fatal(err)
	}
	code, body := httpGet(t, m1.statusURL(m1.self)+"/health")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "learner") {
		t.Fatalf("/health of a learner: %d %q, want 503 naming the learner", code, body)
	}

	// A second join while the learner is in flight is refused by etcd's one
	// learner limit or never tried; either way, still one learner.
	m2 := k.member("m2", nil)
	if err := m2.joinAsLearner(context.Background(), planner.Observation{Record: &planner.Record{Token: meta.Token, Epoch: 1}}, planner.Decision{Name: "m2"}); !errors.Is(err, coord.ErrLockLost) {
		t.Fatalf("join without the lock: %v, want ErrLockLost", err)
	}
	if err := m0.promote(context.Background(), planner.Decision{MemberID: learnerID}); !errors.Is(err, coord.ErrLockLost) {
		t.Fatalf("promote without the lock: %v, want ErrLockLost", err)
	}
	if n := len(memberList(t, cli).Members); n != 2 {
		t.Fatalf("membership changed without the lock: %d members", n)
	}

	m1.lockForTest(t)
	var err error
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err = m1.act(context.Background(), planner.Observation{}, planner.Decision{Kind: planner.Promote, Name: "m1", MemberID: learnerID}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("promote: %v", err)
		}
	}
	m1.releaseLock(context.Background())
	for _, mem := range memberList(t, cli).Members {
		if mem.IsLearner {
			t.Fatalf("still a learner after the promotion: %+v", mem)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, body = httpGet(t, m1.statusURL(m1.self)+"/health"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health of the promoted voter: %d %q", code, body)
		}
	}
	if !strings.Contains(body, "role=voter") {
		t.Fatalf("/health of the promoted voter %q does not name its role", body)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 3 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A removal is made only under the lock, and removes the named member.
func TestRemoveMemberUnderTheLock(t *testing.T) {
	k := newKit(t, "m0", "m1")
	m0, m1, cli := joinLearner(t, k)
	m1.waitReady(t)
	id := uint64(m1.proc.Server().Server.MemberID())
	d := planner.Decision{Kind: planner.RemoveMember, Name: "m0", MemberID: id, Reason: "member m1 absent"}
	if err := m0.act(context.Background(), planner.Observation{}, d); !errors.Is(err, coord.ErrLockLost) {
		t.Fatalf("removal without the lock: %v, want ErrLockLost", err)
	}
	if n := len(memberList(t, cli).Members); n != 2 {
		t.Fatalf("a removal without the lock changed the membership: %d members", n)
	}
	m0.lockForTest(t)
	if err := m0.act(context.Background(), planner.Observation{}, d); err != nil {
		t.Fatalf("removal: %v", err)
	}
	m0.releaseLock(context.Background())
	resp := memberList(t, cli)
	if len(resp.Members) != 1 || resp.Members[0].ID == id {
		t.Fatalf("members after removing %x: %v", id, resp.Members)
	}
	// The removed member's etcd notices and stops on its own.
	select {
	case <-m1.proc.Stopped():
	case <-time.After(15 * time.Second):
		t.Fatal("the removed member's etcd never stopped")
	}
}

// A stale leader is removed only after this member took its leadership
// over: the remover leads the moment the removal returns, with no election
// to wait for. A removed leader steps down (etcd 3.6) or just stops (a
// plain etcd 3.5 member being migrated in); either way the others waited
// an election timeout with writes refused, and CI's migrate test saw a
// write fail twice.
func TestStaleLeaderHandsOverBeforeRemoval(t *testing.T) {
	k := newKit(t, "m0", "m1")
	m0, m1, cli := joinLearner(t, k)
	m1.waitReady(t)
	id0, id1 := uint64(m0.proc.Server().Server.MemberID()), uint64(m1.proc.Server().Server.MemberID())
	m0.lockForTest(t)
	defer m0.releaseLock(context.Background())
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := m0.act(context.Background(), planner.Observation{}, planner.Decision{Kind: planner.Promote, Name: "m0", MemberID: id1})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("promote m1: %v", err)
		}
	}
	// m1 leads (etcd's own transfer, sent to the leader m0).
	for deadline := time.Now().Add(15 * time.Second); uint64(m1.proc.Server().Server.Leader()) != id1; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := cli.MoveLeader(ctx, id1)
		cancel()
		if time.Now().After(deadline) {
			t.Fatalf("m1 never led: %v", err)
		}
	}
	o := planner.Observation{SelfID: id0, LeaderID: id1, Running: true, MembersKnown: true, Members: []planner.Member{
		{ID: id0, Name: "m0", Healthy: true}, {ID: id1, Name: "m1", Healthy: true},
	}}
	d := planner.Decision{Kind: planner.RemoveMember, Name: "m0", MemberID: id1, Reason: "member m1 absent"}
	// etcd refuses the removal until its new leader has been connected to
	// the rest for 5 s ("unhealthy cluster"): the loop tries again.
	// Each try observes the leader afresh, as the member's loop does: under
	// the race detector leadership can move back to m0 before the removal
	// (then there is nothing to hand over). A try applied whose answer was
	// lost (m1 answered for itself and stopped) finds m1 gone on the next.
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		o.LeaderID = uint64(m0.proc.Server().Server.Leader())
		err := m0.act(context.Background(), o, d)
		if err == nil {
			break
		}
		t.Logf("remove m1 (leader %x): %v", o.LeaderID, err)
		if time.Now().After(deadline) {
			t.Fatalf("remove the stale leader: %v", err)
		}
	}
	if l := uint64(m0.proc.Server().Server.Leader()); l != id0 {
		t.Fatalf("right after removing the leader m1, m0 sees leader %x, want itself (%x): the removal did not hand leadership over first", l, id0)
	}
	if resp := memberList(t, cli); len(resp.Members) != 1 || resp.Members[0].ID != id0 {
		t.Fatalf("members after the removal: %v", resp.Members)
	}
	// The same removal again, as after a try whose answer was lost: the
	// member is gone, which is what the decision asks for.
	o.LeaderID = id0
	if err := m0.act(context.Background(), o, d); err != nil {
		t.Fatalf("removing a member already removed: %v, want done", err)
	}
}
