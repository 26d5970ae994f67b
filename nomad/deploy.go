package nomadglue

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/nomad/api"
)

// noDeploymentAfter: a registration that changes no allocation (or only
// removes some) creates no deployment; stop waiting for one after this.
const noDeploymentAfter = 15 * time.Second

// Follow waits for the latest deployment of the job's current version to
// finish, printing a line whenever its progress changes.
func Follow(ctx context.Context, cli *api.Client, jobID, namespace string, out io.Writer) error {
	qo := func() *api.QueryOptions { return (&api.QueryOptions{Namespace: namespace}).WithContext(ctx) }
	info, _, err := cli.Jobs().Info(jobID, qo())
	if err != nil {
		return fmt.Errorf("read job %s: %w", jobID, Denied(cli, "read job "+jobID, NeedSubmit, err))
	}
	version := deref64(info.Version)
	start := time.Now()
	last := ""
	for {
		dep, _, err := cli.Jobs().LatestDeployment(jobID, qo())
		if err != nil {
			return fmt.Errorf("read deployment of %s: %w", jobID, Denied(cli, "read the deployment of "+jobID, NeedSubmit, err))
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
