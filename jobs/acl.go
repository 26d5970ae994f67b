package jobs

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/provider/nomad"
)

// PolicyName is the Nomad ACL policy `job run` attaches to the job.
func PolicyName(job string) string { return "etcd-nomad-" + job }

// memberRules: a member lists its job's allocations and reads its own.
func memberRules(namespace string) string {
	if namespace == "" {
		namespace = "default"
	}
	return fmt.Sprintf("namespace %q {\n  capabilities = [\"read-job\", \"list-jobs\"]\n}\n", namespace)
}

// Grant prepares Nomad's ACLs for the job's members: it attaches the policy
// PolicyName(job) (read-job on the namespace) to the job, so the members'
// workload identity can list the allocations, and, when consulToken is set,
// stores it in the job's variable TokenVariable(job) for the members'
// CONSUL_HTTP_TOKEN. Without Nomad ACLs the policy step is skipped. The
// token itself is never printed.
func Grant(ctx context.Context, cli *api.Client, job, namespace, consulToken string, out io.Writer) error {
	pol := &api.ACLPolicy{
		Name:        PolicyName(job),
		Description: "etcd-nomad members of job " + job + ": list the job's allocations",
		Rules:       memberRules(namespace),
		JobACL:      &api.JobACL{Namespace: firstOf(namespace, "default"), JobID: job},
	}
	_, err := cli.ACLPolicies().Upsert(pol, (&api.WriteOptions{}).WithContext(ctx))
	switch {
	case err == nil:
		fmt.Fprintf(out, "attached ACL policy %q (read-job) to job %q\n", pol.Name, job)
	case strings.Contains(err.Error(), "ACL support disabled"):
		// No Nomad ACLs: nothing to grant.
	default:
		return fmt.Errorf("attach ACL policy %s to job %s: %w", pol.Name, job,
			nomad.Denied(cli, "write ACL policy "+pol.Name, `"acl:write" (a management token), or apply the policy yourself: nomad acl policy apply -namespace `+firstOf(namespace, "default")+` -job `+job+` `+pol.Name+` FILE`, err))
	}
	if consulToken == "" {
		return nil
	}
	v := &api.Variable{Namespace: namespace, Path: TokenVariable(job), Items: api.VariableItems{TokenKey: consulToken}}
	if _, _, err := cli.Variables().Update(v, (&api.WriteOptions{Namespace: namespace}).WithContext(ctx)); err != nil {
		return fmt.Errorf("store the members' Consul token in variable %s: %w", v.Path, nomad.Denied(cli, "write variable "+v.Path, `variables write on path "`+v.Path+`"`, err))
	}
	fmt.Fprintf(out, "stored the members' Consul token in Nomad variable %s (key %s)\n", v.Path, TokenKey)
	return nil
}
