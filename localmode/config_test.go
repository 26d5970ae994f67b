package localmode

import (
	"testing"

	"github.com/etcd-nomad/etcd-nomad/config"
)

// The definition WriteConfig writes loads as written: the local
// coordinator in the layout's directory, or Consul under a prefix (the
// one definition the tests' clusters share, e2e/acl's too).
func TestWriteConfigLoads(t *testing.T) {
	ports := []MemberPorts{{Client: 12001, Peer: 12002, Status: 12003}, {Client: 12004, Peer: 12005, Status: 12006}}
	for _, tc := range []struct {
		o          Options
		kind, want string
	}{
		{Options{Name: "one"}, config.CoordLocal, ""},
		{Options{Name: "two", ConsulPrefix: "etcd-nomad-acl"}, config.CoordConsul, "etcd-nomad-acl"},
	} {
		lay := Layout{Dir: t.TempDir()}
		if err := lay.WriteConfig(tc.o, ports); err != nil {
			t.Fatal(err)
		}
		c, _, diags := config.LoadFile(lay.Config())
		if diags.HasErrors() {
			t.Fatalf("%s: %s", tc.o.Name, diags.Error())
		}
		if c.Name != tc.o.Name || c.Coordination.Kind != tc.kind || c.Coordination.Prefix != tc.want && tc.want != "" {
			t.Fatalf("%s: loaded %q coordination %+v, want %s %q", tc.o.Name, c.Name, c.Coordination, tc.kind, tc.want)
		}
		if tc.kind == config.CoordLocal && c.Coordination.Dir != lay.CoordDir() {
			t.Fatalf("%s: coordination dir %q, want %q", tc.o.Name, c.Coordination.Dir, lay.CoordDir())
		}
	}
}
