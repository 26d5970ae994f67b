// Package clustertest is the test kit shared by the integration and e2e
// tests: polling with a deadline, reading the membership, writing keys with
// a client's retries, and watching availability and membership while a test
// disturbs a cluster. It only reads and writes through etcd's client.
package clustertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// WaitFor polls cond until it holds or timeout passes; on timeout it fails
// the test with the last state cond described.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen:\n%s", timeout, what, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Membership is one reading of the member list.
type Membership struct {
	Voters, Learners int
	// Names maps member names to ids (unstarted members have no name).
	Names map[string]uint64
	// IDs maps member ids to names.
	IDs map[uint64]string
}

// MemberList reads the membership through the cluster.
func MemberList(cli *clientv3.Client) (Membership, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return Membership{}, err
	}
	m := Membership{Names: map[string]uint64{}, IDs: map[uint64]string{}}
	for _, mem := range resp.Members {
		if mem.IsLearner {
			m.Learners++
		} else {
			m.Voters++
		}
		m.Names[mem.Name] = mem.ID
		m.IDs[mem.ID] = mem.Name
	}
	return m, nil
}

// PutKeys writes PREFIX/0000.. PREFIX/n-1. A put that fails (a member
// restarting, a leader election) is retried, as a client would, for up to
// 30s per key.
func PutKeys(t testing.TB, cli *clientv3.Client, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("%s/%04d", prefix, i)
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := cli.Put(ctx, key, fmt.Sprint(i))
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("put %s: %v", key, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// CountKeys returns how many keys are under PREFIX/.
func CountKeys(t testing.TB, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("count %s: %v", prefix, err)
	}
	return resp.Count
}

// Writer puts keys continuously and records which were acknowledged, the
// longest stretch of time in which no put succeeded, and how many keys
// failed even when retried once, as a client would.
type Writer struct {
	mu         sync.Mutex
	acked      []string
	lastOK     time.Time
	longestGap time.Duration
	failed     int
	retried    []string // "key: error" of each attempt that failed ("key again: error" for the second)
	stop       chan struct{}
	done       chan struct{}
	consumer   *Consumer
}

// StartWriter starts writing PREFIX/000000..., and a Consumer beside it
// (leased keys, a lock, an election, a watch on PREFIX/), as real
// applications use etcd; CheckLeases checks what it wrote.
func StartWriter(cli *clientv3.Client, prefix string) *Writer {
	w := &Writer{lastOK: time.Now(), stop: make(chan struct{}), done: make(chan struct{}), consumer: StartConsumer(cli, prefix)}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			key := fmt.Sprintf("%s/%06d", prefix, i)
			var err error
			for try := 0; try < 2; try++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err = cli.Put(ctx, key, "v")
				cancel()
				if err == nil {
					break
				}
				w.mu.Lock()
				if try == 0 {
					w.retried = append(w.retried, fmt.Sprintf("%s: %v", key, err))
				} else {
					w.retried = append(w.retried, fmt.Sprintf("%s again: %v", key, err))
				}
				w.mu.Unlock()
			}
			now := time.Now()
			w.mu.Lock()
			if err == nil {
				w.longestGap = max(w.longestGap, now.Sub(w.lastOK))
				w.lastOK = now
				w.acked = append(w.acked, key)
			} else {
				w.failed++
			}
			w.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

// Finish stops the writer and its consumer (whose session stays open
// until CheckLeases) and reports what it saw. Safe to call more than once.
func (w *Writer) Finish() (acked []string, longestGap time.Duration) {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.consumer.Finish()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.longestGap
}

// CheckLeases checks the consumer's leased keys (Consumer.CheckLeases)
// after Finish, and closes its session.
func (w *Writer) CheckLeases(t testing.TB, cli *clientv3.Client) ConsumerReport {
	t.Helper()
	return w.consumer.CheckLeases(t, cli)
}

// Retried lists the keys whose first put failed, with the error, and
// the second error of those that failed twice ("key again: error").
func (w *Writer) Retried() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.retried...)
}

// Acked is the number of keys acknowledged so far.
func (w *Writer) Acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// Failed is the number of keys whose put failed twice so far.
func (w *Writer) Failed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// CheckAcked fails unless every acknowledged key is present. A read that
// fails (a leader election, a reconnecting client) is retried for up to a
// minute: only a read that succeeds and finds nothing is a lost key.
func CheckAcked(t testing.TB, cli *clientv3.Client, keys []string) {
	t.Helper()
	lost, err := missingAcked(cli, keys, time.Minute, 200*time.Millisecond)
	if len(lost) > 0 {
		t.Fatalf("%d acknowledged keys lost (read and found absent): %v", len(lost), lost)
	}
	if err != nil {
		t.Fatalf("acknowledged keys could not be checked: %v", err)
	}
}

// missingAcked reads every key, retrying failed reads every pause until
// patience runs out, and returns the keys a successful read found absent;
// err names a key that no read answered.
func missingAcked(kv clientv3.KV, keys []string, patience, pause time.Duration) (lost []string, err error) {
	deadline := time.Now().Add(patience)
	for _, k := range keys {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resp, gerr := kv.Get(ctx, k)
			cancel()
			if gerr == nil {
				if resp.Count != 1 {
					lost = append(lost, k)
				}
				break
			}
			if time.Now().After(deadline) {
				return lost, fmt.Errorf("read acknowledged key %s: %w", k, gerr)
			}
			time.Sleep(pause)
		}
	}
	return lost, nil
}

// WatchMembership samples the member list every 100ms until the returned
// function is called, which reports the most learners and the fewest voters
// seen at once, and how many samples were taken.
func WatchMembership(cli *clientv3.Client) func() (maxLearners, minVoters, samples int) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	maxL, minV, n := 0, 1<<30, 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			m, err := MemberList(cli)
			if err != nil {
				continue
			}
			mu.Lock()
			maxL, minV, n = max(maxL, m.Learners), min(minV, m.Voters), n+1
			mu.Unlock()
		}
	}()
	return func() (int, int, int) {
		close(stop)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return maxL, minV, n
	}
}

// AWSEnv points the AWS SDK's credential chain at static test credentials
// for the test's duration and shields it from the machine's AWS settings
// (profile, shared files, AWS_CA_BUNDLE).
func AWSEnv(t testing.TB, accessKey, secretKey string) {
	t.Setenv("AWS_ACCESS_KEY_ID", accessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secretKey)
	t.Setenv("AWS_CA_BUNDLE", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
}

// SupervisorLines returns the last n lines of a member log written by
// etcd-nomad itself (etcd's own JSON lines are left out), for failure
// reports.
func SupervisorLines(log string, n int) string {
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "etcd-nomad") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Recorded reads a cluster's members and its record, for WaitOnRecord.
type Recorded func() (status.Cluster, coord.Record, error)

// WaitOnRecord waits until the record is confirmed (a cluster id) at epoch
// minEpoch or later and every member reports that cluster id and epoch;
// with healthy, every member must also be healthy.
func WaitOnRecord(t testing.TB, timeout time.Duration, minEpoch uint64, healthy bool, read Recorded) (status.Cluster, coord.Record) {
	t.Helper()
	var st status.Cluster
	var rec coord.Record
	WaitFor(t, timeout, fmt.Sprintf("every member on a confirmed record of epoch >= %d (healthy: %v)", minEpoch, healthy), func() (bool, string) {
		var err error
		st, rec, err = read()
		if err != nil {
			return false, err.Error()
		}
		if rec.Epoch < minEpoch || rec.ClusterID == 0 {
			return false, fmt.Sprintf("record %+v\n%s", rec, status.Format(st))
		}
		for _, m := range st.Members {
			if (healthy && !m.Healthy) || m.ClusterID != rec.ClusterID || m.Epoch != rec.Epoch {
				return false, fmt.Sprintf("record %+v\n%s", rec, status.Format(st))
			}
		}
		return true, ""
	})
	return st, rec
}
