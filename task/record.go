package task

import (
	"slices"

	"github.com/etcd-nomad/etcd-nomad/coord"
)

// writeBack is the planner's record r to store in place of cur
// (UpdateRecord compares cur.Index, so nothing stored since is
// overwritten). A migration's join list is cur's: while r names cur's
// incarnation (its token and epoch) it carries cur's list, so that
// confirming or correcting the record during a migration never drops
// the outside members' client URLs, even when the planner built r from
// this member's data; a record of another incarnation carries none:
// they were the older one's.
func writeBack(cur, r coord.Record) coord.Record {
	r.Index, r.Join = cur.Index, nil
	if r.Token == cur.Token && r.Epoch == cur.Epoch {
		r.Join = slices.Clone(cur.Join)
	}
	return r
}
