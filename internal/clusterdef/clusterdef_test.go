package clusterdef

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/config"
)

// TestDefinitionLoads: every variant the suites and the bench write loads
// as the cluster it says, so that a change of HCL() that the loader
// refuses or reads differently fails here, not in a suite with agents.
func TestDefinitionLoads(t *testing.T) {
	for _, tc := range []struct {
		d     Definition
		check func(c *config.Cluster) bool
	}{
		{Definition{Name: "defaults", Size: 3, Prefix: "p"}, func(c *config.Cluster) bool {
			return c.Size == 3 && c.Provider.Nomad.Group == "etcd" && c.Provider.StaleAfter == 2*time.Minute /* the Nomad provider's default */ &&
				c.Nomad.MemoryMB == 128 && c.Nomad.DistinctHosts && c.Coordination.Prefix == "p"
		}},
		{Definition{Name: "bench", Size: 3, Group: "members", StaleAfter: "5s", MemoryMB: 256, Quota: "1GiB", Prefix: "q",
			Nomad: SingleClient("http://127.0.0.1:8600"), Comment: "changes nothing"}, func(c *config.Cluster) bool {
			return c.Provider.Nomad.Group == "members" && c.Provider.StaleAfter == 5*time.Second && c.Nomad.MemoryMB == 256 &&
				!c.Nomad.DistinctHosts && c.Nomad.Consul.Address == "127.0.0.1:8600" && !c.Nomad.Consul.TLS() && c.Etcd.QuotaBackendBytes == 1<<30
		}},
		{Definition{Name: "demo", Size: 3, Job: "etcd-demo", CPU: 200, Header: "The demo cluster.", Prefix: "s"}, func(c *config.Cluster) bool {
			return c.Nomad.Job == "etcd-demo" && c.Nomad.CPU == 200
		}},
		{Definition{Name: "tls", Size: 1, TLSMode: "off", SessionTTL: "15s", Prefix: "r",
			Nomad: SingleClientTLS("127.0.0.1:8501", "/ca.pem", "/c.pem", "/k.pem")}, func(c *config.Cluster) bool {
			return c.Size == 1 && c.TLS.Mode == "off" && c.Coordination.SessionTTL == 15*time.Second && c.Nomad.Consul.CAFile == "/ca.pem" && c.Nomad.Consul.CertFile == "/c.pem" &&
				c.Nomad.Consul.KeyFile == "/k.pem" && c.Nomad.Consul.TLS()
		}},
	} {
		path := filepath.Join(t.TempDir(), "cluster.hcl")
		if err := tc.d.Write(path); err != nil {
			t.Fatal(err)
		}
		c, _, diags := config.LoadFile(path)
		if diags.HasErrors() {
			t.Fatalf("%s: %s\n%s", tc.d.Name, diags.Error(), tc.d.HCL())
		}
		if c.Name != tc.d.Name || !tc.check(c) {
			t.Fatalf("%s: loaded %+v\nfrom\n%s", tc.d.Name, c, tc.d.HCL())
		}
	}
}
