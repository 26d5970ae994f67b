package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/nomad"
)

// A member started by a plain `nomad job run` finds no key encryption key
// in its environment: nobody put one in the job's variable before the
// first start, so the template rendered none. It then takes the key from
// the variable itself, creating it when none exists and no CA is sealed
// yet: first writer wins (a check-and-set create or update), and every
// member, the writer included, re-reads the variable and uses what it
// holds, so racing members end with one key. Where Nomad's ACLs let the
// workload identity only read the variable, the write is refused and the
// member names the one command an operator runs first.

// ErrKEKLost: the coordinator holds a cluster CA sealed with a key the
// job's variable no longer holds. Creating a new key would seal nothing
// (the CA is stored create-only) and leave every member without a saved CA
// out for good, so none is created.
var ErrKEKLost = errors.New("the cluster CA in Consul is sealed with a key encryption key the job's Nomad variable does not hold")

// kekStep is what a member without a key encryption key does next.
type kekStep int

const (
	// kekUse: the variable holds a key: use it, whoever wrote it.
	kekUse kekStep = iota
	// kekCreate: no key and no sealed CA: create one, check-and-set.
	kekCreate
	// kekRefuse: no key, but a CA sealed with one (ErrKEKLost).
	kekRefuse
)

// decideKEK is the step for the variable's item held ("" when absent) and
// whether the coordinator holds a sealed CA. The coordinator must be read
// before the variable: a key is always in the variable before a CA is
// sealed with it, so a sealed CA seen first with an empty variable after
// means the key was removed, never that another member is creating it.
func decideKEK(held string, sealedCA bool) kekStep {
	switch {
	case held != "":
		return kekUse
	case sealedCA:
		return kekRefuse
	default:
		return kekCreate
	}
}

// MemberCAKEK returns the cluster CA's key encryption key (base64) for a
// member started without one, from the job's variable TokenVariable(job)
// through the member's own Nomad client (the task API, its workload
// identity), creating it there when decideKEK says so; created reports
// whether this call's key is the one stored. sealedCA reports whether the
// coordinator holds a sealed cluster CA. The key is never printed.
func MemberCAKEK(ctx context.Context, cli *api.Client, job, namespace string, sealedCA func(context.Context) (bool, error)) (kek string, created bool, err error) {
	return memberCAKEK(ctx, cli.Variables(), memberDenied(cli, job, namespace), job, namespace, sealedCA)
}

func memberCAKEK(ctx context.Context, vars varStore, denied func(error) error, job, namespace string, sealedCA func(context.Context) (bool, error)) (string, bool, error) {
	path := TokenVariable(job)
	sealed, err := sealedCA(ctx)
	if err != nil {
		return "", false, fmt.Errorf("read the sealed cluster CA: %w", err)
	}
	held, err := readItem(ctx, vars, denied, namespace, path, CAKEKKey)
	if err != nil {
		return "", false, err
	}
	var fresh string
	switch decideKEK(held, sealed) {
	case kekRefuse:
		return "", false, fmt.Errorf("%w (variable %s, key %s): not creating another. Put back the key the CA was sealed with "+
			"(a running member's allocation holds it in secrets/member.env), or, if it is lost, delete the sealed CA in Consul so that "+
			"a member with a saved CA stores it again sealed with a new key", ErrKEKLost, path, CAKEKKey)
	case kekCreate:
		if fresh, err = certs.NewKEK(); err != nil {
			return "", false, err
		}
		if _, err := setItem(ctx, vars, denied, namespace, path, CAKEKKey, fresh, true); err != nil {
			return "", false, fmt.Errorf("create the cluster CA's key encryption key in variable %s: %w", path, err)
		}
		// First writer wins: what the variable holds now is the key,
		// whether this member or another wrote it.
		if held, err = readItem(ctx, vars, denied, namespace, path, CAKEKKey); err != nil {
			return "", false, err
		}
	}
	if _, err := certs.ParseKEK(held); err != nil {
		return "", false, fmt.Errorf("variable %s, key %s: %w (not replaced: fix or remove it)", path, CAKEKKey, err)
	}
	return held, held == fresh, nil
}

// readItem reads key of the variable path; "" when either is absent.
func readItem(ctx context.Context, vars varStore, denied func(error) error, namespace, path, key string) (string, error) {
	v, _, err := vars.Peek(path, (&api.QueryOptions{Namespace: namespace}).WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("read variable %s: %w", path, denied(err))
	}
	if v == nil {
		return "", nil
	}
	return v.Items[key], nil
}

// memberDenied explains a refusal to a member: under Nomad ACLs a workload
// identity may read its job's variable, not write it (Nomad checks writes
// against policies alone), so an operator creates the key first.
func memberDenied(cli *api.Client, job, namespace string) func(error) error {
	path := TokenVariable(job)
	return func(err error) error {
		err = nomadglue.Denied(cli, "write variable "+path+" with the member's workload identity", `variables write on path "`+path+`"`, err)
		if !errors.Is(err, nomadglue.ErrDenied) {
			return err
		}
		return fmt.Errorf("%w. Under Nomad ACLs a workload identity may read its job's variable, not write it: "+
			"create the key once before the members start: %s (or deploy with 'etcd-nomad job run', which does)", err, FirstKEKCommand(job, namespace))
	}
}

// FirstKEKCommand is the one command an operator runs before a plain
// `nomad job run` where the members' workload identity may not write
// their job's variable (Nomad ACLs): it creates the variable with a fresh
// key, create-only (-check-index 0), so it never replaces a key or the
// members' Consul token. `etcd-nomad job run` does the same by itself.
func FirstKEKCommand(job, namespace string) string {
	ns := ""
	if namespace != "" && namespace != "default" {
		ns = " -namespace " + namespace
	}
	return fmt.Sprintf("nomad var put%s -check-index 0 %s %s=$(openssl rand -base64 32)", ns, TokenVariable(job), CAKEKKey)
}
