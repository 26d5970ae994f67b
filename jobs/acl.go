package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/nomad"
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
// CONSUL_HTTP_TOKEN. Without Nomad ACLs the policy step is skipped; a token
// that may submit jobs but not write ACL policies gets a warning with the
// command to run. The Consul token itself is never printed.
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
	case errors.Is(nomadglue.Denied(cli, "", "", err), nomadglue.ErrDenied):
		// Submitting jobs does not need acl:write: the operator may have
		// attached the policy already. Say what the members need.
		fmt.Fprintf(out, "warning: this NOMAD_TOKEN cannot attach ACL policy %q to job %q; unless it is attached, the members cannot list their allocations. With a management token: nomad acl policy apply -namespace %s -job %s %s FILE, FILE holding:\n%s",
			pol.Name, job, firstOf(namespace, "default"), job, pol.Name, pol.Rules)
	default:
		return fmt.Errorf("attach ACL policy %s to job %s: %w", pol.Name, job, err)
	}
	if consulToken == "" {
		return nil
	}
	path := TokenVariable(job)
	if _, err := setItem(ctx, cli.Variables(), writeDenied(cli, path), namespace, path, TokenKey, consulToken, false); err != nil {
		return fmt.Errorf("store the members' Consul token in variable %s: %w", path, err)
	}
	fmt.Fprintf(out, "stored the members' Consul token in Nomad variable %s (key %s)\n", path, TokenKey)
	return nil
}

// EnsureCAKEK makes the job's variable TokenVariable(job) hold a key
// encryption key for the cluster CA (key CAKEKKey), creating one unless it
// holds one, and returns it (base64). The members read it from the
// variable (the job template's secrets/member.env); it is never printed.
func EnsureCAKEK(ctx context.Context, cli *api.Client, job, namespace string) (string, error) {
	fresh, err := certs.NewKEK()
	if err != nil {
		return "", err
	}
	path := TokenVariable(job)
	kek, err := setItem(ctx, cli.Variables(), writeDenied(cli, path), namespace, path, CAKEKKey, fresh, true)
	if err != nil {
		return "", fmt.Errorf("store the cluster CA's key encryption key in variable %s: %w", path, err)
	}
	if _, err := certs.ParseKEK(kek); err != nil {
		return "", fmt.Errorf("variable %s, key %s: %w", path, CAKEKKey, err)
	}
	return kek, nil
}

// varStore is the part of Nomad's variables API (*api.Variables) that
// setItem needs: a read and the two check-and-set writes.
type varStore interface {
	Peek(path string, q *api.QueryOptions) (*api.Variable, *api.QueryMeta, error)
	CheckedCreate(v *api.Variable, w *api.WriteOptions) (*api.Variable, *api.WriteMeta, error)
	CheckedUpdate(v *api.Variable, w *api.WriteOptions) (*api.Variable, *api.WriteMeta, error)
}

var _ varStore = (*api.Variables)(nil)

// writeDenied names what writing the variable path needs when Nomad's
// ACLs refuse it.
func writeDenied(cli *api.Client, path string) func(error) error {
	return func(err error) error {
		return nomadglue.Denied(cli, "write variable "+path, `variables write on path "`+path+`"`, err)
	}
}

// setItem sets key in the Nomad variable path to value, keeping its other
// items (a variable is written whole, so read, change, write with a check
// of its index, and again on a conflict); keep leaves an existing value.
// It returns the value stored; denied wraps the errors of Nomad's API.
func setItem(ctx context.Context, vars varStore, denied func(error) error, namespace, path, key, value string, keep bool) (string, error) {
	for range 5 {
		v, _, err := vars.Peek(path, (&api.QueryOptions{Namespace: namespace}).WithContext(ctx))
		if err != nil {
			return "", denied(err)
		}
		wo := (&api.WriteOptions{Namespace: namespace}).WithContext(ctx)
		if v == nil {
			_, _, err = vars.CheckedCreate(&api.Variable{Namespace: namespace, Path: path, Items: api.VariableItems{key: value}}, wo)
		} else {
			if old, ok := v.Items[key]; ok && (keep || old == value) {
				return old, nil
			}
			if v.Items == nil {
				v.Items = api.VariableItems{}
			}
			v.Items[key] = value
			_, _, err = vars.CheckedUpdate(v, wo)
		}
		var conflict api.ErrCASConflict
		if errors.As(err, &conflict) {
			continue
		}
		if err != nil {
			return "", denied(err)
		}
		return value, nil
	}
	return "", fmt.Errorf("variable %s kept changing while it was written", path)
}

// ReadCAKEK reads the cluster CA's key encryption key from the job's
// variable TokenVariable(job), for an operator whose Nomad token may read
// it (`etcd-nomad env`); "" when the variable holds none.
func ReadCAKEK(ctx context.Context, cli *api.Client, job, namespace string) (string, error) {
	path := TokenVariable(job)
	v, _, err := cli.Variables().Peek(path, (&api.QueryOptions{Namespace: namespace}).WithContext(ctx))
	if err != nil {
		return "", nomadglue.Denied(cli, "read variable "+path, `variables read on path "`+path+`"`, err)
	}
	if v == nil {
		return "", nil
	}
	return v.Items[CAKEKKey], nil
}
