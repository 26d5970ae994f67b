package status_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// source is a cluster as Gather reads it: a record, a pause and the
// instances, each answer or error set by the test.
type source struct {
	record    coord.Record
	recordErr error
	pause     coord.Pause
	pauseErr  error
	insts     []provider.Instance
	instsErr  error
	tls       *tls.Config
	scheme    string
	tlsErr    error
}

func (s *source) Name() string { return "orders" }
func (s *source) Record(context.Context) (coord.Record, error) {
	return s.record, s.recordErr
}
func (s *source) Pause(context.Context) (coord.Pause, error) { return s.pause, s.pauseErr }
func (s *source) Instances(context.Context) ([]provider.Instance, error) {
	return s.insts, s.instsErr
}
func (s *source) StatusTLS(context.Context) (*tls.Config, string, error) {
	return s.tls, s.scheme, s.tlsErr
}

// serve starts a member's /status answering st and returns its instance.
func serve(t *testing.T, newServer func(http.Handler) *httptest.Server, st status.Member) (provider.Instance, *httptest.Server) {
	t.Helper()
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return provider.Instance{Name: st.Name, Address: host, StatusPort: p, PeerPort: p + 1, ClientPort: p + 2}, srv
}

// goneInstance is an instance whose status port nothing listens on.
func goneInstance(t *testing.T, name string) provider.Instance {
	t.Helper()
	return provider.Instance{Name: name, Address: "127.0.0.1", StatusPort: clustertest.FreePorts(t, 1)[0]}
}

var (
	leader   = status.Member{Name: "orders-aaaa", MemberID: 0xa1, ClusterID: 0xc1, Epoch: 2, Running: true, Leader: true, Healthy: true, Revision: 120, DBSize: 20480, Decision: "wait", Reason: "healthy; nothing to do"}
	follower = status.Member{Name: "orders-bbbb", MemberID: 0xb2, ClusterID: 0xc1, Epoch: 2, Running: true, Healthy: true, Revision: 120, DBSize: 20480, Decision: "wait", Reason: "healthy; nothing to do"}
	learner  = status.Member{Name: "orders-cccc", MemberID: 0xc3, ClusterID: 0xc1, Epoch: 2, Running: true, Learner: true, Revision: 118, DBSize: 16384, Decision: "promote", Reason: "learner: promoting once caught up with the leader"}
)

// TestGatherHealthyCluster: the record's cluster id and epoch, and every
// instance's own /status in the provider's order, printed one row each
// with its role.
func TestGatherHealthyCluster(t *testing.T) {
	var insts []provider.Instance
	for _, m := range []status.Member{leader, follower, learner} {
		in, _ := serve(t, httptest.NewServer, m)
		insts = append(insts, in)
	}
	src := &source{record: coord.Record{ClusterID: 0xc1, Epoch: 2, Token: "tok"}, pauseErr: coord.ErrNotPaused, insts: insts, scheme: "http"}
	st, err := status.Gather(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if st.Cluster != "orders" || st.ClusterID != "c1" || st.Epoch != 2 || st.Paused != "" || len(st.Errors) != 0 {
		t.Fatalf("cluster view %+v", st)
	}
	for i, want := range []status.Member{leader, follower, learner} {
		if st.Members[i].Name != want.Name || st.Members[i].MemberID != want.MemberID || st.Members[i].Reason != want.Reason {
			t.Errorf("member %d: %+v, want %s's own status", i, st.Members[i], want.Name)
		}
	}
	want := strings.Join([]string{
		"cluster orders  id c1  epoch 2",
		"",
		"NAME         MEMBER ID  ROLE      REVISION  DB SIZE  HEALTHY  LEARNER  DECISION",
		"orders-aaaa  a1         leader    120       20480    true     false    wait",
		"orders-bbbb  b2         follower  120       20480    true     false    wait",
		"orders-cccc  c3         learner   118       16384    false    true     promote",
	}, "\n")
	if got := status.Format(st); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// TestGatherDegradedCluster: an instance whose /status does not answer,
// or answers with an error, stays in the view as unreachable, in its
// place, and the errors name it; the others are read as usual. A cluster
// without a record yet says so.
func TestGatherDegradedCluster(t *testing.T) {
	up, _ := serve(t, httptest.NewServer, status.Member{Name: "orders-aaaa", MemberID: 0xa1, Running: true, Decision: "wait", Reason: "running; member list unreachable (no quorum yet)"})
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	t.Cleanup(broken.Close)
	bhost, bport, _ := net.SplitHostPort(broken.Listener.Addr().String())
	bp, _ := strconv.Atoi(bport)
	insts := []provider.Instance{
		goneInstance(t, "orders-gone"),
		up,
		{Name: "orders-503", Address: bhost, StatusPort: bp},
	}
	src := &source{recordErr: coord.ErrNoRecord, pauseErr: coord.ErrNotPaused, insts: insts, scheme: "http"}
	st, err := status.Gather(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if st.ClusterID != "(none yet)" || st.Epoch != 0 {
		t.Errorf("no record: cluster id %q epoch %d", st.ClusterID, st.Epoch)
	}
	for _, i := range []int{0, 2} {
		if m := st.Members[i]; m.Name != insts[i].Name || !m.Unreachable || m.Reason != "unreachable" {
			t.Errorf("member %d: %+v, want %s unreachable", i, m, insts[i].Name)
		}
	}
	if m := st.Members[1]; m.Unreachable || m.MemberID != 0xa1 || !m.Running {
		t.Errorf("the answering member: %+v", m)
	}
	if len(st.Errors) != 2 {
		t.Fatalf("errors %q, want one per unreachable member", st.Errors)
	}
	errs := strings.Join(st.Errors, "\n")
	if !strings.Contains(errs, "orders-gone: ") || !strings.Contains(errs, "orders-503: ") || !strings.Contains(errs, "503") {
		t.Errorf("errors %q do not name the unreachable members and why", st.Errors)
	}
	table := status.Format(st)
	for _, want := range []string{
		"cluster orders  id (none yet)  epoch 0",
		"orders-gone  -          -         0         0        false    false",
		"orders-aaaa  a1         follower  0         0        false    false    wait",
		"\norders-gone: ",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// TestGatherPausedAndCAMismatch: an operator's pause heads the table with
// what it holds back; a member that runs with another CA than the
// coordinator holds is named with both fingerprints.
func TestGatherPausedAndCAMismatch(t *testing.T) {
	mismatch := leader
	mismatch.CAMismatch = &status.CAMismatch{Member: "sha256:aa11", Coordinator: "sha256:bb22"}
	a, _ := serve(t, httptest.NewServer, mismatch)
	b, _ := serve(t, httptest.NewServer, follower)
	since := time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC)
	pause := coord.Pause{By: "ops@bastion", Reason: "disk swap", Since: since}
	src := &source{record: coord.Record{ClusterID: 0xc1, Epoch: 2}, pause: pause, insts: []provider.Instance{a, b}, scheme: "http"}
	st, err := status.Gather(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if st.Paused != pause.String() {
		t.Errorf("paused %q, want %q", st.Paused, pause.String())
	}
	table := status.Format(st)
	for _, want := range []string{
		"PAUSED: paused by ops@bastion since 2026-11-23T18:00:00Z: disk swap (no membership change, recovery or maintenance until 'etcd-nomad resume')",
		"orders-aaaa: CA MISMATCH: runs with sha256:aa11, the coordinator holds sha256:bb22",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "orders-bbbb: CA MISMATCH") {
		t.Errorf("a member with the coordinator's CA is named a mismatch:\n%s", table)
	}
	st.Paused = ""
	if table := status.Format(st); strings.Contains(table, "PAUSED") {
		t.Errorf("an unpaused cluster's table says PAUSED:\n%s", table)
	}
}

// TestGatherOverTLS: members are asked with the TLS the source presents;
// without the CA that signed their certificates they are unreachable.
func TestGatherOverTLS(t *testing.T) {
	in, srv := serve(t, httptest.NewTLSServer, leader)
	trusted := srv.Client().Transport.(*http.Transport).TLSClientConfig
	src := &source{record: coord.Record{ClusterID: 0xc1, Epoch: 2}, pauseErr: coord.ErrNotPaused, insts: []provider.Instance{in}, tls: trusted, scheme: "https"}
	st, err := status.Gather(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Members[0]; m.Unreachable || m.MemberID != leader.MemberID {
		t.Fatalf("over the members' TLS: %+v %q", m, st.Errors)
	}
	src.tls = &tls.Config{}
	st, err = status.Gather(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Members[0]; !m.Unreachable || len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "certificate") {
		t.Fatalf("without the members' CA: %+v %q", m, st.Errors)
	}
}

// TestGatherRefusals: a record, pause, provider or TLS read that fails is
// Gather's error, naming what failed; the provider's own error (a missing
// NOMAD_TOKEN) comes back as it is, before any TLS is asked for.
func TestGatherRefusals(t *testing.T) {
	denied := errors.New("Nomad refused: no token")
	unavailable := errors.New("connection refused")
	for _, c := range []struct {
		name string
		src  source
		want string
		is   error
	}{
		{"record", source{recordErr: unavailable}, "read cluster record", unavailable},
		{"pause", source{pauseErr: unavailable}, "read pause", unavailable},
		{"provider before TLS", source{pauseErr: coord.ErrNotPaused, instsErr: denied, tlsErr: unavailable}, "Nomad refused", denied},
		{"tls", source{pauseErr: coord.ErrNotPaused, tlsErr: unavailable}, "client TLS", unavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := status.Gather(context.Background(), &c.src)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Gather: %v, want %q wrapping %v", err, c.want, c.is)
			}
		})
	}
}
