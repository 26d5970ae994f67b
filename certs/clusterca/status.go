package clusterca

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/coord"
)

// Writer is the part of the coordinator a member repairs the status CA
// with: KV and Delete.
type Writer interface {
	KV
	Delete(ctx context.Context, key string) error
}

// RepairStatusCA makes the status CA in the coordinator the one derived
// from ca (certs.StatusCA), which must be the cluster CA the coordinator
// holds and the member runs with. It returns the certificate it replaced,
// nil when the coordinator already held the right one or none.
//
// Members derive the status CA they accept from their own CA and never
// read it from the coordinator; read-only clients (`status`, `tls
// status-cert`) issue their certificates from the stored one. A writer of
// the coordinator's keys who stores another status CA there (create-only
// storing never replaced it) blinds every such client: their certificates
// are refused by every member. Members repair it at every CA check.
//
// reads answers first (a member's watched copy of the coordinator's keys,
// current within a blocking query's answer): the right certificate there
// costs no request, and only a missing or different one is written
// through c. An idle member checked with a create-only write and a
// consistent read twice a minute (bench h.idle-api: 4 of its 16 Consul
// requests a minute). A planted value reaches the watch as it is stored
// and is replaced at the next check, as before, while the watch answers;
// a watch whose blocking query hangs counts as current for up to its wait
// and slack (coord/consul/watch.go: about 70 s), and a plant stays that
// much longer (review rev18a S1: read-only clients refused meanwhile;
// members never accept the stored status CA).
func RepairStatusCA(ctx context.Context, reads KV, c Writer, ca certs.Pair) (replaced []byte, err error) {
	st, err := certs.StatusCA(ca)
	if err != nil {
		return nil, err
	}
	want := st.Bundle()
	if b, err := reads.Load(ctx, StatusKey); err == nil && bytes.Equal(b, want) {
		return nil, nil
	}
	for try := 0; try < 5; try++ {
		b, err := c.LoadOrStore(ctx, StatusKey, want)
		if err != nil {
			return replaced, fmt.Errorf("status CA: %w", err)
		}
		if bytes.Equal(b, want) {
			return replaced, nil
		}
		if replaced == nil {
			replaced = b
			if p, perr := certs.ParseBundle(b); perr == nil {
				replaced = p.Cert
			}
		}
		if err := c.Delete(ctx, StatusKey); err != nil && !errors.Is(err, coord.ErrNotStored) {
			return replaced, fmt.Errorf("replace status CA: %w", err)
		}
	}
	return replaced, errors.New("replace status CA: another value keeps being stored")
}
