package e2e_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func clientv3WithPrefixCount() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
}

func allocLog(id string) string {
	b, _ := os.ReadFile(filepath.Join(workDir, "nomad", "data", "alloc", id, "alloc", "logs", "etcd.stderr.0"))
	return string(b)
}

// watchMembership samples the member list every 100ms until the returned
// function is called, which reports the most learners and fewest voters
// seen at once.
func watchMembership(t *testing.T, cli *clientv3.Client) func() (maxLearners, minVoters int) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	maxL, minV := 0, 1<<30
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			v, l, _, err := memberList(cli)
			if err != nil {
				continue
			}
			mu.Lock()
			maxL, minV = max(maxL, l), min(minV, v)
			mu.Unlock()
		}
	}()
	return func() (int, int) {
		close(stop)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return maxL, minV
	}
}
