package hosts_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
)

// TestDataFollowsAllocationsOnHostVolumes (invariant 12, "data follows
// allocations"): members run with driver "exec" on the host volume "etcd"
// of three client hosts, one per host. `nomad job stop` (every member
// stops) then `nomad job run` of the same job brings the cluster back from
// the data each host kept: the same cluster id and record epoch (no
// recovery, no new seed), every member under its old name on its old host,
// nothing set aside, and every key written before the stop.
func TestDataFollowsAllocationsOnHostVolumes(t *testing.T) {
	b := startBedWith(t, bedOptions{volumes: true})
	hosts, took := b.waitHealthy(4*time.Minute, nil)
	t.Logf("3 members on hosts %s (exec driver, host volumes), healthy %s after the job was submitted", hostNames(hosts), took.Round(time.Millisecond))
	for name, h := range hosts {
		if h.Volume == "" {
			t.Fatalf("member %s runs on host %s, which has no host volume", name, h.Name)
		}
	}
	cli := b.clientOn(b.spare(hosts))
	var keys []string
	for i := range 200 {
		k := fmt.Sprintf("kept/%03d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.Put(ctx, k, k)
		cancel()
		if err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		keys = append(keys, k)
	}
	before := b.record()

	nomadBin, err := devagents.Bin("nomad", devagents.NomadVersion)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nomadBin, "job", "stop", "-detach", "-address", b.tb.NomadAddr(), clusterName).CombinedOutput(); err != nil {
		t.Fatalf("nomad job stop: %v\n%s", err, out)
	}
	clustertest.WaitFor(t, 2*time.Minute, "every allocation stopped", func() (bool, string) {
		allocs, _, err := b.nomad.Jobs().Allocations(clusterName, true, nil)
		if err != nil {
			return false, err.Error()
		}
		for _, a := range allocs {
			if a.ClientStatus == nomadapi.AllocClientStatusRunning || a.ClientStatus == nomadapi.AllocClientStatusPending {
				return false, fmt.Sprintf("allocation %s %s", a.ID[:8], a.ClientStatus)
			}
		}
		return true, ""
	})
	// data_dir/<member name>/current/etcd: the next allocation on the
	// host, named otherwise, adopts it (task/adopt.go).
	for name, h := range hosts {
		if got, _ := filepath.Glob(filepath.Join(h.Volume, name, "current", "etcd", "member")); len(got) != 1 {
			all, _ := filepath.Glob(filepath.Join(h.Volume, "*", "*"))
			t.Fatalf("member %s's data is not on host %s's volume after the stop: %v", name, h.Name, all)
		}
	}
	t.Logf("job stopped; each host volume keeps its member's data")

	start := time.Now()
	if out, err := exec.Command(nomadBin, "job", "run", "-detach", "-address", b.tb.NomadAddr(), b.specFile).CombinedOutput(); err != nil {
		t.Fatalf("nomad job run: %v\n%s", err, out)
	}
	again, _ := b.waitHealthy(3*time.Minute, nil)
	t.Logf("job run again: healthy %s later on hosts %s", time.Since(start).Round(time.Millisecond), hostNames(again))

	after := b.record()
	if after.ClusterID != before.ClusterID || after.Epoch != before.Epoch {
		t.Errorf("record after the stop and run: cluster %x epoch %d, was cluster %x epoch %d (a new seed or a recovery, not the kept data)", after.ClusterID, after.Epoch, before.ClusterID, before.Epoch)
	}
	for name, h := range hosts {
		if again[name] != h {
			t.Errorf("member %s came back on host %v, was on %s with its data", name, again[name], h.Name)
		}
		if aside, _ := filepath.Glob(filepath.Join(h.Volume, "*", "aside", "*")); len(aside) > 0 {
			t.Errorf("host %s set data aside: %v", h.Name, aside)
		}
	}
	clustertest.CheckAcked(t, b.clientOn(b.spare(again)), keys)
}

// record reads the cluster's record from Consul.
func (b *bed) record() (r struct{ ClusterID, Epoch uint64 }) {
	b.t.Helper()
	co, err := backends.Coordinator(b.cl)
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := co.Record(ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	r.ClusterID, r.Epoch = rec.ClusterID, rec.Epoch
	return r
}
