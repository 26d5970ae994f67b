package task

import (
	"crypto/tls"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// trustState is what the member trusts and presents: the TLS scheme and
// files, the cluster CA, its rotation and the certificates' renewal. It
// is the first cut of the trust part (docs/redesign.md, step 3): the
// methods of ca.go, rotate.go, renew.go and exchange.go still hang on
// Member and reach it as m.trust.
type trustState struct {
	scheme   string
	tlsFiles certs.Files
	peerTLS  *tls.Config // client side, for peers' /status and etcd clients
	hcOnce   sync.Once
	hc       *http.Client // peers' /status (httpClient)
	ca       *certs.Pair  // tls auto: the cluster CA this member's certificates come from
	// caMismatch (under Member.mu): the coordinator holds another CA
	// than ca.
	caMismatch *status.CAMismatch
	// caExposed: the coordinator's mark of a CA whose key it held in the
	// clear (clusterca.ExposedKey), read at every CA check; nil: none.
	caExposed atomic.Pointer[clusterca.Exposure]
	renew     *renewal      // certificates renewed while running (renew.go)
	rot       rotationState // the CA rotation this member follows (rotate.go)
	caChecked time.Time
	// caCertPublished: the leader's last write of the CA certificate
	// (publishCACert).
	caCertPublished time.Time
}
