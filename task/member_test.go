package task_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
	"github.com/etcd-nomad/etcd-nomad/localmode"
	"github.com/etcd-nomad/etcd-nomad/provider/static"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/etcd-nomad/etcd-nomad/task"
)

// runMember runs a one-member cluster in this process until stop is called.
func runMember(t *testing.T, dir string, ports localmode.MemberPorts) (stop func() error) {
	t.Helper()
	cl := &config.Cluster{
		Name: "unit", Size: 1, DataDir: filepath.Join(dir, "data"),
		Etcd: config.Etcd{QuotaBackendBytes: config.DefaultQuotaBackendBytes, AutoCompactionMode: "periodic", AutoCompactionRetention: "1h",
			HeartbeatInterval: 50 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond, SnapshotCount: 10000},
		TLS:          config.TLS{Mode: config.TLSAuto},
		Provider:     config.Provider{Kind: config.ProviderStatic, StaleAfter: time.Second},
		Coordination: config.Coordination{Kind: config.CoordLocal, Dir: filepath.Join(dir, "coord")},
	}
	cl.Provider.Static = []config.StaticMember{{Name: "m0", Address: "127.0.0.1", ClientPort: ports.Client, PeerPort: ports.Peer, StatusPort: ports.Status}}
	co, err := local.New(cl.Coordination.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := task.New(ctx, task.Options{Cluster: cl, Name: "m0", Provider: static.New(cl.Provider.Static), Coordinator: co,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn}), LoopInterval: 200 * time.Millisecond, StopTimeout: 5 * time.Second, EtcdLogLevel: "error"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("member did not stop within 10s")
			return nil
		}
	}
}

func get(t *testing.T, hc *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMemberLifecycle(t *testing.T) {
	dir := t.TempDir()
	pp, err := localmode.AllocatePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	ports := pp[0]
	stop := runMember(t, dir, ports)
	co, _ := local.New(filepath.Join(dir, "coord"))
	ca, err := clusterca.Read(context.Background(), co, "unit", nil)
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := certs.Pool(ca.Cert)
	noCert := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig(pool, nil)}}
	pair := statusReaderPair(t, ca)
	withCert := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig(pool, &pair)}}
	base := "https://127.0.0.1:" + itoa(ports.Status)

	deadline := time.Now().Add(30 * time.Second)
	var code int
	var body string
	for {
		code, body = get(t, noCert, base+"/health")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health never passed; last %d %q", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"role=leader", "revision=", "db_size="} {
		if !strings.Contains(body, want) {
			t.Errorf("health body %q lacks %q", body, want)
		}
	}
	if code, _ := get(t, noCert, base+"/status"); code != http.StatusUnauthorized {
		t.Errorf("/status without a client certificate: %d, want 401", code)
	}
	code, body = get(t, withCert, base+"/status")
	var st status.Member
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || !st.Healthy || st.MemberID == 0 || st.Epoch != 1 {
		t.Fatalf("/status: %d %s", code, body)
	}
	if code, _ := get(t, noCert, base+"/metrics"); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a client certificate: %d, want 401", code)
	}
	code, body = get(t, withCert, base+"/metrics")
	for _, want := range []string{"etcd_nomad_decisions_total", "etcd_server_has_leader"} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s (status %d)", want, code)
		}
	}
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("graceful stop took %s", time.Since(start))

	// Restarted on the same data dir, it rejoins as the same member.
	stop = runMember(t, dir, ports)
	defer stop()
	deadline = time.Now().Add(30 * time.Second)
	for {
		code, body = get(t, withCert, base+"/status")
		var again status.Member
		if code == http.StatusOK && json.Unmarshal([]byte(body), &again) == nil && again.Healthy {
			if again.MemberID != st.MemberID || again.ClusterID != st.ClusterID {
				t.Fatalf("restarted as member %x of %x, want %x of %x", again.MemberID, again.ClusterID, st.MemberID, st.ClusterID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted member never healthy: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
