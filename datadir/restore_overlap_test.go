package datadir_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// puts builds one put per revision from..to (inclusive), the same content
// whichever segment carries it.
func puts(from, to int64) []*mvccpb.Event {
	var out []*mvccpb.Event
	for r := from; r <= to; r++ {
		out = append(out, &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(fmt.Sprintf("delta/%06d", r)),
			Value: []byte("v"), CreateRevision: r, ModRevision: r, Version: 1}})
	}
	return out
}

// A former leader's last segment X and the next leader's first segment Y
// start at the same revision (two recorders for a moment); X is damaged,
// Y holds all of X and more. The member leaves X out of the chain it
// observes, and the install builds its chain from the same listing
// (Source.Skip): it goes around X through Y and installs every revision,
// instead of refusing again for X forever (data review, 2026-11-26: the
// install's chain went through X while the observation's did not, and an
// automatic recovery was refused on every loop).
func TestDamagedSegmentBridgedByAnOverlapIsInstalledAround(t *testing.T) {
	b := newBackup(t, 600)
	s := b.base.Revision
	b.storeSegment(t, snapshot.Segment{Events: puts(s+1, s+50)})
	time.Sleep(1100 * time.Millisecond) // distinct names (their creation second)
	x := b.storeSegment(t, snapshot.Segment{Events: puts(s+51, s+100)})
	time.Sleep(1100 * time.Millisecond)
	b.storeSegment(t, snapshot.Segment{Events: puts(s+51, s+150)})
	p := filepath.Join(b.dir, x.Name)
	damageFile(t, p)

	damaged := map[string]bool{}
	for round := 0; round < 3; round++ {
		list, err := b.store.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var kept []snapshot.Meta
		for _, m := range list {
			if !damaged[m.Name] {
				kept = append(kept, m)
			}
		}
		_, _, want, _ := snapshot.Newest(kept)
		got, _, err := install(context.Background(), t, t.TempDir(), datadir.Source{Store: b.store, Name: b.base.Name, Want: want, Skip: damaged})
		var short *datadir.ChainShortError
		if errors.As(err, &short) {
			if damaged[short.Damaged] {
				t.Fatalf("round %d: observed end %d, refused again for %s, left out already: the recovery loops", round, want, short.Damaged)
			}
			damaged[short.Damaged] = true
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got.End < s+150 {
			t.Fatalf("installed to %d, the store holds a verified chain to %d", got.End, s+150)
		}
		return
	}
	t.Fatal("no install in 3 rounds")
}

// A restore's revision bump covers the replayed chain: the replay folds
// the chain's revisions into a few transactions, so a bump estimated from
// the taker's clock (too small when that clock ran ahead; here the
// caller's 1000) left the restored cluster below revisions the lost
// cluster's clients saw, and a watch resumed there skipped writes (data
// review, 2026-11-26).
func TestRestoredRevisionIsAboveTheChainEnd(t *testing.T) {
	b := newBackup(t, 600)
	s := b.base.Revision
	b.storeSegment(t, snapshot.Segment{Events: puts(s+1, s+3000)})
	end := chainEnd(t, b.store)
	root := t.TempDir()
	if _, _, err := install(context.Background(), t, root, datadir.Source{Store: b.store, Name: b.base.Name}); err != nil {
		t.Fatal(err)
	}
	cli := startEtcd(t, datadir.Dir{Root: root}.EtcdDir(), "m0")
	resp, err := cli.Get(context.Background(), "delta/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 3000 || resp.Header.Revision < end+snapshot.MinRevisionBump {
		t.Fatalf("restored: %d keys at revision %d; want 3000 at %d or more (chain end %d + the minimum bump)", resp.Count, resp.Header.Revision, end+snapshot.MinRevisionBump, end)
	}
}
