package e2e_test

import (
	"os"
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func clientv3WithPrefixCount() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
}

func allocLog(id string) string {
	b, _ := os.ReadFile(filepath.Join(nomad.AllocDir, id, "alloc", "logs", "etcd.stderr.0"))
	return string(b)
}
