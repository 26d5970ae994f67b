package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
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

  Writes ca.crt (the cluster CA certificate: what members present),
  status.crt and status.key (a client certificate of the cluster's status
  CA, 0600 in a 0700 directory) for a monitor such as Prometheus. Members
  serve /metrics and /status only to a certificate of the status CA or to
  etcd's root user's, never to an application's; the status CA's
  certificates open nothing else (etcd's ports refuse them). It reads the
  status CA from the coordinator (Consul key read on
  <prefix>/<cluster>/kv/status-ca and kv/ca-sealed): no KEK is needed.
  Prometheus reads the files again at each scrape: run it again before
  the certificate ends (cron), and after 'tls rotate-ca'.

Options:
  -config FILE  cluster definition (tls mode "auto")
  -name NAME    the certificate's CN; default prometheus
  -ttl D        validity; default 720h
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	co, err := backends.Coordinator(cl)
	if err != nil {
		c.ui.Error("tls status-cert: " + err.Error())
		return 1
	}
	issuer, caCert, err := clusterca.StatusIssuer(ctx, co, cl.Name)
	if err != nil {
		c.ui.Error("tls status-cert: " + err.Error())
		return 1
	}
	if bytes.Equal(issuer.Cert, caCert) {
		// StatusIssuer falls back to the plaintext cluster CA for members
		// of earlier versions: its certificates would open etcd itself.
		c.ui.Error("tls status-cert: the coordinator holds no status CA (members of an earlier version): a certificate from the cluster CA would open etcd's client port too; upgrade the members (each stores the status CA at start) and run this again")
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
