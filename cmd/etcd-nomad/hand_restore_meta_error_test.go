package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/status"
)

// Review rev19g: as TestHandRestoreWithoutRecordRefusesWhileAMemberIsSilent, but
// m1 answers /status with meta_error (its metadata or its WAL directory
// cannot be read: it holds data of epoch 2 whose record Consul lost). The
// planner takes such an answer as silent (task/observe.go); the hand
// restore takes it as an empty member with no epoch and records epoch 2.
func TestHandRestoreWithoutRecordTakesAnUnreadableMemberAsSilent(t *testing.T) {
	f := newRestoreFixture(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := status.Member{Name: "m1", Cluster: "unit", MetaError: "read etcd data in /x: input/output error", Reason: "observation failed"}
		st.Time = time.Now().UTC().Format(time.RFC3339)
		json.NewEncoder(w).Encode(st)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	raw, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	hcl := strings.Replace(string(raw), "  coordination", "  provider_extra_placeholder\n  coordination", 1)
	i := strings.Index(hcl, "    }\n  }\n  provider_extra_placeholder")
	if i < 0 {
		t.Fatalf("unexpected fixture config:\n%s", raw)
	}
	hcl = hcl[:i] + "    }\n    member \"m1\" {\n      address = \"127.0.0.1\"\n      client_port = 3\n      peer_port = 4\n      status_port = " + port + "\n    }\n  }\n" + hcl[i+len("    }\n  }\n  provider_extra_placeholder\n"):]
	hcl = strings.Replace(hcl, "size     = 1", "size     = 2", 1)
	if err := os.WriteFile(f.config, []byte(hcl), 0o600); err != nil {
		t.Fatal(err)
	}
	coordDir := filepath.Join(filepath.Dir(f.config), "coord")
	if err := os.Remove(filepath.Join(coordDir, "record.json")); err != nil {
		t.Fatal(err)
	}
	ui := cli.NewMockUi()
	code := (&snapshotRestoreCommand{ui: ui}).Run([]string{"-config", f.config, "-member", "m0", "latest"})
	t.Logf("exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	if code == 0 {
		got, err := f.co.Record(context.Background())
		t.Fatalf("restored without a record while m1 answers only meta_error (data unknown), recorded %+v (%v)", got, err)
	}
}
