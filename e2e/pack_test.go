package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/internal/tier"
	"github.com/etcd-nomad/etcd-nomad/nomad/pack"
)

// The Nomad Pack (nomad/pack/etcd), rendered as nomad-pack renders it
// (nomad-pack is not served by the module proxy here: see package pack),
// submitted with the real `nomad job run`: its member seeds and passes its
// check, serves a write, and `etcd-nomad job run` of the definition the
// pack embedded finds nothing to change (the same job version and
// allocation): Nomad itself reads the two jobs as one.
func TestPackRunsOnNomad(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	t.Parallel() // disturbs only its own job: see harness_test.go
	c := newCluster(t, "e2e-pack", 1)
	spec, err := pack.Render("../nomad/pack/etcd", map[string]any{
		"cluster_name":   c.name,
		"size":           1,
		"stale_after":    "5s",
		"consul_prefix":  "etcd-nomad-e2e",
		"binary":         binary,
		"distinct_hosts": false,
		"cpu":            100,
		"memory_mb":      128,
		"kill_timeout":   "20s",
		"consul_address": strings.TrimPrefix(consul.Addr, "http://"),
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(c.dir, "etcd.nomad")
	if err := os.WriteFile(path, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	// The harness reads the cluster from c.file: the pack's definition.
	_, def, ok := strings.Cut(spec, "destination = \"local/cluster.hcl\"")
	if ok {
		_, def, ok = strings.Cut(def, "<<EOT\n")
	}
	if ok {
		def, _, ok = strings.Cut(def, "\nEOT\n")
	}
	if !ok {
		t.Fatalf("no local/cluster.hcl template in the pack's job:\n%s", spec)
	}
	if err := os.WriteFile(c.file, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}

	c.submit(path)
	c.waitPassing(1, 2*time.Minute)
	cli := c.client()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/pack/greeting", "hello"); err != nil {
		t.Fatalf("put through the pack's member: %v", err)
	}

	before, version := c.allocIDs(), c.jobVersion()
	out, err := exec.Command(binary, "job", "run", "-binary", binary, "-timeout", "2m", c.file).CombinedOutput()
	if err != nil {
		t.Fatalf("etcd-nomad job run: %v\n%s", err, out)
	}
	if v := c.jobVersion(); v != version {
		_, diffs, _, _ := nomadClient(t).Jobs().Versions(c.name, true, nil)
		for _, jd := range diffs {
			t.Logf("diff: %s", describeDiff(jd))
		}
		t.Errorf("job version %d after 'etcd-nomad job run' of the pack's definition, was %d: the pack's job is not job render's", v, version)
	}
	if after := c.allocIDs(); after != before {
		t.Errorf("allocations %s after 'etcd-nomad job run' of the pack's definition, were %s", after, before)
	}
}
