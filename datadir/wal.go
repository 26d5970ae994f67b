package datadir

import (
	"errors"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
)

// WALInUse reports whether an etcd process holds a lock on a WAL file in
// dir, tried with etcd's own locking (a lock taken here is released at once).
func WALInUse(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ".wal" {
			continue
		}
		l, err := fileutil.TryLockFile(filepath.Join(dir, e.Name()), os.O_RDWR, fileutil.PrivateFileMode)
		if errors.Is(err, fileutil.ErrLocked) {
			return true
		}
		if err == nil {
			l.Close()
		}
	}
	return false
}
