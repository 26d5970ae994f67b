package local

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// The cluster CA is created once: contenders that all find no value and
// store theirs at the same moment must still all get one and the same
// value back. Many rounds on fresh keys, each started together, so that
// an overwriting store is caught, not only a slow one.
func TestLoadOrStoreContendersAgreeEveryRound(t *testing.T) {
	c, _ := New(t.TempDir())
	ctx := context.Background()
	for round := range 200 {
		key := fmt.Sprintf("ca%d", round)
		start := make(chan struct{})
		got := make([]string, 8)
		var wg sync.WaitGroup
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				b, err := c.LoadOrStore(ctx, key, []byte(fmt.Sprint(i)))
				if err != nil {
					t.Error(err)
				}
				got[i] = string(b)
			}()
		}
		close(start)
		wg.Wait()
		for _, g := range got {
			if g != got[0] {
				t.Fatalf("round %d: contenders got different values %q", round, got)
			}
		}
	}
}
