package e2e_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
)

// releaseArchive returns a .tar.gz holding the etcd-nomad binary (0755) and
// a VERSION file, and its "sha256:<hex>".
func releaseArchive(t *testing.T, version string) ([]byte, string) {
	t.Helper()
	bin, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"etcd-nomad", 0o755, bin}, {"VERSION", 0o644, []byte(version + "\n")}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), "sha256:" + hex.EncodeToString(sum[:])
}

// releases serves two release archives ("1", "2") on 127.0.0.1 until
// the test ends; deploy points c's definition at one of them.
type releases struct {
	addr string
	sums map[string]string
}

func serveReleases(t *testing.T) releases {
	t.Helper()
	archives := map[string][]byte{}
	r := releases{sums: map[string]string{}}
	for _, v := range []string{"1", "2"} {
		archives[v], r.sums[v] = releaseArchive(t, v)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		v := strings.TrimSuffix(strings.TrimPrefix(req.URL.Path, "/etcd-nomad_"), "_linux.tar.gz")
		b, ok := archives[v]
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(b)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	r.addr = ln.Addr().String()
	return r
}

// deploy renders c's definition with nomad settings and the artifact of
// release version (no -binary) and submits it with `nomad job run`.
func (r releases) deploy(t *testing.T, c *cluster, orig []byte, settings, version string) {
	t.Helper()
	block := fmt.Sprintf("  nomad {\n%s    artifact {\n      source   = \"http://%s/etcd-nomad_%s_linux.tar.gz\"\n      checksum = %q\n    }\n", settings, r.addr, version, r.sums[version])
	if err := os.WriteFile(c.file, []byte(strings.Replace(string(orig), "  nomad {\n", block, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The job on stdout; stderr carries notes for the operator (where the
	// CA key-encryption key comes from), as `job render > file` expects.
	render := exec.Command(binary, "job", "render", c.file)
	var stderr strings.Builder
	render.Stderr = &stderr
	spec, err := render.Output()
	if err != nil {
		t.Fatalf("job render: %v\n%s", err, stderr.String())
	}
	path := filepath.Join(c.dir, "etcd.nomad.hcl")
	if err := os.WriteFile(path, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	c.submit(path)
}

// A release artifact on real agents: the clients download the release named
// by nomad { artifact }, check its checksum and run the binary from the
// task directory (no -binary, no path on the clients); a new release is a
// change of the job that Nomad rolls out one member at a time, each
// waiting for the previous one's check, and the cluster keeps its voters
// and every acknowledged write.
func TestArtifactReleaseRollsOneMemberAtATime(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	t.Parallel() // disturbs only its own job: see harness_test.go
	rel := serveReleases(t)
	c := newCluster(t, "e2e-artifact", 3)
	orig, err := os.ReadFile(c.file)
	if err != nil {
		t.Fatal(err)
	}
	rel.deploy(t, c, orig, "", "1")
	c.waitPassing(3, 3*time.Minute)
	before := map[string]bool{}
	for _, a := range c.allocs() {
		if v := releaseIn(a.ID); v != "1" {
			t.Fatalf("allocation %s runs release %q, want 1", a.ID, v)
		}
		before[a.ID] = true
	}
	cli := c.client()
	w := clustertest.StartWriter(cli, "artifact")
	watch := clustertest.WatchMembership(cli)
	rel.deploy(t, c, orig, "", "2")
	waitFor(t, 5*time.Minute, "every allocation replaced by one running release 2", func() (bool, string) {
		allocs := c.allocs()
		fresh := 0
		for _, a := range allocs {
			if !before[a.ID] && a.ClientStatus == "running" && releaseIn(a.ID) == "2" {
				fresh++
			}
		}
		p, total, _ := c.checks()
		return fresh == 3 && len(allocs) == 3 && p == 3 && total == 3, fmt.Sprintf("%d on release 2 of %d, checks %d/%d", fresh, len(allocs), p, total)
	})
	acked, gap := w.Finish()
	maxLearners, minVoters, _ := watch()
	t.Logf("release 1 -> 2: %d acknowledged puts, longest failure window %s; at most %d learners, at least %d voters", len(acked), gap.Round(time.Millisecond), maxLearners, minVoters)
	if minVoters < 2 {
		t.Errorf("membership fell to %d voters: the release was not rolled one member at a time", minVoters)
	}
	clustertest.CheckAcked(t, c.client(), acked)
	w.CheckLeases(t, c.client())
}

// The exec driver runs the member in a chroot (the
// client's chroot_env); the artifact, unpacked into the task directory,
// is inside it. Three members start, find Nomad through the task API
// socket and Consul, and pass their checks.
func TestExecDriverRunsTheRelease(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	t.Parallel() // disturbs only its own job: see harness_test.go
	rel := serveReleases(t)
	c := newCluster(t, "e2e-exec", 3)
	orig, err := os.ReadFile(c.file)
	if err != nil {
		t.Fatal(err)
	}
	// exec enforces memory_mb (raw_exec does not): give etcd room.
	orig = []byte(strings.Replace(string(orig), "memory_mb = 128", "memory_mb = 256", 1))
	rel.deploy(t, c, orig, "    driver = \"exec\"\n", "1")
	took := c.waitPassing(3, 5*time.Minute)
	t.Logf("3 members on the exec driver passing after %s", took.Round(time.Second))
	for _, a := range c.allocs() {
		full, _, err := nomadClient(t).Allocations().Info(a.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := full.Job.TaskGroups[0].Tasks[0].Driver; d != "exec" {
			t.Fatalf("allocation %s ran driver %q", a.ID, d)
		}
		if v := releaseIn(a.ID); v != "1" {
			t.Fatalf("allocation %s: release %q in its task directory, want 1", a.ID, v)
		}
	}
}

// releaseIn reads the VERSION file the artifact unpacked into allocation
// id's task directory ("" when absent).
func releaseIn(id string) string {
	b, err := os.ReadFile(filepath.Join(nomad.AllocDir, id, "etcd", "local", "VERSION"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
