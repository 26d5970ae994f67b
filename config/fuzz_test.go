package config

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// fuzzFile names the fuzzed definition: a directory that does not exist,
// so relative ca_file / identity_file paths resolve to nothing.
const fuzzFile = "/nonexistent-etcd-nomad-fuzz/cluster.hcl"

// FuzzLoad: any bytes give a cluster or diagnostics, never a panic. An
// error means no cluster and a cluster means no error; every diagnostic
// has a summary, and one with a place names the file; the diagnostics
// print. Seeds: testdata/fuzz/FuzzLoad and every file in examples/.
func FuzzLoad(f *testing.F) {
	examples, _ := filepath.Glob("../examples/*.hcl")
	for _, e := range examples {
		if b, err := os.ReadFile(e); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c, res, diags := Load(fuzzFile, src)
		if (c == nil) != diags.HasErrors() {
			t.Fatalf("cluster %v with diagnostics %v: want a cluster exactly when there is no error", c != nil, diags)
		}
		for _, d := range diags {
			if d.Summary == "" {
				t.Fatalf("diagnostic without a summary: %#v", d)
			}
			if d.Subject != nil && d.Subject.Filename != fuzzFile {
				t.Fatalf("diagnostic %q names file %q, want %q", d.Summary, d.Subject.Filename, fuzzFile)
			}
		}
		if err := res.WriteDiagnostics(io.Discard, diags); err != nil {
			t.Fatalf("write diagnostics: %v", err)
		}
		if c == nil {
			return
		}
		if c.Name == "" || c.Size < 1 || len(c.Source) != len(src) {
			t.Fatalf("accepted a cluster with name %q, size %d", c.Name, c.Size)
		}
		// What was accepted once is accepted again (no hidden state).
		if c2, _, diags2 := Load(fuzzFile, src); c2 == nil || len(diags2) != len(diags) {
			t.Fatalf("second load differs: %v", diags2)
		}
	})
}
