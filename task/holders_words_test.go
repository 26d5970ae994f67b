package task

import (
	"context"
	"fmt"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"os"
	"path/filepath"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Review rev19b A (fixed: word-given holder addresses are probed as words): a forged /status names another cluster's serving voter as a
// *holder* (not a found voter). takeSharedHolders takes it (no record),
// observeKnownHealthy probes it with peers=false, and the answer becomes a
// first-hand knownSeen that narrowPeersWord never narrows: m1's own probes
// keep it alive for as long as that other cluster serves, long after the
// forger stopped and a record of m1's own cluster exists.
func TestAForgedHolderWordDiesWithItsForger(t *testing.T) {
	ctx := context.Background()
	other, otherID, _ := plainVoter(t)
	k := newKit(t, "m0", "m1")
	const grace = time.Minute
	k.cl.RecoveryGrace = grace
	stop := serveFakeStatus(t, fmt.Sprintf("127.0.0.1:%d", k.cl.Provider.Static[0].StatusPort), status.Member{Name: "m0", Cluster: "kit",
		Holders: []status.Holder{{Name: "x", ClientURL: other, ClusterID: otherID, Epoch: 1}}})
	m1 := k.member("m1", nil)
	clk := &fakeClock{t: time.Now()}
	m1.opts.Clock = clk
	named := func(when string) bool {
		t.Helper()
		o, err := m1.observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: known healthy %q, unlisted %q", when, o.KnownHealthy, o.UnlistedVoters)
		return slices.ContainsFunc(append(o.KnownHealthy, o.UnlistedVoters...), func(s string) bool { return strings.HasPrefix(s, "x (") })
	}
	if !named("forger answers") {
		t.Fatalf("the forged holder word is not waited on at all")
	}
	stop()
	l, err := k.co.Lock(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.co.CreateRecord(ctx, l, coord.Record{ClusterID: 0xabc, Token: "tok", Epoch: 1, Seeder: "m0"}); err != nil {
		t.Fatal(err)
	}
	m1.readRecord(t)
	for i := 1; i <= 8; i++ {
		clk.advance(grace / 2)
		if i >= 8 && named(fmt.Sprintf("%d/2 grace after the forger stopped, record of abc", i)) {
			t.Fatalf("%d/2 grace after the forged holder word, under a record of cluster abc, m1 still waits on cluster %x's voter x: its own probes keep a forged word alive", i, otherID)
		} else if i < 8 {
			named("early")
		}
	}
}

// Review rev19b B (fixed: shareHolders filters by age first, own listings
// first, newest first; peerHolders bounds each peer): shareHolders caps /status's holders at maxFoundShared by
// sorted name, before sharedHolders filters by age, and a peer's word
// adds entries by any name: a forged /status naming 16 holders whose names
// sort before a real one pushes the real holder m1 remembers out of
// m1's /status. A fresh replacement that knows that holder only from
// m1's word (the case (a) is for) sees nothing of it and may seed.
func TestPlantedHoldersDoNotCrowdOutAListedOneFromStatus(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "b", "m0", "m1")
	k.cl.RecoveryGrace = time.Minute
	static := k.cl.Provider.Static
	stopB := serveFakeStatus(t, fmt.Sprintf("127.0.0.1:%d", static[0].StatusPort), status.Member{Name: "b", Cluster: "kit", ClusterID: 0x17, Token: "tok", Epoch: 1})
	var planted []status.Holder
	for i := 0; i < maxFoundShared; i++ {
		planted = append(planted, status.Holder{Name: fmt.Sprintf("a%02d", i), ClientURL: "http://127.0.0.1:1", ClusterID: 0x99, Epoch: 1})
	}
	serveFakeStatus(t, fmt.Sprintf("127.0.0.1:%d", static[1].StatusPort), status.Member{Name: "m0", Cluster: "kit", Holders: planted})
	m1 := k.member("m1", nil)
	clk := &fakeClock{t: time.Now()}
	m1.opts.Clock = clk
	if _, err := m1.observe(ctx); err != nil {
		t.Fatal(err)
	}
	k.prov.Set(static[1:]) // Nomad collects b while it runs behind a partition
	stopB()
	clk.advance(time.Second)
	if _, err := m1.observe(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := m1.known.holders["b"]; !ok {
		t.Fatalf("m1 does not remember b at all: %v", m1.known.holders)
	}
	m1.mu.Lock()
	held := m1.known.held
	m1.mu.Unlock()
	shared := m1.sharedHolders(held, clk.Now())
	if !slices.ContainsFunc(shared, func(h status.Holder) bool { return h.Name == "b" }) {
		t.Fatalf("m1 remembers b (collected 1s ago, holding cluster 17) but its /status shares %d other names and not b", len(shared))
	}
}

// Review rev19b D (fixed: Observation.HoldersUnsaved holds the seed;
// /status's holders_error): a failed holders write (disk full, EIO, read-only remount;
// here a directory in the temporary file's way) is only logged: the
// member goes on as if the memory were durable and nothing in its
// observation or /status says it is not; a restart then seeds beside
// the collected holder as before the fix.
func TestAFailedHoldersWriteHoldsTheSeedAfterARestart(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "b", "m3")
	k.cl.RecoveryGrace = 20 * time.Second
	static := k.cl.Provider.Static
	stopB := serveFakeStatus(t, fmt.Sprintf("127.0.0.1:%d", static[0].StatusPort), status.Member{Name: "b", Cluster: "kit", ClusterID: 0x17, Token: "tok19", Epoch: 1})
	t0 := time.Now()
	m3 := k.member("m3", nil)
	clk := &fakeClock{t: t0}
	m3.opts.Clock = clk
	if err := os.MkdirAll(m3.dir.HoldersPath()+".tmp", 0o700); err != nil { // the write fails
		t.Fatal(err)
	}
	obs := func(m *Member) planner.Decision {
		o, err := m.observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		o.HoldsLock = true
		return planner.Plan(o)
	}
	obs(m3)
	k.prov.Set(static[1:])
	stopB()
	clk.advance(time.Second)
	if d := obs(m3); d.Kind != planner.Wait {
		t.Fatalf("before the restart: %s (%s)", d.Kind, d.Reason)
	}
	if st, _ := m3.health(ctx); !strings.Contains(st.HoldersError, "holders.json") {
		t.Fatalf("/status says nothing of the failed holders write: %q", st.HoldersError)
	}
	m3.halt()
	m3 = k.member("m3", nil)
	m3.opts.Clock = &fakeClock{t: t0.Add(5 * time.Second)}
	if d := obs(m3); d.Kind != planner.Wait || !strings.Contains(d.Reason, m3.dir.HoldersPath()) {
		t.Fatalf("restarted 5s after b's last listing, its holders write having failed: %s (%s), want a wait naming the file", d.Kind, d.Reason)
	}
}

// Review rev19b C (fixed: loadHolders reads non-running siblings' files
// of this cluster): an allocation Nomad replaces (a new allocation, a new member
// name) on the same host finds the previous member's directory beside
// its own, but adoptPrevious adopts only a directory with data
// (current/etcd-nomad.json): the holders file of an empty predecessor,
// the very member the file protects (about to seed), is left next door
// and not read.
func TestAReplacementOnTheSameHostReadsItsEmptyPredecessorsHolders(t *testing.T) {
	k := newKit(t, "b", "m3")
	k.cl.RecoveryGrace = time.Minute
	now := time.Now()
	prev := datadir.Dir{Root: filepath.Join(k.cl.DataDir, "m2")} // the previous allocation, gone
	if err := prev.WriteHolders(datadir.Holders{Cluster: k.cl.Name, Written: now, Holders: []datadir.Holder{{Name: "b", ClientURL: "http://127.0.0.1:1", ClusterID: 0x17, Epoch: 1, ListedAt: now}}}); err != nil {
		t.Fatal(err)
	}
	m3 := k.member("m3", nil)
	if _, ok := m3.known.holders["b"]; !ok {
		t.Fatalf("the replacement on the same host does not read its predecessor's holders (%s), listed a moment ago: %v", prev.HoldersPath(), m3.known.holders)
	}
}

// Review rev19b E (fixed: every address a word gives is probed): for a holder this member knows only from words, the first
// word fixes its address ("a word moves only the time"): a forged
// /status that names holder n first, with the record's cluster id and a
// dead address, keeps the honest peer's later word (n's real address)
// from being probed. Under a record a silent holder is only probed, so
// n, serving the record's cluster after Nomad collected it, is not found.
func TestEveryAddressAWordGivesAHolderIsProbed(t *testing.T) {
	ctx := context.Background()
	real, realID, _ := plainVoter(t)
	k := newKit(t, "m0", "m2", "m1")
	k.cl.RecoveryGrace = time.Minute
	static := k.cl.Provider.Static
	l, err := k.co.Lock(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.co.CreateRecord(ctx, l, coord.Record{ClusterID: realID, Token: "tok", Epoch: 1, Seeder: "n"}); err != nil {
		t.Fatal(err)
	}
	stopForger := serveFakeStatus(t, fmt.Sprintf("127.0.0.1:%d", static[0].StatusPort), status.Member{Name: "m0", Cluster: "kit",
		Holders: []status.Holder{{Name: "n", ClientURL: "http://127.0.0.1:1", ClusterID: realID, Epoch: 1}}})
	m1 := k.member("m1", nil)
	clk := &fakeClock{t: time.Now()}
	m1.opts.Clock = clk
	m1.readRecord(t)
	if _, err := m1.observe(ctx); err != nil {
		t.Fatal(err)
	}
	stopForger()
	serveFakeStatus(t, fmt.Sprintf("127.0.0.1:%d", static[1].StatusPort), status.Member{Name: "m2", Cluster: "kit",
		Holders: []status.Holder{{Name: "n", ClientURL: real, ClusterID: realID, Epoch: 1}}})
	clk.advance(time.Second)
	o, err := m1.observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("known healthy %q, unlisted %q", o.KnownHealthy, o.UnlistedVoters)
	if !slices.ContainsFunc(o.KnownHealthy, func(s string) bool { return strings.HasPrefix(s, "n (") }) {
		t.Fatalf("honest m2 names holder n at %s (serving cluster %x, the record's), but m1 probes only the address a forged word gave first: n not found", real, realID)
	}
}

// An honest word alone (the forger names another holder) is probed.
func TestAnHonestHolderWordAloneIsProbed(t *testing.T) {
	ctx := context.Background()
	real, realID, _ := plainVoter(t)
	k := newKit(t, "m0", "m2", "m1")
	k.cl.RecoveryGrace = time.Minute
	static := k.cl.Provider.Static
	l, err := k.co.Lock(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.co.CreateRecord(ctx, l, coord.Record{ClusterID: realID, Token: "tok", Epoch: 1, Seeder: "n"}); err != nil {
		t.Fatal(err)
	}
	stopForger := serveFakeStatus(t, fmt.Sprintf("127.0.0.1:%d", static[0].StatusPort), status.Member{Name: "m0", Cluster: "kit",
		Holders: []status.Holder{{Name: "zz", ClientURL: "http://127.0.0.1:1", ClusterID: realID, Epoch: 1}}})
	m1 := k.member("m1", nil)
	clk := &fakeClock{t: time.Now()}
	m1.opts.Clock = clk
	m1.readRecord(t)
	if _, err := m1.observe(ctx); err != nil {
		t.Fatal(err)
	}
	stopForger()
	serveFakeStatus(t, fmt.Sprintf("127.0.0.1:%d", static[1].StatusPort), status.Member{Name: "m2", Cluster: "kit",
		Holders: []status.Holder{{Name: "n", ClientURL: real, ClusterID: realID, Epoch: 1}}})
	clk.advance(time.Second)
	o, err := m1.observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("known healthy %q, unlisted %q", o.KnownHealthy, o.UnlistedVoters)
	if !slices.ContainsFunc(o.KnownHealthy, func(s string) bool { return strings.HasPrefix(s, "n (") }) {
		t.Fatalf("honest m2 names holder n at %s (serving cluster %x, the record's), but m1 probes only the address a forged word gave first: n not found", real, realID)
	}
}

// Review rev19b F: a momentary ReadMeta failure made a holder's /status
// show an empty token, and peers forgot it as a holder (listedEmpty),
// from the file too. Its /status now says so (MetaError) and peers take
// it as silent: still remembered, and counted unreachable.
func TestAHoldersUnreadableMetadataIsSilenceNotEmptiness(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "b", "m1")
	k.cl.RecoveryGrace = time.Minute
	addr := fmt.Sprintf("127.0.0.1:%d", k.cl.Provider.Static[0].StatusPort)
	stop := serveFakeStatus(t, addr, status.Member{Name: "b", Cluster: "kit", ClusterID: 0x17, Token: "tok", Epoch: 1})
	m1 := k.member("m1", nil)
	if _, err := m1.observe(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := m1.known.holders["b"]; !ok {
		t.Fatalf("b not remembered: %v", m1.known.holders)
	}
	stop()
	serveFakeStatus(t, addr, status.Member{Name: "b", Cluster: "kit", MetaError: "decode etcd-nomad.json: unexpected end of JSON input"})
	o, err := m1.observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m1.known.holders["b"]; !ok || o.Unreachable != 1 {
		t.Fatalf("b's metadata unreadable for a moment: remembered %v, unreachable %d; want b kept and counted silent", ok, o.Unreachable)
	}
}

// Its own /status says so when the metadata of its data is unreadable.
func TestUnreadableMetadataIsOnStatus(t *testing.T) {
	k := newKit(t, "m1")
	m1 := k.member("m1", nil)
	if err := os.MkdirAll(filepath.Join(m1.dir.EtcdDir(), "member", "snap"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m1.dir.Current(), datadir.MetaFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, _ := m1.health(context.Background())
	if st.MetaError == "" || st.Token != "" {
		t.Fatalf("unreadable metadata: /status meta_error %q token %q", st.MetaError, st.Token)
	}
}
