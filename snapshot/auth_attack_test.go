package snapshot_test

// The attacker of these tests can write the snapshot store and knows
// everything the Nomad job holds in the clear, the age recipients
// included; not the cluster CA's key encryption key the MAC key is
// derived from.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/snapshot"
	"github.com/etcd-nomad/etcd-nomad/snapshot/file"
)

// cluster is what the members (and operators) hold: the age identity and
// the MAC key derived from the KEK. public is what the job shows anyone:
// the recipient alone.
func clusterKeys(t *testing.T) (cluster, public snapshot.Encryption) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	kek := bytes.Repeat([]byte{7}, 32)
	key, err := snapshot.DeriveMACKey(kek, "c")
	if err != nil {
		t.Fatal(err)
	}
	cluster = snapshot.Encryption{Recipients: []age.Recipient{id.Recipient()}, Identities: []age.Identity{id}, MACKey: key}
	public = snapshot.Encryption{Recipients: []age.Recipient{id.Recipient()}}
	return cluster, public
}

// authSetup is a real one-member etcd holding n keys, a file store of
// cluster "c", and the cluster's keys (clusterKeys).
type authSetup struct {
	cli             *clientv3.Client
	ep              string
	store           *file.Store
	cluster, public snapshot.Encryption
}

func newAuthSetup(t *testing.T, n int) authSetup {
	t.Helper()
	var s authSetup
	s.cli, s.ep = startEtcd(t, filepath.Join(t.TempDir(), "src"))
	fill(t, s.cli, n)
	var err error
	if s.store, err = file.New(filepath.Join(t.TempDir(), "store"), "c"); err != nil {
		t.Fatal(err)
	}
	s.cluster, s.public = clusterKeys(t)
	return s
}

// save saves a snapshot of endpoint ep (cluster "c", id abc, epoch 1)
// into store with enc.
func save(t *testing.T, ep string, store snapshot.Store, enc snapshot.Encryption) snapshot.Meta {
	t.Helper()
	m, err := snapshot.Save(context.Background(), snapshot.From{Endpoint: ep, SpoolDir: t.TempDir()}, store, snapshot.Source{Cluster: "c", ClusterID: "abc", Epoch: 1}, enc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// forgedCluster is the attacker's own etcd, whose auth store makes an
// application user root, saved as an object of cluster "c" to the
// recipient the job names, at a revision above the genuine one.
func forgedCluster(t *testing.T, ctx context.Context, store snapshot.Store, public snapshot.Encryption, above int64) snapshot.Meta {
	t.Helper()
	cli, ep := startEtcd(t, filepath.Join(t.TempDir(), "attacker"))
	must(t)(cli.RoleAdd(ctx, "root"))
	must(t)(cli.UserAdd(ctx, "app", "attacker-knows-this"))
	must(t)(cli.UserGrantRole(ctx, "app", "root"))
	for {
		resp, err := cli.Put(ctx, "k/forged", "attacker's")
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Revision > above {
			break
		}
	}
	m := save(t, ep, store, public)
	if m.MAC != "" {
		t.Fatalf("the attacker's save wrote a MAC: %+v", m)
	}
	return m
}

// TestForgedSnapshotWithThePublicRecipientIsRefused: a snapshot of the
// attacker's own cluster, encrypted to the job's public recipient and
// written to the store, decrypts with the members' identity; before
// snapshots were authenticated it was restored as genuine. It is refused
// by name by every restore (Verify, Fetch, FetchInto), with no MAC and
// with a made-up one, and never chosen from a listing, although it is
// the newest.
func TestForgedSnapshotWithThePublicRecipientIsRefused(t *testing.T) {
	ctx := context.Background()
	s := newAuthSetup(t, 20)
	ep, store, cluster := s.ep, s.store, s.cluster
	public := s.public
	genuine := save(t, ep, store, cluster)
	if genuine.MAC == "" {
		t.Fatal("a save with a MAC key wrote no MAC")
	}
	time.Sleep(1100 * time.Millisecond) // object names carry the second
	forged := forgedCluster(t, ctx, store, public, genuine.Revision)

	refused := func(t *testing.T, want error) {
		t.Helper()
		if _, err := snapshot.Verify(ctx, store, forged.Name, cluster, nil); !errors.Is(err, want) || !strings.Contains(err.Error(), forged.Name) {
			t.Fatalf("verify of the forged snapshot: %v, want %v naming %s", err, want, forged.Name)
		}
		dataDir := filepath.Join(t.TempDir(), "restored")
		if _, err := snapshot.FetchInto(ctx, store, forged.Name, dataDir, cluster, nil); !errors.Is(err, want) {
			t.Fatalf("fetch of the forged snapshot into a data dir: %v, want %v", err, want)
		}
		if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
			t.Fatalf("a refused fetch left %s behind (%v)", dataDir, err)
		}
		list, err := store.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if newest, _, _, _ := snapshot.Newest(list); newest.Name != forged.Name {
			t.Fatalf("the forged snapshot is not the newest in the raw listing (%s): the test proves nothing", newest.Name)
		}
		kept, why := cluster.Authentic(list)
		if newest, _, _, ok := snapshot.Newest(kept); !ok || newest.Name != genuine.Name {
			t.Fatalf("newest authentic snapshot %s, want the genuine %s", newest.Name, genuine.Name)
		}
		if !errors.Is(why[forged.Name], want) {
			t.Fatalf("refusal of %s: %v, want %v", forged.Name, why[forged.Name], want)
		}
	}
	t.Run("no MAC", func(t *testing.T) { refused(t, snapshot.ErrUnauthenticated) })
	t.Run("made-up MAC", func(t *testing.T) {
		m := forged
		m.MAC = genuine.MAC // a genuine MAC, of other metadata
		if err := store.PutMeta(ctx, m); err != nil {
			t.Fatal(err)
		}
		refused(t, snapshot.ErrForged)
	})
	t.Run("accepting unauthenticated objects does not accept a wrong MAC", func(t *testing.T) {
		accept := cluster
		accept.AcceptUnauthenticated = true
		if _, err := snapshot.Verify(ctx, store, forged.Name, accept, nil); !errors.Is(err, snapshot.ErrForged) {
			t.Fatalf("verify with -accept-unauthenticated: %v, want ErrForged", err)
		}
	})

	// The genuine snapshot restores, and holds none of the attacker's.
	dataDir := filepath.Join(t.TempDir(), "restored")
	if _, err := snapshot.FetchInto(ctx, store, genuine.Name, dataDir, cluster, nil); err != nil {
		t.Fatal(err)
	}
	peer := clustertest.FreeURL(t)
	if err := snapshot.Restore(snapshot.RestoreOptions{DataDir: dataDir, Name: "s0", PeerURL: peer.String(), Token: "t2"}); err != nil {
		t.Fatal(err)
	}
	restored, _ := startEtcd(t, dataDir)
	if _, ok := dump(t, restored)["k/forged"]; ok {
		t.Fatal("the genuine restore holds the attacker's key")
	}
	if users, err := restored.UserList(ctx); err != nil || len(users.Users) != 0 {
		t.Fatalf("the genuine restore has users %v (%v)", users, err)
	}
}

// TestEditedOrSwappedMetadataIsRefused: the metadata of a genuine
// snapshot with what a restore trusts changed (the revision raised so
// that a recovery prefers it, the epoch, the cluster id, the name of
// another genuine object) fails its MAC, and so does a genuine MAC
// carried over to another object's metadata.
func TestEditedOrSwappedMetadataIsRefused(t *testing.T) {
	ctx := context.Background()
	s := newAuthSetup(t, 20)
	cli, ep, store, cluster := s.cli, s.ep, s.store, s.cluster
	a := save(t, ep, store, cluster)
	fill(t, cli, 5)
	time.Sleep(1100 * time.Millisecond)
	b := save(t, ep, store, cluster)
	for _, c := range []struct {
		name string
		edit func(m *snapshot.Meta)
	}{
		{"revision raised", func(m *snapshot.Meta) { m.Revision += 1 << 20 }},
		{"epoch raised", func(m *snapshot.Meta) { m.Epoch++ }},
		{"cluster id", func(m *snapshot.Meta) { m.ClusterID = "def" }},
		{"another object's name", func(m *snapshot.Meta) { m.Name = b.Name }},
		{"another object's MAC", func(m *snapshot.Meta) { m.MAC = b.MAC }},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := a
			c.edit(&m)
			if err := store.PutMeta(ctx, m); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.PutMeta(ctx, a); _ = store.PutMeta(ctx, b) })
			if _, err := snapshot.Verify(ctx, store, m.Name, cluster, nil); !errors.Is(err, snapshot.ErrForged) || !strings.Contains(err.Error(), m.Name) {
				t.Fatalf("verify: %v, want ErrForged naming %s", err, m.Name)
			}
		})
	}
	if _, err := snapshot.Verify(ctx, store, a.Name, cluster, nil); err != nil {
		t.Fatalf("the genuine metadata put back: %v", err)
	}
}

// TestMACCoversEveryMetadataField: a change to any field of the metadata
// (a field added later included) fails the MAC, so nothing a restore
// reads from the metadata can be edited unseen.
func TestMACCoversEveryMetadataField(t *testing.T) {
	cluster, _ := clusterKeys(t)
	base := snapshot.Meta{Name: "n", Cluster: "c", ClusterID: "abc", Epoch: 1, Revision: 2, Endpoint: "e", MemberID: "m",
		EtcdVersion: "3.6", Created: time.Unix(3, 4).UTC(), Size: 5, SHA256: "s", StoredSize: 6, Codec: "zstd",
		Kind: snapshot.KindDelta, FirstRevision: 1, Base: "b", Events: 7}
	store := &metaRecorder{}
	if _, err := snapshot.Adopt(context.Background(), store, cluster, []snapshot.Meta{base}); err != nil {
		t.Fatal(err)
	}
	signed := store.put
	if err := cluster.Authenticated(signed); err != nil {
		t.Fatalf("signed metadata: %v", err)
	}
	v := reflect.ValueOf(&signed).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Name == "MAC" {
			continue
		}
		m := signed
		if f.Name == "Corrupt" {
			// Never read from a store (json:"-"): a listing sets it, and
			// it refuses the object whatever its MAC.
			m.Corrupt = "x"
			if err := cluster.Authenticated(m); !errors.Is(err, snapshot.ErrCorruptMeta) {
				t.Errorf("Corrupt set: %v, want ErrCorruptMeta", err)
			}
			continue
		}
		fv := reflect.ValueOf(&m).Elem().Field(i)
		switch fv.Kind() {
		case reflect.String:
			fv.SetString(fv.String() + "x")
		case reflect.Int, reflect.Int64:
			fv.SetInt(fv.Int() + 1)
		case reflect.Uint64:
			fv.SetUint(fv.Uint() + 1)
		case reflect.Bool:
			fv.SetBool(!fv.Bool())
		default:
			if f.Type != reflect.TypeOf(time.Time{}) {
				t.Fatalf("field %s of kind %s: teach this test to change it", f.Name, fv.Kind())
			}
			m.Created = m.Created.Add(time.Nanosecond)
		}
		if err := cluster.Authenticated(m); !errors.Is(err, snapshot.ErrForged) {
			t.Errorf("%s changed: %v, want ErrForged", f.Name, err)
		}
	}
	// Created moved by large amounts, as the store's JSON carries them:
	// 2^64 ns (UnixNano wraps there: a MAC over it alone would still
	// verify), whole seconds, years either way.
	for _, shift := range []struct {
		what      string
		sec, nsec int64
	}{
		{"2^64 ns", 18446744073, 709551616},
		{"-2^64 ns", -18446744073, -709551616},
		{"2^63 ns", 9223372036, 854775808},
		{"1 s", 1, 0},
		{"1000 years", 1000 * 365 * 24 * 3600, 0},
		{"-1000 years", -1000 * 365 * 24 * 3600, 0},
	} {
		m := signed
		m.Created = time.Unix(signed.Created.Unix()+shift.sec, int64(signed.Created.Nanosecond())+shift.nsec).UTC()
		if m.Created.Equal(signed.Created) {
			t.Fatalf("shift %s changed nothing", shift.what)
		}
		if err := cluster.Authenticated(m); !errors.Is(err, snapshot.ErrForged) {
			t.Errorf("Created moved by %s (%s to %s): %v, want ErrForged", shift.what, signed.Created, m.Created, err)
		}
	}
}

// metaRecorder keeps the metadata put (the one method Adopt calls).
type metaRecorder struct {
	snapshot.Store
	put snapshot.Meta
}

func (s *metaRecorder) PutMeta(_ context.Context, m snapshot.Meta) error { s.put = m; return nil }

// appendForgedDelta writes a segment of the attacker's making after the
// end of base's chain: a put of k/evil, encrypted to the public
// recipient, with metadata that follows on from the chain.
func appendForgedDelta(t *testing.T, ctx context.Context, store snapshot.Store, public snapshot.Encryption, base snapshot.Meta, after int64) snapshot.Meta {
	t.Helper()
	seg := snapshot.Segment{Events: []*mvccpb.Event{{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("k/evil"), Value: []byte("attacker's"), CreateRevision: after + 1, ModRevision: after + 1, Version: 1}}}}
	plain, err := seg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var obj bytes.Buffer
	size, sum, err := snapshot.Encode(&obj, bytes.NewReader(plain), public)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().Add(time.Hour)
	m := snapshot.Meta{Name: snapshot.DeltaName("c", base.Epoch, after+1, created, true), Cluster: "c", ClusterID: base.ClusterID, Epoch: base.Epoch,
		Kind: snapshot.KindDelta, Base: base.Name, FirstRevision: after + 1, Revision: after + 1, Events: 1, Created: created,
		Size: size, SHA256: sum, StoredSize: int64(obj.Len()), Encrypted: true, Codec: snapshot.Codec, EtcdVersion: base.EtcdVersion}
	if _, err := store.Put(ctx, m.Name, &obj); err != nil {
		t.Fatal(err)
	}
	if err := store.PutMeta(ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestForgedDeltaAppendedToAGenuineChainIsRefused: a segment of the
// attacker's, appended to a genuine chain with metadata that follows on,
// is left out of the chain a listing shows (the chain end is the genuine
// one, as with a damaged segment) and, fetched by name, ends the replay
// there: its put is never applied.
func TestForgedDeltaAppendedToAGenuineChainIsRefused(t *testing.T) {
	ctx := context.Background()
	s := newAuthSetup(t, 10)
	cli, ep, store, cluster := s.cli, s.ep, s.store, s.cluster
	public := s.public
	base := save(t, ep, store, cluster)
	recordUntil(t, cli, store, base, cluster, func() {
		for i := range 30 {
			must(t)(cli.Put(ctx, fmt.Sprintf("after/%04d", i), "x"))
		}
	})
	list, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, genuineChain, genuineEnd, _ := snapshot.Newest(list)
	forged := appendForgedDelta(t, ctx, store, public, base, genuineEnd)

	list, err = store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, rawEnd, _ := snapshot.Newest(list); rawEnd != forged.Revision {
		t.Fatalf("raw chain end %d, want the forged %d: the test proves nothing", rawEnd, forged.Revision)
	}
	kept, why := cluster.Authentic(list)
	if _, chain, end, _ := snapshot.Newest(kept); end != genuineEnd || len(chain) != len(genuineChain) {
		t.Fatalf("authentic chain end %d (%d segments), want the genuine %d (%d)", end, len(chain), genuineEnd, len(genuineChain))
	}
	if !errors.Is(why[forged.Name], snapshot.ErrUnauthenticated) {
		t.Fatalf("refusal of %s: %v", forged.Name, why[forged.Name])
	}

	// Fetched by name (a listing taken before the refusal, the raw
	// chain): the forged segment is where the verified chain ends.
	rawChain, _ := snapshot.Chain(list, base)
	fc, err := snapshot.FetchChain(ctx, store, rawChain, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if fc.Damaged != forged.Name || fc.End != genuineEnd || !strings.Contains(fc.Stopped, forged.Name) {
		t.Fatalf("fetched chain: damaged %q end %d stopped %q; want %s refused, end %d", fc.Damaged, fc.End, fc.Stopped, forged.Name, genuineEnd)
	}
	restored, res := restoreAndReplay(t, store, base, cluster)
	if !strings.Contains(res.Stopped, forged.Name) {
		t.Fatalf("replay %+v: want it stopped at %s", res, forged.Name)
	}
	if v, ok := dump(t, restored)["k/evil"]; ok {
		t.Fatalf("the forged delta was applied: k/evil = %q", v)
	}
}

// TestUnauthenticatedSnapshotNeedsTheExplicitFlag: a snapshot written
// before snapshots were authenticated (no MAC) is refused by a reader
// with the key unless the operator accepts it (-accept-unauthenticated);
// once accepted and adopted (its metadata signed, as 'recover -from
// snapshot:' does), a member restores it without the exception.
func TestUnauthenticatedSnapshotNeedsTheExplicitFlag(t *testing.T) {
	ctx := context.Background()
	s := newAuthSetup(t, 10)
	ep, store, cluster := s.ep, s.store, s.cluster
	before := cluster
	before.MACKey = nil // the version before this one
	old := save(t, ep, store, before)
	if _, err := snapshot.Verify(ctx, store, old.Name, cluster, nil); !errors.Is(err, snapshot.ErrUnauthenticated) || !strings.Contains(err.Error(), "-accept-unauthenticated") {
		t.Fatalf("verify of an unauthenticated snapshot: %v, want ErrUnauthenticated naming the flag", err)
	}
	accept := cluster
	accept.AcceptUnauthenticated = true
	verified, err := snapshot.Verify(ctx, store, old.Name, accept, nil)
	if err != nil {
		t.Fatalf("verify with -accept-unauthenticated: %v", err)
	}
	if _, err := snapshot.Adopt(ctx, store, cluster, []snapshot.Meta{verified}); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Verify(ctx, store, old.Name, cluster, nil); err != nil {
		t.Fatalf("verify of the adopted snapshot without the flag: %v", err)
	}
	// Without the key, a MAC cannot be checked: refused, naming the key.
	nokey := cluster
	nokey.MACKey = nil
	if _, err := snapshot.Verify(ctx, store, old.Name, nokey, nil); err == nil || !strings.Contains(err.Error(), "ETCD_NOMAD_CA_KEK") {
		t.Fatalf("verify of a signed snapshot without the key: %v, want an error naming ETCD_NOMAD_CA_KEK", err)
	}
}
