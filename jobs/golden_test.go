package jobs

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/config"
)

var update = flag.Bool("update", false, "rewrite jobs/testdata/*.nomad.hcl from the renderer")

// TestRenderGolden renders every example definition with a Nomad provider
// (and examples/nomad.hcl with its release artifact instead of a binary)
// and compares the whole job with testdata/<name>.nomad.hcl, so that a
// change of the rendered job shows in review as a diff of the golden
// file. After an intended change: go test ./jobs -run TestRenderGolden
// -update.
func TestRenderGolden(t *testing.T) {
	files, err := filepath.Glob("../examples/*.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(src, []byte(`provider "nomad"`)) {
			cases[strings.TrimSuffix(filepath.Base(f), ".hcl")] = src
		}
	}
	nomad, ok := cases["nomad"]
	if !ok {
		t.Fatal("examples/nomad.hcl is gone: the golden test has no job to render")
	}
	const binary = `    binary = "/usr/local/bin/etcd-nomad"`
	const artifact = `    artifact {
      source   = "https://releases.example.com/etcd-nomad_0.1.0_linux_amd64.tar.gz"
      checksum = "sha256:` + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + `"
      path     = "etcd-nomad"
    }`
	if !bytes.Contains(nomad, []byte(binary)) {
		t.Fatalf("examples/nomad.hcl no longer says %q: update the artifact case", binary)
	}
	cases["nomad-artifact"] = bytes.Replace(nomad, []byte(binary), []byte(artifact), 1)

	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			cl, _, diags := config.Load("examples/"+name+".hcl", src)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			got, err := Render(cl, Options{})
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".nomad.hcl")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./jobs -run TestRenderGolden -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("the rendered job differs from %s (-update rewrites it after an intended change):\n%s", golden, lineDiff(string(want), got))
			}
		})
	}
}

// lineDiff names the first lines where want and got differ, with a few
// lines of each.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		if i < len(w) && i < len(g) && w[i] == g[i] {
			continue
		}
		end := func(xs []string) []string { return xs[min(i, len(xs)):min(i+5, len(xs))] }
		return fmt.Sprintf("line %d:", i+1) + "\n- " + strings.Join(end(w), "\n- ") + "\n+ " + strings.Join(end(g), "\n+ ")
	}
	return "(equal lines, different endings)"
}
