package main

import (
	"fmt"
	"strings"
)

// Parse reads the mutants file. Each mutant is a block:
//
//	mutant: task-join-as-voter
//	package: task
//	file: task/act.go
//	invariant: 3 — new members join as learners
//	tests: ./task            (optional; default ./<package>)
//	accepted: why a survivor is acceptable (optional)
//	--- original
//	<exact lines of the file>
//	--- mutated
//	<their replacement>
//	--- end
//
// Lines starting with # between blocks are comments. The original must
// occur exactly once in the file, so a stale mutant is reported, never
// silently skipped.
func Parse(text string) ([]Mutant, error) {
	var (
		out   []Mutant
		cur   *Mutant
		body  *[]string
		orig  []string
		mut   []string
		lines = strings.Split(text, "\n")
	)
	finish := func(n int) error {
		if cur == nil {
			return nil
		}
		cur.Original, cur.Mutated = strings.Join(orig, "\n"), strings.Join(mut, "\n")
		switch {
		case cur.Package == "" || cur.File == "" || cur.Invariant == "":
			return fmt.Errorf("line %d: mutant %s needs package, file and invariant", cur.line, cur.ID)
		case cur.Original == "" || cur.Original == cur.Mutated:
			return fmt.Errorf("line %d: mutant %s changes nothing", cur.line, cur.ID)
		}
		if len(cur.Tests) == 0 {
			cur.Tests = []string{"./" + cur.Package}
		}
		out = append(out, *cur)
		cur, body, orig, mut = nil, nil, nil, nil
		return nil
	}
	ids := map[string]bool{}
	for i, line := range lines {
		n := i + 1
		if body != nil {
			switch line {
			case "--- mutated":
				body = &mut
			case "--- end":
				if err := finish(n); err != nil {
					return nil, err
				}
			default:
				*body = append(*body, line)
			}
			continue
		}
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if t == "--- original" {
			if cur == nil {
				return nil, fmt.Errorf("line %d: snippet outside a mutant", n)
			}
			body = &orig
			continue
		}
		key, val, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: want key: value, got %q", n, t)
		}
		val = strings.TrimSpace(val)
		if key == "mutant" {
			if cur != nil {
				return nil, fmt.Errorf("line %d: mutant %s has no --- original block", n, cur.ID)
			}
			if ids[val] {
				return nil, fmt.Errorf("line %d: mutant %s defined twice", n, val)
			}
			ids[val] = true
			cur = &Mutant{ID: val, line: n}
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("line %d: %s outside a mutant", n, key)
		}
		switch key {
		case "package":
			cur.Package = val
		case "file":
			cur.File = val
		case "invariant":
			cur.Invariant = val
		case "tests":
			cur.Tests = strings.Fields(val)
		case "accepted":
			cur.Accepted = val
		default:
			return nil, fmt.Errorf("line %d: unknown key %q", n, key)
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("mutant %s is not closed by --- end", cur.ID)
	}
	return out, nil
}
