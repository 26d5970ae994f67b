package devagents

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Consul and Nomad dev agents with TLS: each serves HTTPS only and refuses
// a client without a certificate of the test CA, and Nomad reaches Consul
// over HTTPS (its client registers in the catalog).
func TestAgentsWithTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Consul and Nomad agents")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tl, err := NewTLS(filepath.Join(dir, "tls"))
	if err != nil {
		t.Fatal(err)
	}
	consul, err := StartConsulWith(ctx, filepath.Join(dir, "consul"), Options{TLS: tl})
	if err != nil {
		t.Fatal(err)
	}
	defer consul.Stop(15 * time.Second)
	nomad, err := StartNomadWith(ctx, filepath.Join(dir, "nomad"), consul.Addr, Options{TLS: tl})
	if err != nil {
		t.Fatal(err)
	}
	defer nomad.Stop(30 * time.Second)

	c, err := tl.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	// The same client without its certificate.
	bare := c.Transport.(*http.Transport).Clone()
	bare.TLSClientConfig.Certificates = nil
	for _, a := range []*Agent{consul, nomad} {
		if !strings.HasPrefix(a.Addr, "https://") {
			t.Errorf("%s: Addr %s, want https", a.Name, a.Addr)
		}
		var leader string
		if err := getJSONWith(ctx, c, a.Addr+"/v1/status/leader", "", &leader); err != nil {
			t.Errorf("%s with the client certificate: %v", a.Name, err)
		}
		if err := getJSONWith(ctx, &http.Client{Transport: bare, Timeout: 5 * time.Second}, a.Addr+"/v1/status/leader", "", &leader); err == nil {
			t.Errorf("%s: served a client that trusts its CA but presents no certificate", a.Name)
		}
	}
	// Nomad registers itself in Consul's catalog, over HTTPS.
	deadline := time.Now().Add(time.Minute)
	var last string
	for {
		var svcs map[string][]string
		err := getJSONWith(ctx, c, consul.Addr+"/v1/catalog/services", "", &svcs)
		if _, ok := svcs["nomad-client"]; ok && err == nil {
			break
		}
		last = "services " + keys(svcs)
		if err != nil {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("Nomad's client never registered in Consul over HTTPS; last: %s", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func keys(m map[string][]string) string {
	s := ""
	for k := range m {
		s += k + " "
	}
	return s
}
