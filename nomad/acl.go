package nomadglue

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// ErrDenied marks a request Nomad refused for its ACLs: no token, an
// unknown token, or a token whose policies do not allow the operation.
var ErrDenied = errors.New("nomad ACL denied the request")

// DeniedError is a request refused by Nomad's ACLs, with what the caller
// must do about it. errors.Is(err, ErrDenied) holds.
type DeniedError struct {
	Addr     string // Nomad's address ("" if unknown)
	Op       string // what was refused, e.g. "list allocations"
	Need     string // the capabilities the token needs
	TokenSet bool   // whether a token was sent
	Detail   string // Nomad's answer, e.g. "Permission denied"
	Err      error
}

func (e *DeniedError) Error() string {
	at := "Nomad"
	if e.Addr != "" {
		at += " at " + e.Addr
	}
	if !e.TokenSet {
		return fmt.Sprintf("%s refused to %s (%s): no Nomad ACL token is set; set NOMAD_TOKEN to a token with %s", at, e.Op, e.Detail, e.Need)
	}
	return fmt.Sprintf("%s refused to %s (%s): the token in NOMAD_TOKEN is unknown or lacks permission; it needs %s", at, e.Op, e.Detail, e.Need)
}

// Unwrap gives ErrDenied and the API error.
func (e *DeniedError) Unwrap() []error { return []error{ErrDenied, e.Err} }

// Capabilities the etcd-nomad paths need, for Denied's need argument.
const (
	// NeedRead: the members and `status` list the job's allocations.
	NeedRead = `namespace capability "read-job" (policy "read")`
	// NeedSubmit: `job run` registers the job and follows its deployment.
	NeedSubmit = `namespace capabilities "submit-job" and "read-job" (policy "write")`
)

// Denied wraps err in a DeniedError when Nomad's ACLs refused op, naming
// the capabilities need; any other error is returned unchanged. cli may be
// nil.
func Denied(cli *api.Client, op, need string, err error) error {
	if err == nil {
		return nil
	}
	detail, ok := aclDetail(err)
	if !ok {
		return err
	}
	e := &DeniedError{Op: op, Need: need, Detail: detail, Err: err, TokenSet: os.Getenv("NOMAD_TOKEN") != ""}
	if cli != nil {
		e.Addr = cli.Address()
	}
	return e
}

func aclDetail(err error) (string, bool) {
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) {
		if ue.StatusCode() != http.StatusForbidden && ue.StatusCode() != http.StatusUnauthorized {
			return "", false
		}
		d := strings.TrimSpace(ue.Body())
		if i := strings.IndexByte(d, '\n'); i >= 0 {
			d = d[:i]
		}
		if d == "" {
			d = "403 Forbidden"
		}
		return d, true
	}
	msg := err.Error()
	for _, s := range []string{"Permission denied", "ACL token not found", "permission denied"} {
		if strings.Contains(msg, s) && strings.Contains(msg, "403") {
			return s, true
		}
	}
	return "", false
}
