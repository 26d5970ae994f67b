package main

import (
	"strings"
	"testing"

	"github.com/hashicorp/cli"

	"github.com/etcd-nomad/etcd-nomad/config"
)

// docs/install.md's path is validate, job render, then a plain
// `nomad job run`. Where the members cannot create the key that seals the
// cluster CA themselves (Nomad ACLs: workload identities only read their
// variable), validate and job render say up front the one command to run
// first, with the job's own variable path; job render says it beside the
// job (on the error writer), never inside it.
func TestValidateAndRenderNameTheCommandToRunFirst(t *testing.T) {
	const file = "../../examples/nomad.hcl"
	cl, _, diags := config.LoadFile(file)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	want := "nomad var put -check-index 0 nomad/jobs/" + cl.Nomad.Job + " ca_kek=$(openssl rand -base64 32)"

	ui := cli.NewMockUi()
	if code := (&validateCommand{ui: ui}).Run([]string{file}); code != 0 {
		t.Fatalf("validate exited %d: %s", code, ui.ErrorWriter.String())
	}
	if out := ui.OutputWriter.String(); !strings.Contains(out, want) || !strings.Contains(out, "ACLs") {
		t.Errorf("validate does not name the command to run first under Nomad ACLs (%q):\n%s", want, out)
	}

	ui = cli.NewMockUi()
	var spec strings.Builder
	if code := (&jobRenderCommand{ui: ui, stdout: &spec}).Run([]string{file}); code != 0 {
		t.Fatalf("job render exited %d: %s", code, ui.ErrorWriter.String())
	}
	if note := ui.ErrorWriter.String(); !strings.Contains(note, want) {
		t.Errorf("job render does not name the command to run first (%q):\n%s", want, note)
	}
	if strings.Contains(spec.String(), want) || !strings.HasPrefix(spec.String(), "job ") && !strings.Contains(spec.String(), "\njob ") {
		t.Errorf("job render's job holds the note or is no job:\n%.300s", spec.String())
	}
}

// A definition without a key in a Nomad variable (the static provider)
// gets no such note.
func TestValidateSaysNothingOfTheKEKWithoutNomad(t *testing.T) {
	ui := cli.NewMockUi()
	if code := (&validateCommand{ui: ui}).Run([]string{"../../examples/static.hcl"}); code != 0 {
		t.Fatalf("validate exited %d: %s", code, ui.ErrorWriter.String())
	}
	if out := ui.OutputWriter.String(); strings.Contains(out, "nomad var put") {
		t.Errorf("validate of a static definition mentions the Nomad variable:\n%s", out)
	}
}
