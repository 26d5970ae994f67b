package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/cli"
)

// rev19d W2: Consul lost the record; m1 holds data of epoch 2 (its
// record was the lost one) and does not answer (a partition). 'snapshot
// restore -member m0 latest' of the epoch-1 snapshot takes no answer
// from m1 for "nothing there" (HandRestoreEpoch sees only the members
// that answered) and records epoch 2 again: two incarnations of epoch 2
// once m1 comes back. The automatic path waits for every instance
// without a record (invariant 8); the hand restore proceeds silently.
func TestHandRestoreWithoutRecordRefusesWhileAMemberIsSilent(t *testing.T) {
	f := newRestoreFixture(t)
	// A second instance whose status port refuses connections.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	raw, err := os.ReadFile(f.config)
	if err != nil {
		t.Fatal(err)
	}
	hcl := strings.Replace(string(raw), "  coordination", "  provider_extra_placeholder\n  coordination", 1)
	i := strings.Index(hcl, "    }\n  }\n  provider_extra_placeholder")
	if i < 0 {
		t.Fatalf("unexpected fixture config:\n%s", raw)
	}
	hcl = hcl[:i] + "    }\n    member \"m1\" {\n      address = \"127.0.0.1\"\n      client_port = 3\n      peer_port = 4\n      status_port = " + port + "\n    }\n  }\n" + hcl[i+len("    }\n  }\n  provider_extra_placeholder\n"):]
	hcl = strings.Replace(hcl, "size     = 1", "size     = 2", 1)
	if err := os.WriteFile(f.config, []byte(hcl), 0o600); err != nil {
		t.Fatal(err)
	}
	// Consul lost its state: no record.
	coordDir := filepath.Join(filepath.Dir(f.config), "coord")
	if err := os.Remove(filepath.Join(coordDir, "record.json")); err != nil {
		t.Fatal(err)
	}
	ui := cli.NewMockUi()
	code := (&snapshotRestoreCommand{ui: ui}).Run([]string{"-config", f.config, "-member", "m0", "latest"})
	t.Logf("exit %d\n%s%s", code, ui.OutputWriter, ui.ErrorWriter)
	if code == 0 {
		got, err := f.co.Record(context.Background())
		t.Fatalf("restored without a record while m1 does not answer, recorded %+v (%v): epoch %d may be one m1's data already holds", got, err, got.Epoch)
	}
}
