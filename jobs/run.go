package jobs

import (
	"context"
	"fmt"
	"io"

	"github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/nomad"
)

// Run registers the jobspec with Nomad and follows the deployment it
// starts, writing progress to out, until it succeeds, fails or ctx ends.
func Run(ctx context.Context, cli *api.Client, jobspec string, out io.Writer) error {
	return RunWith(ctx, cli, jobspec, out, RunOptions{})
}

// RunOptions change what Run does besides registering the job.
type RunOptions struct {
	// Grant calls Grant before registering the job.
	Grant bool
	// ConsulToken, with Grant, is stored for the members (see Grant).
	ConsulToken string
	// CAKEK makes sure the job's variable holds the cluster CA's key
	// encryption key before the job is registered (EnsureCAKEK): TLS auto.
	CAKEK bool
}

// RunWith is Run with options.
func RunWith(ctx context.Context, cli *api.Client, jobspec string, out io.Writer, o RunOptions) error {
	job, err := cli.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: jobspec, Canonicalize: true})
	if err != nil {
		return fmt.Errorf("nomad refused the rendered job: %w", nomadglue.Denied(cli, "parse the job", nomadglue.NeedSubmit, err))
	}
	if o.Grant {
		if err := Grant(ctx, cli, deref(job.ID), deref(job.Namespace), o.ConsulToken, out); err != nil {
			return err
		}
	}
	if o.CAKEK {
		if _, err := EnsureCAKEK(ctx, cli, deref(job.ID), deref(job.Namespace)); err != nil {
			return err
		}
		fmt.Fprintf(out, "the cluster CA's key encryption key is in Nomad variable %s (key %s)\n", TokenVariable(deref(job.ID)), CAKEKKey)
	}
	q := (&api.WriteOptions{Namespace: deref(job.Namespace)}).WithContext(ctx)
	resp, _, err := cli.Jobs().Register(job, q)
	if err != nil {
		return fmt.Errorf("register job %s: %w", deref(job.ID), nomadglue.Denied(cli, "register job "+deref(job.ID), nomadglue.NeedSubmit, err))
	}
	if resp.Warnings != "" {
		fmt.Fprintf(out, "nomad warnings: %s\n", resp.Warnings)
	}
	fmt.Fprintf(out, "registered job %q (evaluation %s)\n", deref(job.ID), short(resp.EvalID))
	return nomadglue.Follow(ctx, cli, deref(job.ID), deref(job.Namespace), out)
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
