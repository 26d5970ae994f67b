package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// ReplayResult tells what a replay applied.
type ReplayResult struct {
	Segments int
	Events   int
	Txns     int // transactions the replay used (several original revisions each)
	Keys     int // distinct keys written, each read back after the replay
	// Last is the last revision (of the original cluster) replayed.
	Last int64
	// Stopped, when not empty, says why the chain was not replayed to
	// its end (a segment failed its checksum or could not be read): what
	// follows that segment is not applied.
	Stopped string
}

// Replay applies chain (Chain's result for the full snapshot just
// restored into dataDir by Restore) to that data dir: every segment is
// fetched and verified first, then the data dir's single member is
// started alone on loopback ports, each original revision's events are
// applied as one transaction, leases are granted again with their
// recorded IDs and TTLs before the keys that use them (keys attached to a
// lease the replay does not know would be refused or lost), and every key
// written is read back and compared with its last recorded state. The
// member is stopped before Replay returns. A segment that cannot be read
// or fails its checksum ends the replay there (ReplayResult.Stopped);
// what was verified before it is applied.
func Replay(ctx context.Context, store Store, chain []Meta, enc Encryption, dataDir, name string) (ReplayResult, error) {
	var res ReplayResult
	var segs []Segment
	for _, m := range chain {
		var buf bytes.Buffer
		rc, om, err := store.Open(ctx, m.Name)
		if err == nil {
			err = Decode(&buf, rc, om, enc)
			rc.Close()
		}
		var s Segment
		if err == nil {
			s, err = UnmarshalSegment(buf.Bytes())
		}
		if err != nil {
			res.Stopped = fmt.Sprintf("delta %s: %v", m.Name, err)
			break
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		return res, nil
	}
	e, cli, err := startAlone(ctx, dataDir, name)
	if err != nil {
		return res, err
	}
	defer func() {
		cli.Close()
		e.Close()
	}()
	if err := apply(ctx, cli, segs, &res); err != nil {
		return res, err
	}
	return res, nil
}

// replayBatch and replayBatchBytes bound one replay transaction: the
// events of several original revisions go into one transaction (each
// revision whole, so every original transaction stays atomic) until it
// holds replayBatch operations or replayBatchBytes of keys and values.
// A key written again in the same batch replaces its earlier operation
// there (etcd refuses a key twice in one transaction, and only the last
// state of a key is visible after the batch anyway), so batches fill up
// even when the same keys are written over and over. The byte bound
// keeps a batch below what the client sends (replayMaxRequest); a single
// original revision larger than it still goes whole (etcd accepted it).
const (
	replayBatch      = 4096
	replayBatchBytes = 8 << 20
	replayMaxRequest = 64 << 20 // the restored member's MaxRequestBytes and the client's send limit
)

func apply(ctx context.Context, cli *clientv3.Client, segs []Segment, res *ReplayResult) error {
	ttl := map[int64]int64{}
	granted := map[int64]bool{}
	final := map[string]*mvccpb.KeyValue{} // nil value: deleted
	lease := pb.NewLeaseClient(cli.ActiveConnection())
	var ops []clientv3.Op
	inBatch := map[string]int{} // key -> its operation's index in ops
	batchBytes := 0
	commit := func() error {
		if len(ops) == 0 {
			return nil
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("replay up to revision %d: %w", res.Last, err)
		}
		res.Txns++
		ops, inBatch, batchBytes = ops[:0], map[string]int{}, 0
		return nil
	}
	for _, s := range segs {
		res.Segments++
		for _, l := range s.Leases {
			ttl[l.ID] = l.TTL
		}
		for i := 0; i < len(s.Events); {
			rev := s.Events[i].Kv.ModRevision
			j := i
			size := 0
			for j < len(s.Events) && s.Events[j].Kv.ModRevision == rev {
				size += len(s.Events[j].Kv.Key) + len(s.Events[j].Kv.Value)
				j++
			}
			group := s.Events[i:j]
			i = j
			if rev <= res.Last {
				continue // an overlapping segment (two recorders for a moment): applied already
			}
			if len(ops)+len(group) > replayBatch || batchBytes+size > replayBatchBytes {
				if err := commit(); err != nil {
					return err
				}
			}
			batchBytes += size
			for _, ev := range group {
				key := string(ev.Kv.Key)
				var op clientv3.Op
				switch ev.Type {
				case mvccpb.PUT:
					var opts []clientv3.OpOption
					if id := ev.Kv.Lease; id != 0 {
						if !granted[id] {
							if err := grantAgain(ctx, cli, lease, id, ttl[id]); err != nil {
								return err
							}
							granted[id] = true
						}
						opts = append(opts, clientv3.WithLease(clientv3.LeaseID(id)))
					}
					op = clientv3.OpPut(key, string(ev.Kv.Value), opts...)
					final[key] = ev.Kv
				case mvccpb.DELETE:
					op = clientv3.OpDelete(key)
					final[key] = nil
				default:
					continue
				}
				if k, ok := inBatch[key]; ok {
					ops[k] = op // written again in this batch: the last write wins
				} else {
					inBatch[key] = len(ops)
					ops = append(ops, op)
				}
				res.Events++
			}
			res.Last = rev
		}
	}
	if err := commit(); err != nil {
		return err
	}
	res.Keys = len(final)
	return verifyReplay(ctx, cli, final)
}

// grantAgain makes lease id exist with ttl (or the default), unless it
// exists already (restored with the full snapshot).
func grantAgain(ctx context.Context, cli *clientv3.Client, lease pb.LeaseClient, id, ttl int64) error {
	if r, err := cli.TimeToLive(ctx, clientv3.LeaseID(id)); err == nil && r.TTL > 0 {
		return nil
	}
	if ttl <= 0 {
		ttl = defaultLeaseTTL
	}
	if _, err := lease.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: ttl}); err != nil {
		return fmt.Errorf("replay: grant lease %x again: %w", id, err)
	}
	return nil
}

// verifyReplay reads back every key the replay wrote, up to 1024 keys
// or replayBatchBytes of recorded values per read.
func verifyReplay(ctx context.Context, cli *clientv3.Client, final map[string]*mvccpb.KeyValue) error {
	keys := make([]string, 0, len(final))
	for k := range final {
		keys = append(keys, k)
	}
	const batch = 1024
	var wrong []string
	for start := 0; start < len(keys); {
		end, size := start, 0
		for end < len(keys) && end-start < batch && (end == start || size < replayBatchBytes) {
			if kv := final[keys[end]]; kv != nil {
				size += len(kv.Value)
			}
			end++
		}
		part := keys[start:end]
		start = end
		ops := make([]clientv3.Op, len(part))
		for i, k := range part {
			ops[i] = clientv3.OpGet(k)
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("replay: read back: %w", err)
		}
		for i, r := range resp.Responses {
			kvs := r.GetResponseRange().Kvs
			want := final[part[i]]
			switch {
			case want == nil && len(kvs) != 0:
				wrong = append(wrong, fmt.Sprintf("%q present, deleted in the deltas", part[i]))
			case want != nil && (len(kvs) != 1 || !bytes.Equal(kvs[0].Value, want.Value) || kvs[0].Lease != want.Lease):
				wrong = append(wrong, fmt.Sprintf("%q differs from its last recorded value", part[i]))
			}
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("replay: %d keys not as recorded, e.g. %s: %w", len(wrong), wrong[0], ErrChecksum)
	}
	return nil
}

// startAlone starts the restored single-member data dir on loopback ports
// nobody else knows, so that no client or peer reaches it during the
// replay.
func startAlone(ctx context.Context, dataDir, name string) (*embed.Etcd, *clientv3.Client, error) {
	ports, err := loopbackURLs(2)
	if err != nil {
		return nil, nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dataDir
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{ports[0]}, []url.URL{ports[0]}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{ports[1]}, []url.URL{ports[1]}
	cfg.ClusterState = embed.ClusterStateFlagExisting
	cfg.InitialCluster = ""
	cfg.LogLevel = "error"
	cfg.Logger = "zap"
	cfg.LogOutputs = []string{os.DevNull}
	cfg.MaxTxnOps = replayBatch
	cfg.MaxRequestBytes = replayMaxRequest
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("replay: start the restored member: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-ctx.Done():
		e.Close()
		return nil, nil, ctx.Err()
	case <-time.After(time.Minute):
		e.Close()
		return nil, nil, errors.New("replay: the restored member did not become ready in a minute")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ports[1].String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		MaxCallSendMsgSize: replayMaxRequest + 1<<20})
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	return e, cli, nil
}

func loopbackURLs(n int) ([]url.URL, error) {
	var out []url.URL
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("replay: loopback port: %w", err)
		}
		defer l.Close() // held until all are chosen: n distinct ports
		out = append(out, url.URL{Scheme: "http", Host: l.Addr().String()})
	}
	return out, nil
}
