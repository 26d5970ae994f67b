package clusterca_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
)

// countingWriter counts the requests a status CA check sends to the
// coordinator itself (not to the member's watched copy).
type countingWriter struct {
	*local.Coordinator
	calls int
}

func (c *countingWriter) LoadOrStore(ctx context.Context, key string, value []byte) ([]byte, error) {
	c.calls++
	return c.Coordinator.LoadOrStore(ctx, key, value)
}

func (c *countingWriter) Load(ctx context.Context, key string) ([]byte, error) {
	c.calls++
	return c.Coordinator.Load(ctx, key)
}

func (c *countingWriter) Delete(ctx context.Context, key string) error {
	c.calls++
	return c.Coordinator.Delete(ctx, key)
}

// An idle member's CA check asked the coordinator twice a minute with a
// create-only write and a consistent read (bench h.idle-api). With the
// right status CA in the member's reads it sends nothing; a planted one
// seen there is still replaced, and one missing is stored.
func TestStatusCACheckWritesOnlyWhatIsWrong(t *testing.T) {
	ctx := context.Background()
	co, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certs.NewCA("unit", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want, err := certs.StatusCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	w := &countingWriter{Coordinator: co}

	// Missing: stored.
	if replaced, err := clusterca.RepairStatusCA(ctx, co, w, ca); err != nil || replaced != nil {
		t.Fatalf("missing status CA: replaced %x, %v", replaced, err)
	}
	if b, err := co.Load(ctx, clusterca.StatusKey); err != nil || !bytes.Equal(b, want.Bundle()) {
		t.Fatalf("missing status CA not stored: %v", err)
	}

	// Right: no request beyond the reads.
	w.calls = 0
	if replaced, err := clusterca.RepairStatusCA(ctx, co, w, ca); err != nil || replaced != nil {
		t.Fatalf("right status CA: replaced %x, %v", replaced, err)
	}
	if w.calls != 0 {
		t.Fatalf("right status CA in the reads: %d requests to the coordinator, want 0", w.calls)
	}

	// Planted: replaced.
	other, err := certs.NewCA("unit", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	planted, err := certs.StatusCA(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := co.Delete(ctx, clusterca.StatusKey); err != nil {
		t.Fatal(err)
	}
	if _, err := co.LoadOrStore(ctx, clusterca.StatusKey, planted.Bundle()); err != nil {
		t.Fatal(err)
	}
	replaced, err := clusterca.RepairStatusCA(ctx, co, w, ca)
	if err != nil || !bytes.Equal(replaced, planted.Cert) {
		t.Fatalf("planted status CA: replaced %x, %v; want the planted certificate", replaced, err)
	}
	if b, err := co.Load(ctx, clusterca.StatusKey); err != nil || !bytes.Equal(b, want.Bundle()) {
		t.Fatalf("planted status CA not replaced: %v", err)
	}
}
