package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// recordLiveRig is 'recover -record-live' against the local coordinator
// and three static members whose /status answers what the test says (the
// member's own protocol, served by httptest: no etcd is needed to test
// the command's fence). The record is the case the command exists for:
// Consul restored an unconfirmed recovery record of epoch 3 (token tokB,
// seeder m9, gone for good) while m1..m3 run token tokA epoch 2, cluster
// c1, with a quorum.
type recordLiveRig struct {
	cl       *config.Cluster
	co       *local.Coordinator
	mu       sync.Mutex
	statuses map[string]status.Member
	// during, when set, runs while m3 answers its /status (after the
	// command read the record, before its compare-and-set).
	during func()
}

func newRecordLiveRig(t *testing.T) *recordLiveRig {
	t.Helper()
	dir := t.TempDir()
	r := &recordLiveRig{statuses: map[string]status.Member{}}
	cl := &config.Cluster{Name: "unit", TLS: config.TLS{Mode: config.TLSOff},
		Provider:     config.Provider{Kind: config.ProviderStatic},
		Coordination: config.Coordination{Kind: config.CoordLocal, Dir: filepath.Join(dir, "coord")}}
	for _, name := range []string{"m1", "m2", "m3"} {
		r.statuses[name] = status.Member{Name: name, Cluster: "unit", MemberID: uint64(name[1]), ClusterID: 0xc1, Token: "tokA", Epoch: 2, Running: true, Healthy: true, Revision: 500}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			r.mu.Lock()
			st, ok := r.statuses[name]
			during := r.during
			r.mu.Unlock()
			if !ok {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			if during != nil && name == "m3" {
				during()
			}
			json.NewEncoder(w).Encode(st)
		}))
		t.Cleanup(srv.Close)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
		p, _ := strconv.Atoi(port)
		cl.Provider.Static = append(cl.Provider.Static, config.StaticMember{Name: name, Address: "127.0.0.1", ClientPort: 1, PeerPort: 2, StatusPort: p})
	}
	co, err := local.New(cl.Coordination.Dir)
	if err != nil {
		t.Fatal(err)
	}
	r.cl, r.co = cl, co
	l, err := co.Lock(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.CreateRecord(context.Background(), l, coord.Record{Token: "tokB", Epoch: 3, Seeder: "m9", Source: "data", LastConfirmedToken: "tokA", LastConfirmedEpoch: 2}); err != nil {
		t.Fatal(err)
	}
	l.Unlock(context.Background())
	return r
}

func (r *recordLiveRig) set(name string, change func(*status.Member)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.statuses[name]
	change(&st)
	r.statuses[name] = st
}

func (r *recordLiveRig) record(t *testing.T) coord.Record {
	t.Helper()
	rec, err := r.co.Record(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestRecordLiveRecordsTheLiveClusterAsANewEpoch(t *testing.T) {
	r := newRecordLiveRig(t)
	rec, err := operatorRecordLive(context.Background(), r.cl)
	if err != nil {
		t.Fatal(err)
	}
	got := r.record(t)
	if rec.Epoch != 4 || got.Epoch != 4 || got.Token != "tokA" || got.ClusterID != 0xc1 || got.Seeder != "m1" || got.Source != "" || got.Operator || got.LastConfirmedToken != "" {
		t.Fatalf("recorded %+v (returned %+v), want tokA epoch 4 cluster c1 seeded by m1, confirmed, no recovery bookkeeping", got, rec)
	}
	// Run again: the record is confirmed now, nothing to do.
	if _, err := operatorRecordLive(context.Background(), r.cl); err == nil || !strings.Contains(err.Error(), "the record is confirmed") {
		t.Fatalf("a second run: %v, want a refusal over the confirmed record", err)
	}
}

// Each refusal says why, names the members, and writes nothing.
func TestRecordLiveRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(r *recordLiveRig)
		want   string
	}{
		{"no quorum", func(r *recordLiveRig) {
			for _, n := range []string{"m1", "m2", "m3"} {
				r.set(n, func(st *status.Member) { st.Healthy = false })
			}
		}, "no member answers as a healthy voter"},
		{"a member answering from another cluster", func(r *recordLiveRig) {
			r.set("m3", func(st *status.Member) { st.ClusterID, st.Token, st.Epoch = 0xd2, "tokC", 3 })
		}, "member(s) m3 (token tokC epoch 3, cluster d2) hold data of another incarnation"},
		{"a silent member", func(r *recordLiveRig) {
			r.mu.Lock()
			delete(r.statuses, "m2")
			r.mu.Unlock()
		}, "instance(s) m2 do not answer"},
		{"a concurrent record change", func(r *recordLiveRig) {
			// Consul restored another record while the command asked
			// the members (a restore is not fenced by the lock).
			r.during = func() {
				cur, _ := r.co.Record(context.Background())
				cur.Epoch, cur.Index = 5, cur.Index+7
				b, _ := json.Marshal(cur)
				os.WriteFile(filepath.Join(r.cl.Coordination.Dir, "record.json"), b, 0o600)
			}
		}, "the record changed while this command observed the members"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecordLiveRig(t)
			tc.change(r)
			before := r.record(t)
			_, err := operatorRecordLive(context.Background(), r.cl)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal saying %q", err, tc.want)
			}
			if tc.name == "a concurrent record change" {
				if !errors.Is(err, coord.ErrConflict) {
					t.Fatalf("got %v, want coord.ErrConflict", err)
				}
				if got := r.record(t); got.Epoch != 5 || got.Token != "tokB" {
					t.Fatalf("the record after the refusal: %+v, want the restored one (tokB epoch 5)", got)
				}
				return
			}
			if got := r.record(t); !reflect.DeepEqual(got, before) {
				t.Fatalf("the record changed on a refusal: %+v, was %+v", got, before)
			}
		})
	}
}

// The command line: -record-live goes alone.
func TestRecordLiveGoesAlone(t *testing.T) {
	ui := cli.NewMockUi()
	c := &recoverCommand{ui: ui}
	if code := c.Run([]string{"-config", "../../examples/static.hcl", "-record-live", "-from", "m1"}); code != 1 || !strings.Contains(ui.ErrorWriter.String(), "-record-live goes alone") {
		t.Fatalf("exit %d, stderr %q", code, ui.ErrorWriter.String())
	}
}
