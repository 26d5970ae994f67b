package consul

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/hashicorp/consul/api"
)

// ErrDenied marks a request Consul refused for its ACLs: no token, an
// unknown token, or a token whose policies do not allow the operation.
var ErrDenied = errors.New("consul ACL denied the request")

// DeniedError is a request refused by Consul's ACLs, with what the caller
// must do about it. errors.Is(err, ErrDenied) holds.
type DeniedError struct {
	Addr     string // Consul's address, e.g. http://127.0.0.1:8500 ("" if unknown)
	Op       string // what was refused, e.g. "create session"
	Prefix   string // the KV prefix the token needs
	TokenSet bool   // whether a token was sent
	Detail   string // Consul's answer, e.g. "ACL not found"
	// ReadOnly: the refused request only reads (the CLI's read-only
	// commands), so the token needs key read, not the members' policy.
	ReadOnly bool
	Err      error
}

func (e *DeniedError) Error() string {
	at := "Consul"
	if e.Addr != "" {
		at += " at " + e.Addr
	}
	need := fmt.Sprintf("key_prefix %q write and session_prefix \"\" write", e.Prefix+"/")
	if e.ReadOnly {
		need = fmt.Sprintf("key_prefix %q read", e.Prefix+"/")
	}
	if !e.TokenSet {
		return fmt.Sprintf("%s refused to %s (%s): no Consul ACL token is set; set CONSUL_HTTP_TOKEN (or CONSUL_HTTP_TOKEN_FILE) to a token with %s", at, e.Op, e.Detail, need)
	}
	return fmt.Sprintf("%s refused to %s (%s): the token in CONSUL_HTTP_TOKEN (or CONSUL_HTTP_TOKEN_FILE) is unknown or lacks permission; it needs %s", at, e.Op, e.Detail, need)
}

// Unwrap gives ErrDenied and the API error.
func (e *DeniedError) Unwrap() []error { return []error{ErrDenied, e.Err} }

// aclDetail reports whether err is an ACL refusal from the Consul API, and
// Consul's reason.
func aclDetail(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	var se api.StatusError
	if errors.As(err, &se) {
		if se.Code == http.StatusForbidden || (se.Code == http.StatusUnauthorized) {
			return firstLine(se.Body), true
		}
		return "", false
	}
	// Some endpoints format their error without a StatusError.
	msg := err.Error()
	for _, s := range []string{"ACL not found", "Permission denied", "permission denied"} {
		if strings.Contains(msg, s) && strings.Contains(msg, "403") {
			return s, true
		}
	}
	return "", false
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return "403 Forbidden"
	}
	return s
}

// denied wraps err in a DeniedError when Consul's ACLs refused op, and
// returns it unchanged otherwise.
func (c *Coordinator) denied(op string, err error) error {
	detail, ok := aclDetail(err)
	if !ok {
		return err
	}
	return &DeniedError{Addr: c.o.Addr, Op: op, Prefix: c.o.Prefix, TokenSet: c.o.TokenSet, Detail: detail, Err: err}
}

// deniedRead is denied for a request that only reads.
func (c *Coordinator) deniedRead(op string, err error) error {
	err = c.denied(op, err)
	var de *DeniedError
	if errors.As(err, &de) {
		de.ReadOnly = true
	}
	return err
}

// EnvClient returns a Consul client configured like the consul CLI, from
// CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN, CONSUL_HTTP_TOKEN_FILE, CONSUL_CACERT
// and the other CONSUL_* variables, and Options carrying it with the
// address and whether a token is set (for error messages).
func EnvClient() (Options, error) {
	cfg := api.DefaultConfig()
	cli, err := api.NewClient(cfg)
	if err != nil {
		return Options{}, fmt.Errorf("consul client: %w", err)
	}
	scheme := cfg.Scheme
	if scheme == "" {
		scheme = "http"
	}
	addr := cfg.Address
	if !strings.Contains(addr, "://") {
		addr = scheme + "://" + addr
	}
	return Options{Client: cli, Addr: addr, TokenSet: cfg.Token != "" || cfg.TokenFile != ""}, nil
}
