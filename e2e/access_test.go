package e2e_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
)

// appJob is an application's job as its README section tells users to
// write it: a prestart task fetches the first certificate, a poststart
// sidecar keeps it fresh, both with the workload identity "etcd"
// (aud etcd-nomad); the app (a shell loop over the real etcdctl) reads
// the files and the endpoints Consul lists. Arguments: binary, cluster,
// Consul address, etcdctl, the CA fingerprint the creds tasks pin.
const appJob = `job "e2e-app" {
  datacenters = ["dc1"]
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
        aud  = ["etcd-nomad"]
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
        aud  = ["etcd-nomad"]
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

// Issue 13's application proof: an app job on the same Nomad cluster gets
// a client certificate without the CA key (its workload identity, traded
// at a member), writes under its prefix, is refused outside it, and keeps
// writing across renewals of a 15-second certificate, past the first
// certificate's expiry.
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
      nomad_jobs = ["e2e-app"]
    }
  }`
	c.writeDefinition(1, "")
	c.nomadRun("")
	c.waitPassing(1, 2*time.Minute)

	// The app pins the cluster CA (issue 29 item 5) as the README says:
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
	t.Cleanup(func() {
		if t.Failed() {
			dumpApp(t)
		}
		stopJob(t, "e2e-app")
	})
	if out, err := exec.Command(nomadBin, "job", "run", "-detach", "-address", nomad.Addr, path).CombinedOutput(); err != nil {
		t.Fatalf("nomad job run app: %v\n%s", err, out)
	}
	var alloc string
	waitFor(t, 2*time.Minute, "the app writing under /app/", func() (bool, string) {
		list, _, err := nomadClient(t).Jobs().Allocations("e2e-app", false, nil)
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

func appLog(alloc, file string) string {
	b, _ := os.ReadFile(filepath.Join(nomad.AllocDir, alloc, "alloc", "logs", file))
	return string(b)
}

func dumpApp(t *testing.T) {
	list, _, err := nomadClient(t).Jobs().Allocations("e2e-app", true, nil)
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
