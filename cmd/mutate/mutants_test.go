package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every mutant of the list applies to today's code: its original snippet
// occurs exactly once in its file. A refactoring that makes a mutant stale
// fails here, in `make test`, not only in the slow `make mutate`.
func TestEveryMutantApplies(t *testing.T) {
	b, err := os.ReadFile("mutants.txt")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Parse(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 30 {
		t.Fatalf("only %d mutants", len(ms))
	}
	for _, m := range ms {
		src, err := os.ReadFile(filepath.Join("..", "..", m.File))
		if err != nil {
			t.Errorf("%s: %v", m.ID, err)
			continue
		}
		if n := strings.Count(string(src), m.Original); n != 1 {
			t.Errorf("%s: the original snippet occurs %d times in %s, want once", m.ID, n, m.File)
		}
	}
}

func TestParse(t *testing.T) {
	ms, err := Parse(`# a comment
mutant: x
package: p
file: p/f.go
invariant: 1: something
accepted: why
--- original
	a := 1
	b := 2
--- mutated
	a := 2
--- end
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Original != "\ta := 1\n\tb := 2" || ms[0].Mutated != "\ta := 2" || ms[0].Tests[0] != "./p" || !ms[0].safety() || ms[0].Accepted != "why" {
		t.Fatalf("parsed %+v", ms)
	}
	for _, bad := range []string{
		"mutant: x\n--- original\na\n--- mutated\nb\n--- end\n",                                    // no package
		"mutant: x\npackage: p\nfile: f\ninvariant: i\n--- original\na\n--- mutated\na\n--- end\n", // no change
		"mutant: x\npackage: p\nfile: f\ninvariant: i\n--- original\na\n",                          // not closed
	} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse accepted %q", bad)
		}
	}
}
