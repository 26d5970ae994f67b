package etcdproc

import (
	"fmt"
	"os"
	"time"

	"go.etcd.io/etcd/pkg/v3/featuregate"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/features"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"
)

// EnableCorruptChecks turns etcd's compaction hash check on in cfg, every
// interval (0: off).
func EnableCorruptChecks(cfg *embed.Config, interval time.Duration) error {
	if interval <= 0 {
		return nil
	}
	cfg.CompactHashCheckTime = interval
	if err := cfg.ServerFeatureGate.(featuregate.MutableFeatureGate).Set(string(features.CompactHashCheck) + "=true"); err != nil {
		return fmt.Errorf("enable etcd's compaction hash check: %w", err)
	}
	return nil
}

// DataHash computes the hash etcd's HashKV reports, at the newest
// revision of the stopped member's database file db. The store is opened
// with a lessor that accepts every lease a key names (as etcdutl hashkv
// does): without one, etcd's store panics on the first leased key, and a
// member whose data holds any lease could never start again (the hash
// covers keys and values only, leases do not change it).
func DataHash(db string) (mvcc.KeyValueHash, error) {
	if _, err := os.Stat(db); err != nil {
		return mvcc.KeyValueHash{}, err
	}
	cfg := backend.DefaultBackendConfig(zap.NewNop())
	cfg.Path = db
	be := backend.New(cfg)
	defer be.Close()
	st := mvcc.NewStore(zap.NewNop(), be, &lease.FakeLessor{}, mvcc.StoreConfig{})
	defer st.Close()
	h, _, err := mvcc.NewHashStorage(zap.NewNop(), st).HashByRev(0)
	return h, err
}
