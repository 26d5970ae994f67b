package task

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Review rev18f F3, the case shared holders do not close: m3 saw b hold
// data of epoch 1 while the provider listed it; Nomad collected b while
// it ran behind a partition, and every member that remembered it (m3
// here; its peers on the same side with it) restarted at once, data
// kept. Before, the memory lived in the process: the restarted m3 saw
// "no record and no data anywhere" and seeded a second epoch 1 beside
// b. The memory is now a file beside the member's data
// (datadir.HoldersFile), written when it changes and read back by New:
// the restarted m3 names the silent b until the recovery grace has
// passed since b's last listing, then seeds. Without the file (the
// reverted fix, or a directory lost with the data) it seeds at once.
func TestRememberedHoldersSurviveARestart(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "b", "m3")
	const grace = 20 * time.Second
	k.cl.RecoveryGrace = grace
	static := k.cl.Provider.Static
	stopB := serveFakeStatus(t, fmt.Sprintf("127.0.0.1:%d", static[0].StatusPort), status.Member{Name: "b", Cluster: "kit", ClusterID: 0x17, Token: "tok19", Epoch: 1})
	t0 := time.Now().Add(-time.Second)
	start := func(what string, at time.Time) (*Member, *fakeClock) {
		t.Helper()
		m := k.member("m3", nil)
		clk := &fakeClock{t: at}
		m.opts.Clock = clk
		return m, clk
	}
	observe := func(m *Member, what string) (planner.Observation, planner.Decision) {
		t.Helper()
		o, err := m.observe(ctx)
		if err != nil {
			t.Fatalf("%s: m3 observes: %v", what, err)
		}
		o.HoldsLock = true
		return o, planner.Plan(o)
	}
	m3, clk := start("first start", t0)
	if _, d := observe(m3, "b listed"); d.Kind != planner.Wait || !strings.Contains(d.Reason, "peer b holds data") {
		t.Fatalf("beside b listed with data: %s (%s), want a wait for b", d.Kind, d.Reason)
	}
	// Nomad collects b while it runs behind a partition: unlisted, silent.
	k.prov.Set(static[1:])
	stopB()
	clk.advance(time.Second)
	if o, d := observe(m3, "b collected"); len(o.UnlistedVoters) != 1 || d.Kind != planner.Wait {
		t.Fatalf("b collected: unlisted voters %q, %s (%s), want a wait naming b", o.UnlistedVoters, d.Kind, d.Reason)
	}
	file, err := m3.dir.ReadHolders()
	if err != nil || len(file.Holders) != 1 || file.Holders[0].Name != "b" || file.Holders[0].Listed || file.Holders[0].ClusterID != 0x17 || !file.Holders[0].ListedAt.Equal(t0) {
		t.Fatalf("holders file %+v (%v), want b of cluster 17, listed at t0, unlisted", file, err)
	}
	raw, err := os.ReadFile(m3.dir.HoldersPath())
	if err != nil {
		t.Fatal(err)
	}
	// The restart (process and status server stopped, a new Member on the
	// same directory), 5 s after b's last listing.
	restart := func(what string, at time.Time) (*Member, *fakeClock) {
		t.Helper()
		m3.halt()
		m, c := start(what, at)
		m3 = m
		return m, c
	}
	m3, clk = restart("restart", t0.Add(5*time.Second))
	if _, ok := m3.known.holders["b"]; !ok {
		t.Fatalf("restarted: holders %+v, want b read back", m3.known.holders)
	}
	o, d := observe(m3, "restarted")
	if len(o.UnlistedVoters) != 1 || !strings.Contains(o.UnlistedVoters[0], "b (held data of epoch 1, cluster 17") || d.Kind != planner.Wait {
		t.Fatalf("restarted beside the silent b, no record: unlisted voters %q, %s (%s), want a wait naming b", o.UnlistedVoters, d.Kind, d.Reason)
	}
	if h := m3.sharedHolders(m3.known.held, clk.Now()); len(h) != 1 || h[0].Name != "b" || h[0].AgoMillis != 5000 {
		t.Fatalf("restarted m3's /status holders %+v, want b listed 5s ago", h)
	}
	// The grace after b's last listing: forgotten, and the file with it.
	clk.advance(grace - 5*time.Second)
	if o, d := observe(m3, "the grace after b's listing"); len(o.UnlistedVoters) != 0 || d.Kind != planner.Seed {
		t.Fatalf("the grace after b's listing: unlisted voters %q, %s (%s), want a seed", o.UnlistedVoters, d.Kind, d.Reason)
	}
	if file, err := m3.dir.ReadHolders(); err != nil || len(file.Holders) != 0 {
		t.Fatalf("holders file after the grace %+v (%v), want none", file, err)
	}

	// Without the file (the fix reverted, or the directory lost): the
	// restart 5 s after b's listing seeds at once.
	if err := os.Remove(m3.dir.HoldersPath()); err != nil {
		t.Fatal(err)
	}
	m3, _ = restart("restart without the file", t0.Add(5*time.Second))
	if o, d := observe(m3, "restarted without the file"); len(o.UnlistedVoters) != 0 || d.Kind != planner.Seed {
		t.Fatalf("restarted without the file: unlisted voters %q, %s (%s), want a seed (what the file prevents)", o.UnlistedVoters, d.Kind, d.Reason)
	}

	// A file that cannot be read is never "no holders": m3 waits until
	// the grace has passed since the file was last written, and keeps a
	// copy of it.
	written := t0.Add(time.Second)
	if err := os.WriteFile(m3.dir.HoldersPath(), raw[:len(raw)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(m3.dir.HoldersPath(), written, written); err != nil {
		t.Fatal(err)
	}
	m3, clk = restart("restart with a torn file", t0.Add(5*time.Second))
	o, d = observe(m3, "restarted with a torn file")
	if len(o.UnlistedVoters) != 1 || !strings.Contains(o.UnlistedVoters[0], "unreadable holders file") || d.Kind != planner.Wait {
		t.Fatalf("restarted with a torn holders file: unlisted voters %q, %s (%s), want a wait naming the file", o.UnlistedVoters, d.Kind, d.Reason)
	}
	if b, err := os.ReadFile(m3.dir.HoldersPath() + ".unreadable"); err != nil || len(b) != len(raw)/2 {
		t.Fatalf("copy of the unreadable file: %d bytes (%v), want %d", len(b), err, len(raw)/2)
	}
	if _, err := m3.dir.ReadHolders(); err != nil {
		t.Fatalf("the holders file after the first observation: %v, want it rewritten", err)
	}
	// Rewritten, the stand-in survives a further restart.
	m3, clk = restart("restart after the rewrite", clk.Now().Add(time.Second))
	if o, d := observe(m3, "restarted after the rewrite"); len(o.UnlistedVoters) != 1 || d.Kind != planner.Wait {
		t.Fatalf("restarted after the rewrite: unlisted voters %q, %s (%s), want the stand-in named", o.UnlistedVoters, d.Kind, d.Reason)
	}
	refresh := m3.holdersRefresh()
	clk.t = written.Add(refresh + grace)
	if o, d := observe(m3, "the grace after the torn file's write"); len(o.UnlistedVoters) != 0 || d.Kind != planner.Seed {
		t.Fatalf("the grace after the torn file was written: unlisted voters %q, %s (%s), want a seed", o.UnlistedVoters, d.Kind, d.Reason)
	}
	if file, err := (datadir.Dir{Root: m3.dir.Root}).ReadHolders(); err != nil || len(file.Holders) != 0 {
		t.Fatalf("holders file after the stand-in lapsed %+v (%v), want none", file, err)
	}
}
