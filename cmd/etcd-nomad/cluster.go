package main

import (
	"flag"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/config"
)

// clusterFlags is the start every command on one cluster shares: its flag
// set with -config FILE, and the definition it names.
type clusterFlags struct {
	*flag.FlagSet
	path *string
}

// newClusterFlags is the flag set of command name with -config; the
// command adds its own flags.
func newClusterFlags(name string) clusterFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return clusterFlags{FlagSet: fs, path: fs.String("config", "", "")}
}

// load parses args and loads the definition. Without -config, without one
// of required, or with arguments left over when positional is false, it
// prints help; an invalid definition, its diagnostics. nil then.
func (f clusterFlags) load(ui cli.Ui, help string, args []string, positional bool, required ...*string) *config.Cluster {
	err := f.Parse(args)
	ok := err == nil && *f.path != "" && (positional || f.NArg() == 0)
	for _, r := range required {
		ok = ok && *r != ""
	}
	if !ok {
		ui.Error(help)
		return nil
	}
	return loadConfig(ui, *f.path)
}
