package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/internal/tier"
)

func (c *cluster) allocIDs() string {
	var ids []string
	for _, a := range c.allocs() {
		ids = append(ids, a.ID)
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

func (c *cluster) jobVersion() uint64 {
	c.t.Helper()
	j, _, err := nomadClient(c.t).Jobs().Info(c.name, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return *j.Version
}

// Once, `etcd-nomad job run` after a plain
// `nomad job run` of the same rendered job rolled every allocation. The
// job used to carry the renderer's NOMAD_ADDR and CONSUL_HTTP_ADDR, so a
// file rendered in one shell and a `job run` from another (which needs
// NOMAD_ADDR) differed in every task's env: a destructive update. Rendered
// here where neither is set, then re-submitted by `etcd-nomad job run`
// where both are: the same job version and allocations.
func TestJobRunAfterNomadJobRunIsANoOp(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	t.Parallel() // disturbs only its own job: see harness_test.go
	c := newCluster(t, "e2e-rerun", 1)
	render := exec.Command(binary, "job", "render", "-binary", binary, c.file)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NOMAD_") && !strings.HasPrefix(kv, "CONSUL_") {
			render.Env = append(render.Env, kv)
		}
	}
	spec, err := render.Output()
	if err != nil {
		t.Fatalf("job render: %v", err)
	}
	path := filepath.Join(c.dir, "etcd.nomad.hcl")
	if err := os.WriteFile(path, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	c.submit(path)
	c.waitPassing(1, 2*time.Minute)
	before, version := c.allocIDs(), c.jobVersion()
	out, err := exec.Command(binary, "job", "run", "-binary", binary, "-timeout", "2m", c.file).CombinedOutput()
	if err != nil {
		t.Fatalf("etcd-nomad job run: %v\n%s", err, out)
	}
	t.Logf("etcd-nomad job run:\n%s", out)
	if v := c.jobVersion(); v != version {
		_, diffs, _, _ := nomadClient(t).Jobs().Versions(c.name, true, nil)
		for _, jd := range diffs {
			t.Logf("diff: %s", describeDiff(jd))
		}
		t.Errorf("job version %d after re-running the same definition, was %d", v, version)
	}
	if after := c.allocIDs(); after != before {
		t.Errorf("allocations %s after re-running the same definition, were %s", after, before)
	}
}

// describeDiff names the fields a job version changed.
func describeDiff(d *nomadapi.JobDiff) string {
	var out []string
	var walk func(path string, fields []*nomadapi.FieldDiff, objs []*nomadapi.ObjectDiff)
	walk = func(path string, fields []*nomadapi.FieldDiff, objs []*nomadapi.ObjectDiff) {
		for _, f := range fields {
			if f.Type != "None" {
				out = append(out, fmt.Sprintf("%s.%s %s %q -> %q", path, f.Name, f.Type, f.Old, f.New))
			}
		}
		for _, o := range objs {
			if o.Type != "None" {
				walk(path+"."+o.Name, o.Fields, o.Objects)
			}
		}
	}
	walk("job", d.Fields, d.Objects)
	for _, tg := range d.TaskGroups {
		walk("group "+tg.Name, tg.Fields, tg.Objects)
		for _, tk := range tg.Tasks {
			walk("task "+tk.Name, tk.Fields, tk.Objects)
		}
	}
	return strings.Join(out, "; ")
}
