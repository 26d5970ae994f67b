package config_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/jobs"
)

// What validate compares against must be what the rendered job says:
// lost_after (stale_after's floor), the host volume's mount (data_dir's
// default with a host volume) and kill_timeout in whole seconds.
func TestRenderedJobMatchesConfigLimits(t *testing.T) {
	src := `cluster "x" {
  provider "nomad" {}
  coordination "consul" {}
  nomad {
    binary       = "/usr/local/bin/etcd-nomad"
    driver       = "exec"
    host_volume  = "etcd"
    kill_timeout = "15s"
  }
}`
	cl, _, diags := config.Load("x.hcl", []byte(src))
	if diags.HasErrors() || len(diags) > 0 {
		t.Fatalf("want a clean definition: %v", diags)
	}
	job, err := jobs.Render(cl, jobs.Options{Binary: "/usr/local/bin/etcd-nomad"})
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`lost_after\s*=\s*"([^"]+)"`).FindStringSubmatch(job)
	if m == nil {
		t.Fatalf("no lost_after in the job:\n%s", job)
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d != config.NomadLostAfter {
		t.Errorf("job's lost_after = %q, config.NomadLostAfter = %s", m[1], config.NomadLostAfter)
	}
	m = regexp.MustCompile(`volume_mount \{\s*volume\s*=\s*"data"\s*destination\s*=\s*"([^"]+)"`).FindStringSubmatch(job)
	if m == nil || m[1] != config.HostVolumeDataDir {
		t.Errorf("job mounts the host volume at %v, config.HostVolumeDataDir = %s:\n%s", m, config.HostVolumeDataDir, job)
	}
	if cl.DataDir != config.HostVolumeDataDir {
		t.Errorf("data_dir with a host volume defaults to %q, want %q", cl.DataDir, config.HostVolumeDataDir)
	}
	if !regexp.MustCompile(`kill_timeout\s*=\s*"15s"`).MatchString(job) {
		t.Errorf("kill_timeout 15s not rendered as \"15s\":\n%s", job)
	}
}
