package main

import (
	"context"
	"flag"
	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/status"
	"github.com/etcd-nomad/etcd-nomad/task/trust"
)

type tlsCommand struct{}

func (c *tlsCommand) Synopsis() string {
	return "Certificate operations (rotate-ca, fingerprint, status-cert)"
}
func (c *tlsCommand) Help() string {
	return "Usage: etcd-nomad tls rotate-ca|fingerprint|status-cert -config FILE\n\n  Subcommands: rotate-ca, fingerprint, status-cert"
}

type fingerprintCommand struct{ ui cli.Ui }

func (c *fingerprintCommand) Synopsis() string {
	return "Print the cluster CA's fingerprint, for applications to pin"
}

func (c *fingerprintCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad tls fingerprint -config FILE

  Prints the cluster CA's fingerprint (sha256:<hex of the SHA-256 of the
  CA certificate's DER>), the value an application's 'etcd-nomad creds'
  pins with -ca-fingerprint or ETCD_NOMAD_CA_FINGERPRINT. With Consul
  coordination it needs ETCD_NOMAD_CA_KEK (nomad var get -item ca_kek
  nomad/jobs/JOB) and refuses without it: it opens the sealed CA with
  the KEK, and the seal binds the certificate to the KEK, so a
  certificate a writer of Consul's keys put there is refused rather than
  printed. Only with local coordination is a plaintext CA read without
  the KEK. Run it again after 'tls rotate-ca' and update the pins.

Options:
  -config FILE   cluster definition`)
}

func (c *fingerprintCommand) Run(args []string) int {
	fs := flag.NewFlagSet("tls fingerprint", flag.ContinueOnError)
	path := fs.String("config", "", "")
	if err := fs.Parse(args); err != nil || *path == "" || fs.NArg() != 0 {
		c.ui.Error(c.Help())
		return 1
	}
	cl := loadAutoTLS(c.ui, "tls fingerprint", *path, " (openssl x509 -noout -fingerprint -sha256 -in CA_FILE)")
	if cl == nil {
		return 1
	}
	kek, err := clusterca.KEKFromEnv()
	if err != nil {
		c.ui.Error("tls fingerprint: " + err.Error())
		return 1
	}
	if kek == nil && cl.Coordination.Kind != config.CoordLocal {
		// Without the KEK, clusterca.Read takes a plaintext CA, which
		// with Consul is one any writer of its keys can plant: the
		// fingerprint printed here is pinned into every application, so
		// only the sealed CA is taken. The local coordinator's directory
		// is the machine's own, as are the members' data directories.
		c.ui.Error("tls fingerprint: " + certs.KEKEnv + " is not set: with " + cl.Coordination.Kind +
			" coordination the fingerprint is read only from the CA sealed with the cluster's key encryption key " +
			"(a plaintext CA there may be anyone's who can write the coordinator's keys); " +
			"export " + certs.KEKEnv + "=\"$(nomad var get -item ca_kek nomad/jobs/JOB)\" and run it again")
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bc, err := backends.OpenClient(cl)
	if err != nil {
		c.ui.Error("tls fingerprint: " + err.Error())
		return 1
	}
	ca, err := clusterca.Read(ctx, bc.Coordinator, cl.Name, kek)
	if err != nil {
		c.ui.Error("tls fingerprint: " + err.Error())
		return 1
	}
	c.ui.Output(certs.Fingerprint(ca.Cert))
	return 0
}
func (c *tlsCommand) Run([]string) int { return cli.RunResultHelp }

type rotateCACommand struct{ ui cli.Ui }

func (c *rotateCACommand) Synopsis() string {
	return "Replace the cluster CA without restarting a member"
}

func (c *rotateCACommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad tls rotate-ca -config FILE [-retire-after DURATION] [-timeout DURATION]

  Replaces the cluster CA (TLS auto) while the members run, in phases that
  every member carries out on its own within seconds and reports in its
  /status; the command moves to the next phase once every member of the
  definition reports the current one:

    trust   members trust the new CA beside the old one
    issue   members issue their certificates from the new CA, presented
            with a certificate of the new CA signed by the old one, so
            that etcd processes that loaded only the old CA accept them
    retire  the new CA becomes the cluster CA, the old CA's key is
            deleted, members trust the new CA alone
    done

  The state is kept in the coordinator (key ca-rotation): interrupt the
  command, lose the lock or restart members at any point and run it again
  to resume. Needs the cluster's key encryption key in ETCD_NOMAD_CA_KEK
  (nomad var get -item ca_kek nomad/jobs/JOB) with Consul coordination.

Options:
  -config FILE             cluster definition
  -retire-after DURATION   keep the old CA trusted at least this long after
                           the members issue from the new one (default:
                           access.certificate_ttl with an access block, so
                           workloads renew their certificates first; else 0)
  -timeout DURATION        give up (resumable) after this long (default 30m)`)
}

func (c *rotateCACommand) Run(args []string) int {
	fs := flag.NewFlagSet("tls rotate-ca", flag.ContinueOnError)
	path := fs.String("config", "", "")
	retire := fs.Duration("retire-after", -1, "")
	timeout := fs.Duration("timeout", 30*time.Minute, "")
	if err := fs.Parse(args); err != nil || *path == "" || fs.NArg() != 0 {
		c.ui.Error(c.Help())
		return 1
	}
	cl := loadAutoTLS(c.ui, "tls rotate-ca", *path, "")
	if cl == nil {
		return 1
	}
	if *retire < 0 {
		*retire = 0
		if cl.Access != nil {
			*retire = cl.Access.CertificateTTL
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *timeout)
	defer cancelT()
	bc, err := backends.OpenClient(cl)
	if err != nil {
		c.ui.Error("tls rotate-ca: " + err.Error())
		return 1
	}
	co := bc.Coordinator
	kek, err := clusterca.KEKFromEnv()
	if err != nil {
		c.ui.Error("tls rotate-ca: " + err.Error())
		return 1
	}
	start := time.Now()
	err = trust.RotateCA(ctx, trust.RotateOptions{Cluster: cl, Coordinator: co, KEK: kek, RetireAfter: *retire,
		Members: func(ctx context.Context) ([]status.Member, error) {
			gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			st, err := status.Gather(gctx, bc)
			return st.Members, err
		},
		Progress: func(s string) { c.ui.Output(time.Since(start).Round(100*time.Millisecond).String() + " " + s) },
	})
	if err != nil {
		c.ui.Error("tls rotate-ca: " + err.Error())
		return 1
	}
	return 0
}

// loadAutoTLS loads the cluster definition at path for command cmd, which
// works on the members' own CA: nil (said why) unless its tls mode is
// "auto". hint ends the refusal (how to do it with the operator's files).
func loadAutoTLS(ui cli.Ui, cmd, path, hint string) *config.Cluster {
	cl := loadConfig(ui, path)
	if cl == nil {
		return nil
	}
	if cl.TLS.Mode != config.TLSAuto {
		ui.Error(cmd + ": the cluster CA is the members' own only with tls mode \"auto\"; mode " + cl.TLS.Mode + " uses the operator's files" + hint)
		return nil
	}
	return cl
}
