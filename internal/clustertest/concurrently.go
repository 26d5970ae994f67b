package clustertest

import (
	"sync"
	"testing"
)

// Concurrently runs f(t, i) as the subtest names[i] of t for every i, at
// most width of them at once, and returns when all have ended. Each runs
// through t.Run on a goroutine of its own (t.Run may be called from several
// goroutines), so a Fatal ends only its own subtest, and width, not
// -parallel (which defaults to GOMAXPROCS: 2 on the CI machine), says how
// many run together. It is for subtests that mostly wait on processes and
// agents (a Consul session to expire, a deployment to pass its checks),
// each on a cluster of its own: distinct names, directories and ports.
func Concurrently(t *testing.T, width int, names []string, f func(t *testing.T, i int)) {
	t.Helper()
	if width < 1 {
		width = 1
	}
	slots := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i, name := range names {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			t.Run(name, func(t *testing.T) { f(t, i) })
		}()
	}
	wg.Wait()
}
