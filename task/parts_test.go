package task

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The member supervisor's parts (the packages under task/: trust,
// statusport, ...) are called by the loop and never call back: a part
// imports neither task nor another part, directly or through any other
// package of this module (docs/redesign.md, "Checking the graph"). Go
// refuses a circle; this refuses the arrows that would make one the day
// the loop imports both ends.
func TestPartsImportNoOtherPart(t *testing.T) {
	const module = "github.com/etcd-nomad/etcd-nomad"
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, e := range entries {
		if e.IsDir() && hasGoFiles(e.Name()) {
			parts = append(parts, e.Name())
		}
	}
	for _, want := range []string{"backup", "etcdproc", "statusport", "trust"} {
		if !slices.Contains(parts, want) {
			t.Fatalf("parts %v: %s is missing, the check would look at nothing", parts, want)
		}
	}
	for _, p := range parts {
		self := module + "/task/" + p
		for dep, via := range moduleDeps(t, module, self) {
			if dep == module+"/task" || strings.HasPrefix(dep, module+"/task/") && dep != self {
				t.Errorf("part task/%s reaches %s (through %s): a part imports no part and not the loop", p, strings.TrimPrefix(dep, module+"/"), strings.TrimPrefix(via, module+"/"))
			}
		}
	}
}

// hasGoFiles reports whether dir holds a Go file other than a test.
func hasGoFiles(dir string) bool {
	pkg, err := build.ImportDir(dir, 0)
	return err == nil && len(pkg.GoFiles) > 0
}

// moduleDeps returns the packages of module that pkg imports, directly or
// not (its tests aside), each with the package that imports it.
func moduleDeps(t *testing.T, module, pkg string) map[string]string {
	t.Helper()
	seen := map[string]string{}
	queue := []string{pkg}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		dir := filepath.Join("..", filepath.FromSlash(strings.TrimPrefix(cur, module)))
		bp, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", cur, err)
		}
		for _, imp := range bp.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if _, ok := seen[imp]; ok || imp == pkg {
				continue
			}
			seen[imp] = cur
			queue = append(queue, imp)
		}
	}
	return seen
}
