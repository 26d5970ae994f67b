package consul

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"
)

// Classification of Consul API errors (pure; the real refusals are tested
// on an ACL-enabled agent in e2e/acl).
func TestDeniedClassification(t *testing.T) {
	c := &Coordinator{o: Options{Prefix: "etcd-nomad/main", Addr: "http://127.0.0.1:8500"}}
	for _, tc := range []struct {
		name   string
		err    error
		denied bool
	}{
		{"403 status error", fmt.Errorf("wrapped: %w", api.StatusError{Code: 403, Body: "Permission denied: anonymous token lacks permission"}), true},
		{"403 ACL not found", api.StatusError{Code: 403, Body: "ACL not found"}, true},
		{"500", api.StatusError{Code: 500, Body: "rpc error"}, false},
		{"plain 403 text", errors.New("Unexpected response code: 403 (Permission denied)"), true},
		{"connection refused", errors.New("dial tcp 127.0.0.1:8500: connect: connection refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.denied("read x", tc.err)
			if got := errors.Is(err, ErrDenied); got != tc.denied {
				t.Fatalf("errors.Is(ErrDenied) = %v, want %v (%v)", got, tc.denied, err)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("the API error is not wrapped: %v", err)
			}
			if tc.denied {
				for _, want := range []string{"http://127.0.0.1:8500", "CONSUL_HTTP_TOKEN", "no Consul ACL token is set", `"etcd-nomad/main/"`} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%q lacks %q", err, want)
					}
				}
			}
		})
	}
	c.o.TokenSet = true
	if err := c.denied("read x", api.StatusError{Code: 403, Body: "ACL not found"}); !strings.Contains(err.Error(), "unknown or lacks permission") {
		t.Fatalf("with a token set: %v", err)
	}
}
