package nomadglue

import (
	"strings"
	"testing"
)

func TestSelfFromEnv(t *testing.T) {
	t.Setenv("NOMAD_ALLOC_ID", "0123456789abcdef")
	t.Setenv("NOMAD_GROUP_NAME", "etcd")
	t.Setenv("NOMAD_IP_peer", "10.0.0.7")
	t.Setenv("NOMAD_PORT_client", "2379")
	t.Setenv("NOMAD_PORT_peer", "2380")
	t.Setenv("NOMAD_PORT_status", "2381")
	got, err := SelfFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	want := Self{Name: "etcd-01234567", Alloc: "0123456789abcdef", Address: "10.0.0.7", ClientPort: 2379, PeerPort: 2380, StatusPort: 2381}
	if got != want {
		t.Fatalf("SelfFromEnv = %+v, want %+v", got, want)
	}
}

func TestSelfFromEnvNamesWhatIsMissing(t *testing.T) {
	t.Setenv("NOMAD_ALLOC_ID", "")
	t.Setenv("NOMAD_GROUP_NAME", "")
	if _, err := SelfFromEnv(); err == nil || !strings.Contains(err.Error(), "NOMAD_ALLOC_ID") {
		t.Fatalf("outside an allocation: %v, want an error naming NOMAD_ALLOC_ID", err)
	}
	t.Setenv("NOMAD_ALLOC_ID", "a1")
	t.Setenv("NOMAD_GROUP_NAME", "etcd")
	t.Setenv("NOMAD_IP_peer", "")
	t.Setenv("NOMAD_PORT_client", "2379")
	t.Setenv("NOMAD_PORT_peer", "2380")
	t.Setenv("NOMAD_PORT_status", "")
	_, err := SelfFromEnv()
	for _, want := range []string{`port labelled "status"`, "NOMAD_IP_peer is not set"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("without the status port and peer IP: %v, want it to say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), `labelled "client"`) {
		t.Errorf("names a port that is set: %v", err)
	}
}
