// Package docs holds the project's documents; its tests keep README.md and
// docs/*.md honest: every relative link resolves, and the README stays the
// short page a newcomer reads first.
package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// documents returns README.md and every docs/*.md, as paths from this
// directory.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md found")
	}
	return append([]string{filepath.Join("..", "README.md")}, docs...)
}

// line is a line of a Markdown text and its 1-based number.
type line struct {
	n    int
	text string
}

// prose returns the lines of a Markdown text outside fenced code blocks.
func prose(text string) []line {
	var out []line
	fence := false
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if !fence {
			out = append(out, line{i + 1, l})
		}
	}
	return out
}

// span is an inline code span, whose text is no link.
var span = regexp.MustCompile("`[^`]*`")

// links returns the targets of the links on a line of prose.
func links(l string) []string {
	var out []string
	for _, m := range link.FindAllStringSubmatch(span.ReplaceAllString(l, ""), -1) {
		out = append(out, m[1])
	}
	return out
}

// link is an inline Markdown link or image target: [text](target) or
// [text](target "title").
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// anchors returns the anchors GitHub gives the headings of a Markdown
// text: lowercased, punctuation dropped (letters, digits, spaces, '-' and
// '_' kept), spaces turned into '-', a repeated one suffixed -1, -2, ...
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimLeft(line, "#")
		if len(heading) == len(line) || !strings.HasPrefix(heading, " ") {
			continue // "#word" is not a heading
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// brokenLinks returns, for the document at path with text, every relative
// link whose file does not exist or whose #anchor is no heading there.
func brokenLinks(t *testing.T, path, text string) []string {
	t.Helper()
	var broken []string
	for _, l := range prose(text) {
		n := l.n
		for _, target := range links(l.text) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			where := path
			if file != "" {
				where = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
			}
			if _, err := os.Stat(where); err != nil {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: no such file %s", path, n, target, where))
				continue
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(where, ".md") {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: an anchor into a file that is not Markdown", path, n, target))
				continue
			}
			b, err := os.ReadFile(where)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(string(b))[anchor] {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: no heading #%s in %s", path, n, target, anchor, where))
			}
		}
	}
	return broken
}

// Every relative link in README.md and docs/*.md names a file that exists
// and, with #anchor, a heading of that file.
func TestRelativeLinksResolve(t *testing.T) {
	count := 0
	for _, path := range documents(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range prose(string(b)) {
			count += len(links(l.text))
		}
		for _, e := range brokenLinks(t, path, string(b)) {
			t.Error(e)
		}
	}
	if count < 20 {
		t.Fatalf("only %d links found: is the link pattern still right?", count)
	}
	t.Logf("%d links checked", count)
}

// The checker's own rules: GitHub's anchors, code left alone.
func TestLinkCheckerRules(t *testing.T) {
	a := anchors("# Title\n## Operators: `etcd-nomad env`\n### Day-2 operations\n## etcd's authorization: `access {}`\n```sh\n# not a heading\n```\n## Title\n")
	for _, want := range []string{"title", "operators-etcd-nomad-env", "day-2-operations", "etcds-authorization-access-", "title-1"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Errorf("a comment in a code block made an anchor: %v", a)
	}
	dir := t.TempDir()
	doc := filepath.Join(dir, "a.md")
	text := "# A\n[ok](#a) [gone](#b) [file](b.md) [code](`x`)\n```\n[in code](nowhere.md)\n```\n`[span](nowhere.md)` [web](https://example.com/x)\n"
	if err := os.WriteFile(doc, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	got := brokenLinks(t, doc, text)
	if len(got) != 2 || !strings.Contains(got[0], "no heading #b") || !strings.Contains(got[1], "no such file") {
		t.Errorf("broken links: %q, want #b and b.md", got)
	}
}

// The README is the page a newcomer reads in five minutes: at
// most 250 lines, no prose line over 300 characters, and the two commands
// CI and reviewers look for there.
func TestReadmeStaysShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if n := strings.Count(text, "\n"); n > 250 {
		t.Errorf("README.md has %d lines, at most 250: move the detail to docs/", n)
	}
	for _, l := range prose(text) {
		if n := len([]rune(l.text)); n > 300 && !strings.HasPrefix(l.text, "|") {
			t.Errorf("README.md:%d: %d characters of prose, at most 300", l.n, n)
		}
	}
	for _, cmd := range []string{"make demo ", "make test "} {
		if !strings.Contains(text, "\n"+cmd) {
			t.Errorf("README.md: no line starting with %q", cmd)
		}
	}
}
