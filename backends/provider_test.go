package backends

import (
	"context"
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/config"
)

func staticCluster() *config.Cluster {
	return &config.Cluster{Name: "c", Provider: config.Provider{Kind: config.ProviderStatic, Static: []config.StaticMember{
		{Name: "m0", Address: "127.0.0.1", ClientPort: 1, PeerPort: 2, StatusPort: 3},
		{Name: "m1", Address: "127.0.0.1", ClientPort: 4, PeerPort: 5, StatusPort: 6},
	}}}
}

// The one factory opens the same provider for members and clients; only a
// member needs to say who it is.
func TestProviderForMembersAndClients(t *testing.T) {
	ctx := context.Background()
	cl := staticCluster()
	if _, err := openProvider(ctx, cl, opener{member: true}); err == nil || !strings.Contains(err.Error(), "-name") {
		t.Fatalf("static member without -name: %v, want an error naming -name", err)
	}
	m, err := openProvider(ctx, cl, opener{member: true, name: "m1"})
	if err != nil || m.static == nil || m.self != nil {
		t.Fatalf("static member: %+v, %v; want the static list to reload and no self", m, err)
	}
	insts, err := Instances(ctx, cl)
	if err != nil || len(insts) != 2 || insts[1].Name != "m1" || insts[1].StatusPort != 6 {
		t.Fatalf("client Instances = %+v, %v; want m0 and m1 with their ports", insts, err)
	}
	cl.Provider.Kind = "gce"
	if _, err := openProvider(ctx, cl, opener{member: true, name: "m1"}); err == nil || !strings.Contains(err.Error(), "cannot run members") {
		t.Fatalf("unknown provider for a member: %v", err)
	}
	if _, err := Instances(ctx, cl); err == nil || !strings.Contains(err.Error(), "cannot list members") {
		t.Fatalf("unknown provider for a client: %v", err)
	}
}

// A member's Nomad provider takes the job, group and namespace its
// allocation's env names where the definition leaves them out; a client,
// which runs in no allocation, reads only the definition.
func TestNomadOptionsFromTheAllocation(t *testing.T) {
	cl := &config.Cluster{Name: "c", Nomad: config.NomadJob{Job: "from-nomad-block"},
		Provider: config.Provider{Kind: config.ProviderNomad, Nomad: config.NomadProvider{Group: "etcd"}}}
	env := map[string]string{"NOMAD_JOB_ID": "from-env", "NOMAD_GROUP_NAME": "grp", "NOMAD_NAMESPACE": "ns"}
	got := nomadOptions(cl, func(k string) string { return env[k] })
	if got.Job != "from-env" || got.Group != "grp" || got.Namespace != "ns" {
		t.Fatalf("member options = %+v, want job, group and namespace from the allocation", got)
	}
	got = nomadOptions(cl, func(string) string { return "" })
	if got.Job != "from-nomad-block" || got.Group != "etcd" || got.Namespace != "" {
		t.Fatalf("client options = %+v, want the definition's", got)
	}
}
