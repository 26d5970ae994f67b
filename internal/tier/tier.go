package tier

import (
	"flag"
	"testing"
)

// Main is a TestMain body for a package whose tests share processes started
// once (agents, a built binary): in the short tier, and when go test -list
// only lists the tests, it runs m.Run() without calling start; in the full
// tier it returns start(m), which starts the processes, runs m.Run() and
// stops them. It parses the flags first, as a TestMain must before
// testing.Short.
//
//	func TestMain(m *testing.M) { os.Exit(tier.Main(m, run)) }
func Main(m *testing.M, start func(*testing.M) int) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() || listing() {
		return m.Run()
	}
	return start(m)
}

// listing reports whether the test binary was asked only to list its tests
// (go test -list), which runs none.
func listing() bool {
	f := flag.Lookup("test.list")
	return f != nil && f.Value.String() != ""
}

// Starts skips t in the short tier; what names the processes the test
// needs ("a Nomad agent", "Consul and Nomad agents", "member processes"):
// the skip message then reads "starts a Nomad agent: run without -short".
func Starts(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("starts %s: run without -short", what)
	}
}
