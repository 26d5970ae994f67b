package jobs

import (
	"context"
	"fmt"
	"io"
	"time"

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
		return fmt.Errorf("nomad refused the rendered job: %w", nomad.Denied(cli, "parse the job", nomad.NeedSubmit, err))
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
		return fmt.Errorf("register job %s: %w", deref(job.ID), nomad.Denied(cli, "register job "+deref(job.ID), nomad.NeedSubmit, err))
	}
	if resp.Warnings != "" {
		fmt.Fprintf(out, "nomad warnings: %s\n", resp.Warnings)
	}
	fmt.Fprintf(out, "registered job %q (evaluation %s)\n", deref(job.ID), short(resp.EvalID))
	return Follow(ctx, cli, deref(job.ID), deref(job.Namespace), out)
}

// noDeploymentAfter: a registration that changes no allocation (or only
// removes some) creates no deployment; stop waiting for one after this.
const noDeploymentAfter = 15 * time.Second

// Follow waits for the latest deployment of the job's current version to
// finish, printing a line whenever its progress changes.
func Follow(ctx context.Context, cli *api.Client, jobID, namespace string, out io.Writer) error {
	qo := func() *api.QueryOptions { return (&api.QueryOptions{Namespace: namespace}).WithContext(ctx) }
	info, _, err := cli.Jobs().Info(jobID, qo())
	if err != nil {
		return fmt.Errorf("read job %s: %w", jobID, nomad.Denied(cli, "read job "+jobID, nomad.NeedSubmit, err))
	}
	version := deref64(info.Version)
	start := time.Now()
	last := ""
	for {
		dep, _, err := cli.Jobs().LatestDeployment(jobID, qo())
		if err != nil {
			return fmt.Errorf("read deployment of %s: %w", jobID, nomad.Denied(cli, "read the deployment of "+jobID, nomad.NeedSubmit, err))
		}
		if (dep == nil || dep.JobVersion != version) && time.Since(start) > noDeploymentAfter {
			fmt.Fprintf(out, "no deployment for version %d after %s: nothing to roll out\n", version, noDeploymentAfter)
			return nil
		}
		if dep != nil && dep.JobVersion == version {
			line := progress(dep)
			if line != last {
				fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(start).Seconds(), line)
				last = line
			}
			switch dep.Status {
			case api.DeploymentStatusSuccessful:
				return nil
			case api.DeploymentStatusFailed, api.DeploymentStatusCancelled:
				return fmt.Errorf("deployment %s %s: %s", short(dep.ID), dep.Status, dep.StatusDescription)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("following deployment of %s: %w (last: %s)", jobID, ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func progress(d *api.Deployment) string {
	var desired, placed, healthy, unhealthy int
	for _, s := range d.TaskGroups {
		desired += s.DesiredTotal
		placed += s.PlacedAllocs
		healthy += s.HealthyAllocs
		unhealthy += s.UnhealthyAllocs
	}
	return fmt.Sprintf("deployment %s %s: placed %d/%d, healthy %d/%d, unhealthy %d — %s",
		short(d.ID), d.Status, placed, desired, healthy, desired, unhealthy, d.StatusDescription)
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

func deref64(v *uint64) uint64 {
	if v == nil {
		return 0
	}
	return *v
}

// WaitStopped waits until no allocation of the job is pending or running,
// so that stopping the Nomad agent afterwards leaves no task behind.
func WaitStopped(ctx context.Context, cli *api.Client, jobID, namespace string) error {
	for {
		q := (&api.QueryOptions{Namespace: namespace, Filter: fmt.Sprintf("JobID == %q", jobID)}).WithContext(ctx)
		allocs, _, err := cli.Allocations().List(q)
		if err != nil {
			return fmt.Errorf("list allocations of %s: %w", jobID, err)
		}
		running := 0
		for _, a := range allocs {
			if a.ClientStatus == api.AllocClientStatusRunning || a.ClientStatus == api.AllocClientStatusPending {
				running++
			}
		}
		if running == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d allocations of %s still running: %w", running, jobID, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
