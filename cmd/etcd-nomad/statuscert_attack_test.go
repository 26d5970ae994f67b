package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
)

// tls status-cert promises a certificate that opens /status and /metrics
// and nothing else. Where the coordinator held no status CA but the
// cluster CA in the clear (members of earlier versions), it issued from
// the cluster CA itself, silently, and -name root made a 720 h etcd root
// certificate for Prometheus (security review, session 11, F6). It
// refuses both.
func TestStatusCertNeverIssuesFromTheClusterCAOrAsRoot(t *testing.T) {
	cfgPath, co, _ := localClusterWithCA(t, nil)
	run := func(args ...string) (int, string) {
		ui := cli.NewMockUi()
		code := (&statusCertCommand{ui: ui}).Run(append([]string{"-config", cfgPath, "-dir", filepath.Join(t.TempDir(), "prom")}, args...))
		return code, ui.ErrorWriter.String()
	}
	if code, out := run("-name", "root"); code == 0 || !strings.Contains(out, "root") {
		t.Errorf("-name root: exit %d %q, want a refusal naming root", code, out)
	}
	if err := co.Delete(context.Background(), clusterca.StatusKey); err != nil {
		t.Fatal(err)
	}
	if code, out := run(); code == 0 || !strings.Contains(out, "status CA") {
		t.Errorf("with no status CA stored: exit %d %q, want a refusal (the cluster CA would open etcd)", code, out)
	}
}
