package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
)

// appJob is an application's job as docs/clients.md tells users to
// write it: a prestart task fetches the first certificate, a poststart
// sidecar keeps it fresh, both with the workload identity "etcd"
// (aud etcd-nomad:<cluster>); the app (a shell loop over the real
// etcdctl) reads the files and the endpoints Consul lists. It runs in its
// own namespace, appNamespace. The documented example uses the exec driver;
// raw_exec here, as every e2e job (the dev agents' client runs raw_exec:
// devagents.StartNomad). Arguments: binary, cluster, Consul address,
// etcdctl, the CA fingerprint the creds tasks pin.
const appJob = `job "e2e-app" {
  datacenters = ["dc1"]
  namespace   = "` + appNamespace + `"
  type        = "service"

  group "app" {
    task "etcd-creds-init" {
      lifecycle {
        hook    = "prestart"
        sidecar = false
      }
      driver = "raw_exec"
      config {
        command = %[1]q
        args    = ["creds", "-cluster", %[2]q, "-prefix", "etcd-nomad-e2e", "-dir", "${NOMAD_ALLOC_DIR}/etcd", "-once"]
      }
      identity {
        name = "etcd"
        aud  = ["etcd-nomad:%[2]s"]
        file = true
        ttl  = "1h"
      }
      env {
        CONSUL_HTTP_ADDR          = %[3]q
        ETCD_NOMAD_CA_FINGERPRINT = %[5]q
      }
    }

    task "etcd-creds" {
      lifecycle {
        hook    = "poststart"
        sidecar = true
      }
      driver = "raw_exec"
      config {
        command = %[1]q
        args    = ["creds", "-cluster", %[2]q, "-prefix", "etcd-nomad-e2e", "-dir", "${NOMAD_ALLOC_DIR}/etcd"]
      }
      identity {
        name = "etcd"
        aud  = ["etcd-nomad:%[2]s"]
        file = true
        ttl  = "1h"
      }
      env {
        CONSUL_HTTP_ADDR          = %[3]q
        ETCD_NOMAD_CA_FINGERPRINT = %[5]q
      }
    }

    task "app" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["local/app.sh"]
      }
      template {
        destination = "local/app.sh"
        data        = <<EOS
D=$NOMAD_ALLOC_DIR/etcd
e() { %[4]s --endpoints="$ENDPOINTS" --cacert=$D/ca.crt --cert=$D/client.crt --key=$D/client.key --dial-timeout=3s --command-timeout=3s "$@"; }
if e put /other/x v 2>&1 | grep -q "permission denied"; then echo outside-denied; else echo outside-allowed; fi
i=0
while :; do
  i=$((i+1))
  if e put /app/k$i v >/dev/null 2>&1; then echo "ok $i $(date +%%s)"; else echo "fail $i $(date +%%s)"; fi
  sleep 1
done
EOS
      }
      template {
        destination = "local/endpoints.env"
        env         = true
        data        = "ENDPOINTS={{ range $i, $s := service \"%[2]s\" }}{{ if $i }},{{ end }}https://{{ $s.Address }}:{{ $s.Port }}{{ end }}"
      }
    }
  }
}
`

// appNamespace is the application's own Nomad namespace: the access
// block maps "namespace/job", and the token names it.
const appNamespace = "e2e-apps"

func certSerial(path string) (string, time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", time.Time{}, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return "", time.Time{}, errors.New("no PEM")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", time.Time{}, err
	}
	return c.SerialNumber.String() + " CN=" + c.Subject.CommonName, c.NotAfter, nil
}

// The application proof (docs/clients.md): an app job on the same Nomad cluster gets
// a client certificate without the CA key (its workload identity, traded
// at a member), writes under its prefix, is refused outside it, and keeps
// writing across renewals of a 15-second certificate, past the first
// certificate's expiry. The app runs in its own namespace with the
// cluster's audience (etcd-nomad:<cluster>), and its certificate, first
// and renewed, is refused on every member's peer port (the handshake) and
// on /status and /metrics (403) of the status port (docs/security.md, threat model).
func TestAppJobGetsCredentialsFromItsIdentity(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	etcdctl, err := devagents.Bin("etcdctl", devagents.EtcdctlVersion)
	if err != nil {
		t.Skip(err)
	}
	c := newCluster(t, "e2e-access", 1)
	c.extra = `
  access {
    certificate_ttl = "15s"
    role "app" {
      read_write = ["/app/"]
    }
    user "app-user" {
      roles      = ["app"]
      nomad_jobs = ["` + appNamespace + `/e2e-app"]
    }
  }`
	c.writeDefinition(1, "")
	c.nomadRun("")
	c.waitPassing(1, 2*time.Minute)

	// The app pins the cluster CA as docs/clients.md says:
	// the fingerprint an operator reads with tls fingerprint and the KEK
	// of the job's variable. A wrong pin makes creds refuse, and the app
	// never writes.
	kek, err := exec.Command(nomadBin, "var", "get", "-address", nomad.Addr, "-item", "ca_kek", "nomad/jobs/"+c.name).Output()
	if err != nil {
		t.Fatalf("nomad var get ca_kek: %v", err)
	}
	fpCmd := exec.Command(binary, "tls", "fingerprint", "-config", c.file)
	fpCmd.Env = append(os.Environ(), "ETCD_NOMAD_CA_KEK="+strings.TrimSpace(string(kek)))
	fp, err := fpCmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(fp), "sha256:") {
		t.Fatalf("tls fingerprint: %v: %s", err, fp)
	}
	spec := fmt.Sprintf(appJob, binary, c.name, strings.TrimPrefix(consul.Addr, "http://"), etcdctl, strings.TrimSpace(string(fp)))
	path := filepath.Join(c.dir, "app.nomad.hcl")
	if err := os.WriteFile(path, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nomadBin, "namespace", "apply", "-address", nomad.Addr, "-description", "e2e applications", appNamespace).CombinedOutput(); err != nil {
		t.Fatalf("nomad namespace apply: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpApp(t)
		}
		if out, err := exec.Command(nomadBin, "job", "stop", "-purge", "-namespace", appNamespace, "-address", nomad.Addr, "e2e-app").CombinedOutput(); err != nil {
			t.Logf("nomad job stop e2e-app: %v\n%s", err, out)
		}
	})
	if out, err := exec.Command(nomadBin, "job", "run", "-detach", "-address", nomad.Addr, path).CombinedOutput(); err != nil {
		t.Fatalf("nomad job run app: %v\n%s", err, out)
	}
	var alloc string
	waitFor(t, 2*time.Minute, "the app writing under /app/", func() (bool, string) {
		list, _, err := nomadClient(t).Jobs().Allocations("e2e-app", false, &nomadapi.QueryOptions{Namespace: appNamespace})
		if err != nil || len(list) == 0 {
			return false, fmt.Sprintf("allocations: %v", err)
		}
		alloc = list[0].ID
		log := appLog(alloc, "app.stdout.0")
		return strings.Contains(log, "ok 1 "), log
	})
	log := appLog(alloc, "app.stdout.0")
	if !strings.Contains(log, "outside-denied") {
		t.Errorf("the app's write outside /app/ was not refused:\n%s", log)
	}
	certFile := filepath.Join(nomad.AllocDir, alloc, "alloc", "etcd", "client.crt")
	first, firstExpiry, err := certSerial(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(first, "CN=app-user") {
		t.Errorf("app certificate %s, want CN=app-user", first)
	}
	certDir := filepath.Dir(certFile)
	appRefusedBeyondItsRole(t, c, certDir)
	seen := map[string]bool{first: true}
	waitFor(t, 90*time.Second, "two renewals and writes past the first certificate's expiry", func() (bool, string) {
		s, _, err := certSerial(certFile)
		if err == nil {
			seen[s] = true
		}
		okAfter := 0
		for _, l := range strings.Split(appLog(alloc, "app.stdout.0"), "\n") {
			var i, ts int64
			if _, err := fmt.Sscanf(l, "ok %d %d", &i, &ts); err == nil && time.Unix(ts, 0).After(firstExpiry) {
				okAfter++
			}
		}
		return len(seen) >= 3 && okAfter >= 3, fmt.Sprintf("%d certificates seen, %d writes after %s", len(seen), okAfter, firstExpiry.Format(time.RFC3339))
	})
	log = appLog(alloc, "app.stdout.0")
	t.Logf("%d certificates seen (first %s, expired %s); app log: %d writes ok, %d failed",
		len(seen), first, firstExpiry.Format(time.RFC3339), strings.Count(log, "ok "), strings.Count(log, "fail "))
	if n := strings.Count(log, "\nfail "); n > 0 {
		t.Errorf("%d of the app's writes failed across renewals:\n%s", n, log)
	}
	// The renewed certificate is no more than the first: refused on every
	// peer port and on /status and /metrics.
	appRefusedBeyondItsRole(t, c, certDir)
	// The writes are in etcd, under the app's prefix.
	cli := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, "/app/", clientv3WithPrefixCount()...)
	if err != nil || r.Count < 10 {
		t.Errorf("keys under /app/: %v (%v)", r, err)
	}
	if r, err := cli.Get(ctx, "/other/x"); err != nil || r.Count != 0 {
		t.Errorf("/other/x exists (%v): the refused write landed", err)
	}
}

// appRefusedBeyondItsRole checks the threat model's boundaries with the app's
// own certificate files in dir (as creds wrote them): every member's peer
// port refuses the handshake (no /members, no raft), and every member's
// status port answers /status and /metrics with 403 (they name member
// ids and raft's indexes) while /health, the Consul check, answers
// without ids.
func appRefusedBeyondItsRole(t *testing.T, c *cluster, dir string) {
	t.Helper()
	kp, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	st, err := c.status()
	if err != nil || len(st.Members) == 0 {
		t.Fatalf("status: %v (%d members)", err, len(st.Members))
	}
	// The attacker does not care whom it talks to: it skips verifying the
	// member, so only the member's refusal can fail the request; and it
	// presents its certificate whatever CAs the member asks for (with
	// Certificates alone Go sends none the member's list does not name,
	// and the refusal would be for no certificate at all).
	peerClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil }}}}
	defer peerClient.CloseIdleConnections()
	for _, m := range st.Members {
		resp, err := peerClient.Get(m.PeerURL + "/members")
		if err == nil {
			resp.Body.Close()
			t.Errorf("member %s's peer port answered the app's certificate: GET /members %s", m.Name, resp.Status)
			continue
		}
		if !strings.Contains(err.Error(), "tls: ") || strings.Contains(err.Error(), "certificate required") {
			t.Errorf("member %s's peer port: %v, want the TLS handshake refused", m.Name, err)
			continue
		}
		t.Logf("member %s's peer port %s refused the app's certificate: %v", m.Name, m.PeerURL, err)
	}
	svcs, _, err := consulClient(t).Catalog().Service(c.name, "", nil)
	if err != nil || len(svcs) != len(st.Members) {
		t.Fatalf("catalog: %d services (%v), %d members", len(svcs), err, len(st.Members))
	}
	app := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}}}
	defer app.CloseIdleConnections()
	for _, s := range svcs {
		addr := s.ServiceAddress
		if addr == "" {
			addr = s.Address
		}
		base := "https://" + net.JoinHostPort(addr, s.ServiceMeta["status_port"])
		for _, path := range []string{"/status", "/metrics", "/health"} {
			resp, err := app.Get(base + path)
			if err != nil {
				t.Errorf("%s%s with the app's certificate: %v", base, path, err)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := http.StatusForbidden
			if path == "/health" {
				want = http.StatusOK
				if strings.Contains(string(b), "member=") || strings.Contains(string(b), "cluster=") {
					t.Errorf("%s/health names ids: %q", base, b)
				}
			}
			if resp.StatusCode != want {
				t.Errorf("%s%s with the app's certificate: %s %.100q, want %d", base, path, resp.Status, b, want)
			} else {
				t.Logf("%s%s with the app's certificate: %s %.60q", base, path, resp.Status, strings.TrimSpace(string(b)))
			}
		}
	}
}

func appLog(alloc, file string) string {
	b, _ := os.ReadFile(filepath.Join(nomad.AllocDir, alloc, "alloc", "logs", file))
	return string(b)
}

func dumpApp(t *testing.T) {
	list, _, err := nomadClient(t).Jobs().Allocations("e2e-app", true, &nomadapi.QueryOptions{Namespace: appNamespace})
	if err != nil {
		return
	}
	for _, a := range list {
		for _, f := range []string{"etcd-creds-init.stderr.0", "etcd-creds.stderr.0", "app.stdout.0", "app.stderr.0"} {
			t.Logf("=== %s %s\n%s", a.ID[:8], f, appLog(a.ID, f))
		}
		for task, ts := range a.TaskStates {
			for _, e := range ts.Events {
				t.Logf("%s %s: %s", task, e.Type, e.DisplayMessage)
			}
		}
	}
}
