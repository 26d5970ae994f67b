package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/creds"
)

// statusCertCommand writes a client certificate of the status CA: what a
// Prometheus server (or any monitor) presents to members' /metrics and
// /status, which serve nothing to an application's certificate.
type statusCertCommand struct{ ui cli.Ui }

// defaultStatusCertTTL is a scraper's certificate's validity: long
// enough for a monthly renewal by cron, short enough that a copy left on
// a decommissioned host stops working.
const defaultStatusCertTTL = 30 * 24 * time.Hour

func (c *statusCertCommand) Synopsis() string {
	return "Write a status CA client certificate, for Prometheus to scrape /metrics"
}

func (c *statusCertCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad tls status-cert -config FILE [-name NAME] [-ttl 720h] [-dir DIR]
                                  [-ca-fingerprint sha256:HEX]

  Writes ca.crt (the cluster CA certificate: what members present),
  status.crt and status.key (a client certificate of the cluster's status
  CA, 0600 in a 0700 directory) for a monitor such as Prometheus. Members
  serve /metrics and /status only to a certificate of the status CA or to
  etcd's root user's, never to an application's; the status CA's
  certificates open nothing else (etcd's ports refuse them). It reads the
  status CA from the coordinator (Consul key read on
  <prefix>/<cluster>/kv/status-ca and kv/ca-sealed).
  ca.crt is what the monitor trusts: with Consul coordination it is read
  only from the CA sealed with the cluster's key encryption key
  (ETCD_NOMAD_CA_KEK: nomad var get -item ca_kek nomad/jobs/JOB), the
  status CA then derived from it, or checked against a pin
  (-ca-fingerprint, what 'etcd-nomad tls fingerprint' prints); without
  either it refuses, as a writer of Consul's keys could otherwise choose
  the CA the monitor trusts and feed it forged metrics.
  Prometheus reads the files again at each scrape: run it again before
  the certificate ends (cron), and after 'tls rotate-ca'.

Options:
  -config FILE  cluster definition (tls mode "auto")
  -name NAME    the certificate's CN; default prometheus
  -ttl D        validity; default 720h
  -ca-fingerprint FP
                the cluster CA's pin, for use without the KEK; default
                $ETCD_NOMAD_CA_FINGERPRINT
  -dir DIR      where to write; default $XDG_RUNTIME_DIR/etcd-nomad/CLUSTER-status
                (or $TMPDIR/etcd-nomad-UID/CLUSTER-status). Run it as the
                user that reads the files (e.g. sudo -u prometheus): the
                directory must be that user's`)
}

func (c *statusCertCommand) Run(args []string) int {
	fs := flag.NewFlagSet("tls status-cert", flag.ContinueOnError)
	path := fs.String("config", "", "")
	name := fs.String("name", "prometheus", "")
	ttl := fs.Duration("ttl", defaultStatusCertTTL, "")
	dir := fs.String("dir", "", "")
	pin := fs.String("ca-fingerprint", os.Getenv(creds.FingerprintEnv), "")
	if err := fs.Parse(args); err != nil || *path == "" || fs.NArg() != 0 {
		c.ui.Error(c.Help())
		return 1
	}
	cl := loadAutoTLS(c.ui, "tls status-cert", *path, ": present a certificate of the definition's CA (with tls off, none is needed)")
	if cl == nil {
		return 1
	}
	if *ttl <= 0 || *name == "" {
		c.ui.Error("tls status-cert: -ttl must be positive and -name not empty")
		return 1
	}
	if *name == "root" {
		c.ui.Error("tls status-cert: -name root is refused: a certificate named root opens /status as etcd's root user does; name the scraper (default prometheus)")
		return 1
	}
	if *pin != "" {
		fp, err := creds.ParseFingerprint(*pin)
		if err != nil {
			c.ui.Error("tls status-cert: -ca-fingerprint: " + err.Error())
			return 1
		}
		*pin = fp
	}
	kek, err := clusterca.KEKFromEnv()
	if err != nil {
		c.ui.Error("tls status-cert: " + err.Error())
		return 1
	}
	if kek == nil && *pin == "" && cl.Coordination.Kind != config.CoordLocal {
		// ca.crt is what the monitor trusts: read unchecked from Consul's
		// ca-sealed (its certificate is in the clear), a writer of the
		// coordinator's keys would choose it, and with it the members the
		// monitor believes.
		c.ui.Error("tls status-cert: neither " + certs.KEKEnv + " nor -ca-fingerprint is set: with " + cl.Coordination.Kind +
			" coordination the CA written to ca.crt (the one the monitor trusts) is read only from the CA sealed with the cluster's key encryption key, " +
			"or checked against the pin 'etcd-nomad tls fingerprint' prints (a CA certificate there may be anyone's who can write the coordinator's keys); " +
			"export " + certs.KEKEnv + "=\"$(nomad var get -item ca_kek nomad/jobs/JOB)\" or pass -ca-fingerprint, and run it again")
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	co, err := backends.Coordinator(cl)
	if err != nil {
		c.ui.Error("tls status-cert: " + err.Error())
		return 1
	}
	issuer, caCert, err := statusCertIssuer(ctx, co, cl.Name, kek)
	if err != nil {
		c.ui.Error("tls status-cert: " + err.Error())
		return 1
	}
	if *pin != "" && certs.Fingerprint(caCert) != *pin {
		c.ui.Error(fmt.Sprintf("tls status-cert: the coordinator's cluster CA %s is not the pinned %s: refused (a CA rotation since the pin was taken, or a writer of the coordinator's keys replaced it); nothing written", certs.Fingerprint(caCert), *pin))
		return 1
	}
	now := time.Now()
	p, err := certs.IssueClient(issuer, *name, now, *ttl)
	if err != nil {
		c.ui.Error("tls status-cert: " + err.Error())
		return 1
	}
	d, err := envDir(*dir, cl.Name+"-status")
	if err != nil {
		c.ui.Error("tls status-cert: " + err.Error())
		return 1
	}
	f, err := certs.Write(d, "status", caCert, p)
	if err != nil {
		c.ui.Error(fmt.Sprintf("tls status-cert: write into %s: %v", d, err))
		return 1
	}
	until := now.Add(*ttl)
	if blk, _ := pem.Decode(p.Cert); blk != nil {
		if x, err := x509.ParseCertificate(blk.Bytes); err == nil {
			until = x.NotAfter // capped at the status CA's end
		}
	}
	c.ui.Output(fmt.Sprintf("ca_file: %s\ncert_file: %s\nkey_file: %s\n# CN=%s, valid until %s", f.CA, f.Cert, f.Key, *name, until.UTC().Format(time.RFC3339)))
	return 0
}

// statusCertIssuer is the status CA to issue from and the cluster CA
// certificate to trust. With kek, both come from the sealed cluster CA
// (the status CA derived from it, as members derive the one they accept),
// so nothing a writer of the coordinator's keys stored is taken. Without,
// the coordinator's status CA and the sealed CA's certificate, which the
// caller checks against a pin (or, for the local coordinator, whose
// directory is the machine's own, takes as it is).
func statusCertIssuer(ctx context.Context, co clusterca.KV, cluster string, kek []byte) (certs.Pair, []byte, error) {
	if kek != nil {
		ca, err := clusterca.Read(ctx, co, cluster, kek)
		if err != nil {
			return certs.Pair{}, nil, err
		}
		st, err := certs.StatusCA(ca)
		if err != nil {
			return certs.Pair{}, nil, err
		}
		return st, ca.Cert, nil
	}
	issuer, caCert, err := clusterca.StatusIssuer(ctx, co, cluster)
	if err != nil {
		return certs.Pair{}, nil, err
	}
	if bytes.Equal(issuer.Cert, caCert) {
		// StatusIssuer falls back to the plaintext cluster CA for members
		// of earlier versions: its certificates would open etcd itself.
		return certs.Pair{}, nil, errors.New("the coordinator holds no status CA (members of an earlier version): a certificate from the cluster CA would open etcd's client port too; upgrade the members (each stores the status CA at start) and run this again")
	}
	return issuer, caCert, nil
}
