package task

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcd-nomad/etcd-nomad/datadir"

	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Review rev19f 1: the holders write fails while b is remembered, the disk is
// fixed, b lapses: the view equals what the file last held, so saveHolders
// never writes again and holdersErr (HoldersUnsaved) stays set forever.
func TestAFixedDiskFreesTheHoldersUnsavedWait(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "b", "m3")
	k.cl.RecoveryGrace = 20 * time.Second
	static := k.cl.Provider.Static
	addr := fmt.Sprintf("127.0.0.1:%d", static[0].StatusPort)
	stopB := serveFakeStatus(t, addr, status.Member{Name: "b", Cluster: "kit"})
	m3 := k.member("m3", nil)
	clk := &fakeClock{t: time.Now()}
	m3.opts.Clock = clk
	obs := func() planner.Observation {
		o, err := m3.observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		o.HoldsLock = true
		return o
	}
	obs() // empty b: an empty holders file is written
	if !m3.known.holdersWritten {
		t.Fatalf("no first write")
	}
	stopB()
	stopB = serveFakeStatus(t, addr, status.Member{Name: "b", Cluster: "kit", ClusterID: 0x17, Token: "tok", Epoch: 1})
	if err := os.MkdirAll(m3.dir.HoldersPath()+".tmp", 0o700); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Second)
	if o := obs(); o.HoldersUnsaved == "" {
		t.Fatalf("write did not fail")
	}
	k.prov.Set(static[1:])
	stopB()
	clk.advance(30 * time.Second) // b has lapsed, disk still failing
	obs()
	if err := os.RemoveAll(m3.dir.HoldersPath() + ".tmp"); err != nil { // the operator fixes the disk
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		clk.advance(30 * time.Second)
		o := obs()
		if i == 4 && o.HoldersUnsaved != "" {
			d := planner.Plan(o)
			t.Fatalf("disk writable again, holders %v: still %q; plan %s awaits operator %v: %s", m3.known.holders, o.HoldersUnsaved, d.Kind, d.AwaitsOperator, d.Reason)
		}
	}
}

// Review rev19f 4: the data directory's WAL listing fails for a moment (EMFILE,
// EIO; here wal is not a directory) on a stopped holder whose metadata
// reads fine: HasEtcdData says false, /status gives no token and no
// meta_error, and peers take the holder as empty (rev19b F's class).
func TestAnUnreadableWALIsNotEmptinessOnStatus(t *testing.T) {
	k := newKit(t, "m1")
	m1 := k.member("m1", nil)
	if err := m1.dir.WriteMeta(datadir.Meta{Cluster: "kit", Name: "m1", Token: "tok", Epoch: 1, ClusterID: 0x17, MemberID: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(m1.dir.EtcdDir(), "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m1.dir.EtcdDir(), "member", "wal"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, _ := m1.health(context.Background())
	if st.Token == "" && st.MetaError == "" {
		t.Fatalf("stopped holder, metadata of token tok, its WAL listing failing: /status token %q meta_error %q (looks empty)", st.Token, st.MetaError)
	}
}
