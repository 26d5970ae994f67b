package task

import (
	"context"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// refusedObject is an object of the store the listing refused
// (backup.Refused): its metadata as listed (unauthenticated: nothing in
// it is vouched for) and why.
type refusedObject struct {
	meta snapshot.Meta
	why  error
}

// listSplit is the store's authenticated listing with the objects it
// refused (backup.ListSplit).
func (m *Member) listSplit(ctx context.Context) ([]snapshot.Meta, []refusedObject, error) {
	kept, refused, err := m.backups.ListSplit(ctx)
	var out []refusedObject
	for _, r := range refused {
		out = append(out, refusedObject{meta: r.Meta, why: r.Why})
	}
	return kept, out, err
}
