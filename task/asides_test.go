package task

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/planner"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// Data set aside is renamed, never deleted on the spot (invariant 7), but
// no command named it: in sim seed 121 m0's aside/ held revisions
// 541..546 and the operator was told only the chain's shortfall. A
// member's /status names its set-aside copies (where, which incarnation,
// which revision, when), and 'etcd-nomad status' (status.Gather and
// status.Format, as the command runs them) lists them.
func TestSetAsideCopiesAreNamedInStatus(t *testing.T) {
	ctx := context.Background()
	k := newKit(t, "m0")
	m := k.member("m0", nil)
	cli := k.seedForTest(m)
	for i := range 5 {
		put(t, cli, fmt.Sprintf("k%d", i), "v")
	}
	meta, err := m.dir.ReadMeta()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.serveStatus(); err != nil {
		t.Fatal(err)
	}
	d := planner.Decision{Kind: planner.SetAside, Name: "m0", Aside: planner.AsideForeign, Reason: "test: data of another incarnation"}
	if err := m.act(ctx, planner.Observation{}, d); err != nil {
		t.Fatal(err)
	}
	entries := m.asideEntries(t)
	if len(entries) != 1 {
		t.Fatalf("aside/: %v, want one copy", entries)
	}
	path := filepath.Join(m.dir.AsideDir(), entries[0])
	bc, err := backends.OpenClient(k.cl)
	if err != nil {
		t.Fatal(err)
	}
	c, err := status.Gather(ctx, bc)
	if err != nil || len(c.Members) != 1 {
		t.Fatalf("status: %+v (%v)", c, err)
	}
	got := c.Members[0].Asides
	if len(got) != 1 {
		t.Fatalf("/status names set-aside copies %+v, want the one in %s", got, path)
	}
	a := got[0]
	if a.Path != path || a.Name != entries[0] || a.Cluster != "kit" || a.Token != meta.Token || a.Epoch != 1 || a.ClusterID != meta.ClusterID || a.Revision < 6 || a.At == "" {
		t.Fatalf("/status's set-aside copy: %+v, want %s of epoch 1, cluster %x, revision 6 or more, with its time", a, path, meta.ClusterID)
	}
	if _, err := os.Stat(a.Path); err != nil {
		t.Fatalf("the path /status names: %v", err)
	}
	out := status.Format(c)
	if !strings.Contains(out, "m0: set aside: "+path+" (epoch 1, cluster "+fmt.Sprintf("%x", meta.ClusterID)+fmt.Sprintf(", revision %d", a.Revision)) {
		t.Fatalf("etcd-nomad status does not list the copy:\n%s", out)
	}
	t.Logf("etcd-nomad status:\n%s", out)

	// A copy set aside later is read anew (the list is kept until aside/
	// changes) and listed first; the list is bounded.
	for i := range status.MaxAsides + 2 {
		if err := os.Mkdir(filepath.Join(m.dir.AsideDir(), fmt.Sprintf("29991231T0000%02d.000000000Z-corrupt", i)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if c, err = status.Gather(ctx, bc); err != nil {
		t.Fatal(err)
	}
	st := c.Members[0]
	if len(st.Asides) != status.MaxAsides || st.AsidesMore != 3 || !strings.HasPrefix(st.Asides[0].Name, "29991231T000017") || st.Asides[0].At != "2999-12-31T00:00:17Z" {
		t.Fatalf("after %d more set-asides: %d listed (first %+v), %d more; want %d listed newest first, 3 more", status.MaxAsides+2, len(st.Asides), st.Asides[0], st.AsidesMore, status.MaxAsides)
	}
	if out := status.Format(c); !strings.Contains(out, "metadata unreadable") || !strings.Contains(out, "m0: set aside: 3 older cop(ies) not listed") {
		t.Fatalf("etcd-nomad status with more copies than listed:\n%s", out)
	}
}
