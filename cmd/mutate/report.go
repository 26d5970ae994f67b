package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// safety reports whether the mutant breaks one of docs/design.md's numbered
// safety invariants (its invariant field starts with the number).
func (m Mutant) safety() bool {
	return len(m.Invariant) > 0 && m.Invariant[0] >= '0' && m.Invariant[0] <= '9'
}

// Report renders the results as the markdown of docs/mutation.md.
func Report(rs []Result, took time.Duration) string {
	var b strings.Builder
	b.WriteString("# Mutation testing\n\n")
	b.WriteString("`make mutate` (`go run ./cmd/mutate -out docs/mutation.md`) applies each hand-written mutant of\n")
	b.WriteString("[cmd/mutate/mutants.txt](../cmd/mutate/mutants.txt) to a scratch copy of the repository, one at a time, and\n")
	b.WriteString("runs the mutated package's tests with `-short`. A mutant is killed when a test fails. Each mutant breaks\n")
	b.WriteString("one documented rule; those marked with an invariant number break a safety invariant of\n")
	b.WriteString("[the design's table](design.md#safety-invariants-and-where-they-are-tested).\n")
	b.WriteString("Not part of `make test` (it runs every package's tests once per mutant).\n\n")
	fmt.Fprintf(&b, "Run on %s, %s in all.\n\n", time.Now().UTC().Format("2006-01-02"), took.Round(time.Second))

	type score struct{ killed, survived, invalid, safety, safetyKilled int }
	per := map[string]*score{}
	var pkgs []string
	tot := &score{}
	for _, r := range rs {
		s := per[r.Package]
		if s == nil {
			s = &score{}
			per[r.Package] = s
			pkgs = append(pkgs, r.Package)
		}
		for _, s := range []*score{s, tot} {
			switch r.Status {
			case "killed":
				s.killed++
			case "survived":
				s.survived++
			default:
				s.invalid++
			}
			if r.safety() && r.Status != "invalid" {
				s.safety++
				if r.Status == "killed" {
					s.safetyKilled++
				}
			}
		}
	}
	sort.Strings(pkgs)
	pct := func(k, n int) string {
		if n == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f%%", 100*float64(k)/float64(n))
	}
	b.WriteString("| package | mutants | killed | survived | score | safety mutants killed |\n|---|---|---|---|---|---|\n")
	row := func(name string, s *score) {
		n := s.killed + s.survived
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %d of %d |\n", name, n, s.killed, s.survived, pct(s.killed, n), s.safetyKilled, s.safety)
	}
	for _, p := range pkgs {
		row(p, per[p])
	}
	row("**all**", tot)
	if tot.invalid > 0 {
		fmt.Fprintf(&b, "\n%d mutant(s) could not be applied or did not compile: fix the list.\n", tot.invalid)
	}

	b.WriteString("\n## Survivors\n\n")
	any := false
	for _, r := range rs {
		if r.Status != "survived" {
			continue
		}
		any = true
		why := r.Accepted
		if why == "" {
			why = "**not accepted: needs a test**"
		}
		fmt.Fprintf(&b, "- `%s` (%s, %s): %s\n", r.ID, r.File, r.Invariant, why)
	}
	if !any {
		b.WriteString("None.\n")
	}

	b.WriteString("\n## Every mutant\n\n| mutant | breaks | result | killed by | time |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		by := strings.Join(r.KilledBy, ", ")
		if r.Status == "invalid" {
			by = r.Detail
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.ID, strings.ReplaceAll(r.Invariant, "|", "/"), r.Status, strings.ReplaceAll(by, "|", "/"), r.Took.Round(time.Second))
	}
	return b.String()
}
