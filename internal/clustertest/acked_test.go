package clustertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// flakyKV answers Get from a map after failing the first fails reads of
// each key: a leader election or a reconnecting client, not a lost key.
type flakyKV struct {
	clientv3.KV
	fails int
	calls map[string]int
	data  map[string]string
}

func (f *flakyKV) Get(_ context.Context, key string, _ ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	f.calls[key]++
	if f.calls[key] <= f.fails {
		return nil, errors.New("etcdserver: leader changed")
	}
	resp := &clientv3.GetResponse{}
	if v, ok := f.data[key]; ok {
		resp.Count = 1
		resp.Kvs = []*mvccpb.KeyValue{{Key: []byte(key), Value: []byte(v)}}
	}
	return resp, nil
}

// The job review's item 11: CheckAcked reported a read that failed once as
// a lost key. A failed read is retried; only a read that succeeds and
// finds nothing is a loss, and reads that never succeed are reported as
// unreadable, not lost.
func TestAckedCheckRetriesTransientReadErrors(t *testing.T) {
	kv := &flakyKV{fails: 2, calls: map[string]int{}, data: map[string]string{"a": "1", "b": "1"}}
	lost, err := missingAcked(kv, []string{"a", "b"}, 5*time.Second, time.Millisecond)
	if err != nil || len(lost) != 0 {
		t.Fatalf("two failed reads before each answer: lost %v, error %v; want nothing lost", lost, err)
	}
	kv = &flakyKV{fails: 1, calls: map[string]int{}, data: map[string]string{"a": "1"}}
	lost, err = missingAcked(kv, []string{"a", "gone"}, 5*time.Second, time.Millisecond)
	if err != nil || len(lost) != 1 || lost[0] != "gone" {
		t.Fatalf("lost %v, error %v; want [gone] lost", lost, err)
	}
	kv = &flakyKV{fails: 1 << 30, calls: map[string]int{}, data: map[string]string{"a": "1"}}
	lost, err = missingAcked(kv, []string{"a"}, 50*time.Millisecond, time.Millisecond)
	if err == nil || len(lost) != 0 {
		t.Fatalf("reads that never succeed: lost %v, error %v; want no loss and an error", lost, err)
	}
}
