// Command etcd-nomad runs an etcd member in place of the etcd binary and is
// the operator's CLI.
package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(Run(os.Args[1:]))
}

// Run runs the CLI with args and returns the exit code.
func Run(args []string) int {
	ui := &cli.BasicUi{Reader: os.Stdin, Writer: os.Stdout, ErrorWriter: os.Stderr}
	c := cli.NewCLI("etcd-nomad", version)
	c.Args = args
	c.Commands = map[string]cli.CommandFactory{
		"member":           func() (cli.Command, error) { return &memberCommand{ui: ui}, nil },
		"validate":         func() (cli.Command, error) { return &validateCommand{ui: ui}, nil },
		"status":           func() (cli.Command, error) { return &statusCommand{ui: ui}, nil },
		"env":              func() (cli.Command, error) { return &envCommand{ui: ui}, nil },
		"creds":            func() (cli.Command, error) { return &credsCommand{ui: ui}, nil },
		"local":            func() (cli.Command, error) { return &localCommand{}, nil },
		"job":              func() (cli.Command, error) { return &jobCommand{}, nil },
		"snapshot":         func() (cli.Command, error) { return &snapshotCommand{}, nil },
		"snapshot save":    func() (cli.Command, error) { return &snapshotSaveCommand{ui: ui}, nil },
		"snapshot list":    func() (cli.Command, error) { return &snapshotListCommand{ui: ui}, nil },
		"snapshot verify":  func() (cli.Command, error) { return &snapshotVerifyCommand{ui: ui}, nil },
		"snapshot restore": func() (cli.Command, error) { return &snapshotRestoreCommand{ui: ui}, nil },
		"job render":       func() (cli.Command, error) { return &jobRenderCommand{ui: ui}, nil },
		"job run":          func() (cli.Command, error) { return &jobRunCommand{ui: ui}, nil },
		"local up":         func() (cli.Command, error) { return &localUpCommand{ui: ui}, nil },
		"local down":       func() (cli.Command, error) { return &localDownCommand{ui: ui}, nil },
		"pause":            func() (cli.Command, error) { return &pauseCommand{ui: ui}, nil },
		"resume":           func() (cli.Command, error) { return &pauseCommand{ui: ui, resume: true}, nil },
		"recover":          func() (cli.Command, error) { return &recoverCommand{ui: ui}, nil },
		"migrate":          func() (cli.Command, error) { return &migrateCommand{ui: ui}, nil },
		"tls":              func() (cli.Command, error) { return &tlsCommand{}, nil },
		"tls rotate-ca":    func() (cli.Command, error) { return &rotateCACommand{ui: ui}, nil },
		"tls fingerprint":  func() (cli.Command, error) { return &fingerprintCommand{ui: ui}, nil },
		"tls status-cert":  func() (cli.Command, error) { return &statusCertCommand{ui: ui}, nil },
	}
	code, err := c.Run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd-nomad:", err)
		return 1
	}
	return code
}
