package trust

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/status"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/planner"
)

// CA rotation (`etcd-nomad tls rotate-ca`). The operator's command moves a
// record in the coordinator through phases; every member follows it on
// its own, from its renewal loop, and reports in /status what it trusts
// and which CA issued its certificates; the command moves to the next
// phase only once every member reports the current one done.
//
//	trust   members add the new CA to the CAs they trust (ca.crt, read by
//	        etcd when it starts, by /status at each handshake) and keep
//	        issuing from the old one.
//	issue   members issue their certificates from the new CA, presented
//	        with the cross certificate (certs.CrossSign) so that members
//	        whose etcd loaded only the old CA verify them; they save the
//	        new CA as theirs (tls/ca.bundle).
//	retire  the command has stored the new CA as the cluster CA (and its
//	        status CA); members trust the new CA alone. The old one's
//	        key is gone from the coordinator: nothing issues from it.
//	done    the rotation is over; the record stays so that members keep
//	        presenting the cross certificate to peers whose etcd still
//	        runs with the old CA loaded (until they restart).
//
// Members only ever move forward: a record they cannot read, or missing
// for a moment while the command replaces it, changes nothing. A member
// that restarts mid-rotation settles its CA as usual (chooseCA) and then
// catches up from the record; one created during it trusts both CAs from
// its first start.

// Phases of a CA rotation.
const (
	PhaseTrust  = planner.RotationTrust
	PhaseIssue  = planner.RotationIssue
	PhaseRetire = planner.RotationRetire
	PhaseDone   = planner.RotationDone
)

// rotationKey is the coordinator key of the CA rotation record.
const rotationKey = "ca-rotation"

// Rotation is the CA rotation record in the coordinator.
type Rotation struct {
	Phase string `json:"phase"`
	// OldCert is the certificate of the CA being replaced.
	OldCert []byte `json:"old_cert"`
	// New is the new CA: sealed with the cluster's key encryption key
	// (certs.Seal) when the cluster has one, else certs.Bundle.
	New []byte `json:"new"`
	// Cross is the new CA's certificate issued by the old CA.
	Cross []byte `json:"cross"`
	// Chain is what members present after certificates of the new CA:
	// Cross, then the chain of the rotation that made the old CA, and so
	// on. A member whose etcd has not restarted since an earlier rotation
	// still trusts only that rotation's old CA; the whole chain leads to
	// it (a few hundred bytes per rotation; expired links are skipped by
	// verifiers).
	Chain []byte `json:"chain,omitempty"`
	// The same for the peer port (certs.PeerCACert): the old CA's peer
	// CA, the new one's certified by it (certs.PeerCross), and the chain
	// of cross certificates members present after peer certificates of
	// the new CA. Members derive what a record lacks when they hold the
	// old CA's key.
	PeerOld   []byte    `json:"peer_old,omitempty"`
	PeerCross []byte    `json:"peer_cross,omitempty"`
	PeerChain []byte    `json:"peer_chain,omitempty"`
	Started   time.Time `json:"started"`
	// Changed is when Phase was set.
	Changed time.Time `json:"changed"`
}

// NewCert returns the new CA's certificate (no key needed).
func (r Rotation) NewCert() ([]byte, error) {
	if c, err := certs.SealedCert(r.New); err == nil {
		return c, nil
	}
	p, err := certs.ParseBundle(r.New)
	if err != nil {
		return nil, fmt.Errorf("rotation record: new CA: %w", err)
	}
	return p.Cert, nil
}

// OpenNew returns the new CA with its key: sealed, opened with kek; in
// the clear only without a KEK (the local coordinator's). With a KEK a
// plaintext new CA is refused: it is what a writer of the coordinator
// without the KEK can plant.
func (r Rotation) OpenNew(kek []byte) (certs.Pair, error) {
	if _, err := certs.SealedCert(r.New); err == nil {
		if kek == nil {
			return certs.Pair{}, clusterca.ErrCASealed
		}
		return certs.OpenSealed(r.New, kek)
	}
	if kek != nil {
		return certs.Pair{}, errors.New("its new CA is not sealed with the cluster's key encryption key (a CA in the clear, which anyone who may write the coordinator's keys can store)")
	}
	return certs.ParseBundle(r.New)
}

// Verify returns the new CA, key included, once the record shows that
// whoever wrote it holds the old CA's key (and the KEK, when there is
// one): the new CA opens (OpenNew), and the cross certificate certifies
// it under OldCert (certs.VerifyCross) and leads the chain members
// present. Whether OldCert is the CA to start from is the caller's to
// check: a member's own CA or one it trusts, the command's cluster CA.
func (r Rotation) Verify(kek []byte) (certs.Pair, error) {
	next, err := r.OpenNew(kek)
	if err != nil {
		return certs.Pair{}, err
	}
	if err := certs.VerifyCross(r.OldCert, next.Cert, r.Cross); err != nil {
		return certs.Pair{}, err
	}
	if len(r.Chain) > 0 && !bytes.HasPrefix(r.Chain, r.Cross) {
		return certs.Pair{}, errors.New("its chain does not start with its cross certificate")
	}
	return next, nil
}

// chain is Chain, or Cross for records without one: its certificates
// only, each encoded again (certs.Certificates: a record's other blocks
// never reach a file etcd loads).
func (r Rotation) chain() []byte {
	if len(r.Chain) > 0 {
		return certs.Certificates(r.Chain)
	}
	return certs.Certificates(r.Cross)
}

// peerChain is PeerChain, or PeerCross for records without one, the same
// way.
func (r Rotation) peerChain() []byte {
	if len(r.PeerChain) > 0 {
		return certs.Certificates(r.PeerChain)
	}
	return certs.Certificates(r.PeerCross)
}

// LoadRotation reads the CA rotation record; coord.ErrNotStored (wrapped)
// when there is none.
func LoadRotation(ctx context.Context, c interface {
	Load(ctx context.Context, key string) ([]byte, error)
}) (Rotation, error) {
	b, err := c.Load(ctx, rotationKey)
	if err != nil {
		return Rotation{}, fmt.Errorf("read CA rotation: %w", err)
	}
	var r Rotation
	if err := json.Unmarshal(b, &r); err != nil {
		return Rotation{}, fmt.Errorf("CA rotation record: %w", err)
	}
	switch r.Phase {
	case PhaseTrust, PhaseIssue, PhaseRetire, PhaseDone:
	default:
		return Rotation{}, fmt.Errorf("CA rotation record: unknown phase %q", r.Phase)
	}
	return r, nil
}

// rotationState is what a member follows of a rotation.
type rotationState struct {
	// issuer is the CA this member issues from once it moved to the new
	// one (nil: t.ca, the CA settled at start).
	issuer atomic.Pointer[certs.Pair]
	// chain is presented after this member's certificates: the cross
	// certificate once they come from the new CA.
	chain atomic.Pointer[[]byte]
	// trust is every CA certificate this member trusts (PEM), and
	// statusCAs the status CAs it accepts on /status besides.
	trust     atomic.Pointer[[]byte]
	statusCAs atomic.Pointer[[]byte]
	// peerTrust and peerChain are the same for the peer port: the peer
	// CAs of the CAs in trust, and the peer cross certificates.
	peerTrust atomic.Pointer[[]byte]
	peerChain atomic.Pointer[[]byte]
	// phase is the last phase this member carried out; warned the
	// last record it could not follow.
	phase  atomic.Pointer[string]
	warned string
	// step is the rotation (its start) and phase last carried out.
	step atomic.Pointer[string]
	// cas are the fingerprints of the rotation's old and new CA.
	cas atomic.Pointer[[2]string]
	// refused says why the record in the coordinator is refused (nil:
	// none is): /status and /health report it.
	refused atomic.Pointer[string]
}

// rotationCovers reports whether ca is the old or the new CA of the
// rotation this member follows.
func (t *Trust) rotationCovers(ca certs.Pair) bool {
	p := t.rotation.cas.Load()
	fp := certs.Fingerprint(ca.Cert)
	return p != nil && (fp == p[0] || fp == p[1])
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// currentCA is the CA this member issues from.
func (t *Trust) currentCA() *certs.Pair {
	if p := t.rotation.issuer.Load(); p != nil {
		return p
	}
	return t.ca
}

// chain is what this member presents after its certificates.
func (t *Trust) chain() []byte {
	if c := t.rotation.chain.Load(); c != nil {
		return *c
	}
	return nil
}

// peerChain is what this member presents after its peer certificates.
func (t *Trust) peerChain() []byte {
	if c := t.rotation.peerChain.Load(); c != nil {
		return *c
	}
	return nil
}

// peerTrust is the peer CAs the peer port trusts: those of the CAs a
// rotation trusts when this member follows one, else the current CA's.
func (t *Trust) peerTrust() ([]byte, error) {
	if tr := t.rotation.peerTrust.Load(); tr != nil {
		return *tr, nil
	}
	return certs.PeerCACert(*t.currentCA())
}

// followRotation carries out the rotation record's phase on this member
// (TLS auto only); it returns whether certificates must be issued again.
func (t *Trust) followRotation(ctx context.Context) bool {
	if t.ca == nil {
		return false
	}
	// Followed every few seconds: from the watched copy, which costs no
	// request while it is current.
	r, err := LoadRotation(ctx, t.cfg.Reads)
	if errors.Is(err, coord.ErrNotStored) {
		t.rotation.refused.Store(nil)
		return false
	}
	if err != nil {
		t.warnRotation(err.Error())
		return false
	}
	step := r.Started.UTC().Format(time.RFC3339Nano) + " " + r.Phase
	if p := t.rotation.step.Load(); p != nil && *p == step {
		return false
	}
	// Nothing of the record is used before it proves itself: a writer of
	// the coordinator could otherwise make this member trust its CA.
	next, err := r.Verify(t.cfg.KEK)
	if err != nil {
		t.refuseRotation(r, err.Error())
		return false
	}
	newCert := next.Cert
	cur := t.currentCA()
	oldFP, newFP, curFP := certs.Fingerprint(r.OldCert), certs.Fingerprint(newCert), certs.Fingerprint(cur.Cert)
	f := planner.FollowRotation(r.Phase, oldFP, newFP, curFP, curFP == oldFP || t.alreadyTrusts(r.OldCert))
	if f.Ignored != "" {
		t.warnRotation(f.Ignored)
		return false
	}
	if f.Refused != "" {
		t.refuseRotation(r, f.Refused)
		return false
	}
	// What this member trusts is built from the parsed certificates,
	// never from the record's bytes (Verify took exactly one old CA).
	trustsOld := slices.Contains(f.Trust, oldFP)
	trust := certs.Certificates(newCert)
	if trustsOld {
		trust = append(certs.Certificates(r.OldCert), trust...)
	}
	t.rotation.cas.Store(&[2]string{oldFP, newFP})
	peerOld, peerCross, peerChain, peerNew, err := t.rotationPeerCAs(r, oldFP, next)
	if err != nil {
		t.warnRotation("peer CAs: " + err.Error())
		return false
	}
	peerTrust := append(append([]byte{}, peerOld...), peerNew...)
	if !trustsOld {
		peerTrust = peerNew
	}
	t.rotation.trust.Store(&trust)
	t.rotation.peerTrust.Store(&peerTrust)
	var st []byte
	for _, ca := range []certs.Pair{*cur, next} {
		if s, err := certs.StatusCA(ca); err == nil {
			st = append(st, s.Cert...)
		}
	}
	t.rotation.statusCAs.Store(&st)
	reissue := false
	issuingNew := f.Cross
	if f.IssueNew {
		// Saved first: a restart from here on runs with the new CA.
		if err := writeCA(t.cfg.Dir, next); err != nil {
			t.warnRotation("save the new CA: " + err.Error())
			return false
		}
		t.rotation.issuer.Store(&next)
		reissue = true
	}
	// Certificates of the new CA are presented with the whole chain;
	// those of the old CA with the chain that leads from it (earlier
	// rotations': peers may still have their CAs loaded).
	want := r.chain()
	if !issuingNew {
		want = bytes.TrimPrefix(want, certs.Certificates(r.Cross))
	}
	if have := t.chain(); !bytes.Equal(have, want) {
		t.rotation.chain.Store(&want)
		reissue = true
	}
	// The same on the peer port, with the peer CAs' cross certificates.
	wantPeer := peerChain
	if !issuingNew {
		wantPeer = bytes.TrimPrefix(wantPeer, peerCross)
	}
	if have := t.peerChain(); !bytes.Equal(have, wantPeer) {
		t.rotation.peerChain.Store(&wantPeer)
		reissue = true
	}
	if r.Phase == PhaseTrust || !bytes.Equal(t.trustedCAs(), trust) || !bytes.Equal(t.trustedPeerCAs(), peerTrust) {
		reissue = true // writes ca.crt and peer-ca.crt with the trust
	}
	phase := r.Phase
	t.rotation.phase.Store(&phase)
	t.rotation.step.Store(&step)
	t.rotation.warned = ""
	t.rotation.refused.Store(nil)
	t.log.Info("following the CA rotation", "phase", r.Phase, "old_ca", oldFP, "new_ca", newFP, "issuer", certs.Fingerprint(t.currentCA().Cert))
	return reissue
}

// refuseRotation logs (once per message) and reports in /status and
// /health that this member refuses the rotation record r: it changes
// nothing of what this member trusts or issues from.
func (t *Trust) refuseRotation(r Rotation, why string) {
	msg := fmt.Sprintf("the CA rotation record %s (phase %s, started %s) is refused: %s; an operator's `tls rotate-ca` writes a new CA sealed with the cluster's key encryption key and certified by the current CA; if none started this one, delete the record and find who wrote it",
		clusterca.Location(t.cfg.Cluster, rotationKey), r.Phase, r.Started.UTC().Format(time.RFC3339), why)
	t.rotation.refused.Store(&msg)
	if t.rotation.warned == msg {
		return
	}
	t.rotation.warned = msg
	t.log.Error("CA rotation refused", "reason", msg)
}

// alreadyTrusts reports whether caCert is among the CAs this member
// trusts now: those it follows, or its ca.crt (written by its last run).
func (t *Trust) alreadyTrusts(caCert []byte) bool {
	fp := certs.Fingerprint(caCert)
	var have []byte
	if tr := t.rotation.trust.Load(); tr != nil {
		have = append(have, *tr...)
	}
	if b, err := os.ReadFile(memberFiles(t.cfg.Dir).CA); err == nil {
		have = append(have, b...)
	}
	for _, c := range certs.ParseCertificates(have) {
		if certs.Fingerprint(pemCert(c.Raw)) == fp {
			return true
		}
	}
	return false
}

// rotationPeerCAs returns the peer side of rotation r (old CA
// fingerprint oldFP, new CA next): the old CA's peer CA, the cross
// certificate, the chain, and the new CA's peer CA. A member derives the
// first two from the old CA's key when it holds it (its CA settled at
// start, or the one it issues from). The record's own peer fields are
// written by anyone who can write the coordinator's keys, and Rotation.
// Verify checks none of them: its cross certificate and chain are only
// presented, never trusted, but its old peer CA is taken only when this
// member trusts that peer CA already (it did before it moved to the new
// CA); otherwise the new peer CA is trusted alone.
func (t *Trust) rotationPeerCAs(r Rotation, oldFP string, next certs.Pair) (old, cross, chain, peerNew []byte, err error) {
	if peerNew, err = certs.PeerCACert(next); err != nil {
		return nil, nil, nil, nil, err
	}
	chain = r.peerChain()
	for _, p := range []*certs.Pair{t.ca, t.currentCA()} {
		if p == nil || certs.Fingerprint(p.Cert) != oldFP {
			continue
		}
		if old, err = certs.PeerCACert(*p); err != nil {
			return nil, nil, nil, nil, err
		}
		if cross, err = certs.PeerCross(*p, next); err != nil {
			return nil, nil, nil, nil, err
		}
		if len(chain) == 0 {
			chain = cross
		}
		return old, cross, append([]byte{}, chain...), peerNew, nil
	}
	return t.trustedAmong(r.PeerOld), certs.Certificates(r.PeerCross), chain, peerNew, nil
}

// trustedAmong returns the certificates of peerCA (a record's old peer
// CA, which anyone with key write may have written) that this member's
// peer port trusts already (those it follows, or its peer-ca.crt, written
// by its last run), each encoded again; the others are dropped: a record
// adds no peer CA of its own.
func (t *Trust) trustedAmong(peerCA []byte) []byte {
	var have []byte
	if tr := t.rotation.peerTrust.Load(); tr != nil {
		have = append(have, *tr...)
	}
	if b, err := os.ReadFile(peerFiles(t.cfg.Dir).CA); err == nil {
		have = append(have, b...)
	}
	known := map[string]bool{}
	for _, c := range certs.ParseCertificates(have) {
		known[certs.Fingerprint(pemCert(c.Raw))] = true
	}
	var out []byte
	for _, c := range certs.ParseCertificates(peerCA) {
		if p := pemCert(c.Raw); known[certs.Fingerprint(p)] {
			out = append(out, p...)
		}
	}
	return out
}

func (t *Trust) warnRotation(msg string) {
	if t.rotation.warned == msg {
		return
	}
	t.rotation.warned = msg
	t.log.Warn("CA rotation not followed", "reason", msg)
}

// rotationTrust is the CA certificates to trust: the rotation's when
// this member follows one, else the current CA's.
func (t *Trust) rotationTrust() []byte {
	if tr := t.rotation.trust.Load(); tr != nil {
		return *tr
	}
	return t.currentCA().Cert
}

func (t *Trust) RotationView() *status.RotationView {
	ca := t.currentCA()
	if ca == nil {
		return nil
	}
	v := &status.RotationView{Issuer: certs.Fingerprint(ca.Cert)}
	if b, err := os.ReadFile(t.tlsFiles.CA); err == nil {
		for _, c := range certs.ParseCertificates(b) {
			v.Trusted = append(v.Trusted, certs.Fingerprint(pemCert(c.Raw)))
		}
	}
	if p := t.rotation.phase.Load(); p != nil {
		v.Phase = *p
	}
	if p := t.rotation.refused.Load(); p != nil {
		v.Refused = *p
	}
	return v
}

// statusServerConfig is base accepting on /status client certificates of
// every CA this member trusts now and of their status CAs (a CA rotation
// adds and removes them while the member runs).
func (t *Trust) statusServerConfig(base *tls.Config) *tls.Config {
	tr := t.rotation.trust.Load()
	if tr == nil {
		return base
	}
	cfg := base.Clone()
	cfg.GetConfigForClient = nil
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(*tr)
	if s := t.rotation.statusCAs.Load(); s != nil {
		pool.AppendCertsFromPEM(*s)
	}
	cfg.ClientCAs = pool
	return cfg
}

// RotateOptions drive a CA rotation (RotateCA).
type RotateOptions struct {
	Cluster     *config.Cluster
	Coordinator coord.Coordinator
	// KEK opens the sealed cluster CA; nil for the local coordinator's.
	KEK []byte
	// Members reports every member of the definition (status.Gather).
	Members func(ctx context.Context) ([]status.Member, error)
	// Progress receives one line per step and per change of progress.
	Progress func(string)
	// Poll paces the checks of the members (default 2s).
	Poll time.Duration
	// RetireAfter: the old CA stays trusted at least this long after the
	// members issue from the new one, so that client certificates issued
	// from it before (workloads', access.certificate_ttl) are renewed
	// from the new one first.
	RetireAfter time.Duration
}

// RotateCA replaces the cluster CA without restarting a member: it starts
// a rotation, or resumes the one the coordinator holds, and moves it
// through its phases (see the top of this file) as the members report
// each one done, until it is done. It may be interrupted anywhere and run
// again: every step is re-derived from the record and the members.
func RotateCA(ctx context.Context, o RotateOptions) error {
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	say := o.Progress
	if say == nil {
		say = func(string) {}
	}
	r, err := LoadRotation(ctx, o.Coordinator)
	switch {
	case errors.Is(err, coord.ErrNotStored) || err == nil && r.Phase == PhaseDone:
		if r, err = startRotation(ctx, o); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		say(fmt.Sprintf("resuming the CA rotation started %s, at phase %s", r.Started.UTC().Format(time.RFC3339), r.Phase))
	}
	next, err := verifyRecord(ctx, o, r)
	if err != nil {
		return err
	}
	newFP := certs.Fingerprint(next.Cert)
	for {
		switch r.Phase {
		case PhaseTrust:
			say(fmt.Sprintf("phase trust: every member adds the new CA %s to the CAs it trusts", newFP))
			if err := waitMembers(ctx, o, "trust the new CA", r.Phase, newFP); err != nil {
				return err
			}
			r, err = setPhase(ctx, o, r, PhaseIssue)
		case PhaseIssue:
			say("phase issue: every member issues its certificates from the new CA (presented with the old CA's cross certificate)")
			if err := waitMembers(ctx, o, "issue from the new CA", r.Phase, newFP); err != nil {
				return err
			}
			if wait := time.Until(r.Changed.Add(o.RetireAfter)); wait > 0 {
				say(fmt.Sprintf("waiting %s (retire_after: client certificates of the old CA are renewed first)", wait.Round(time.Second)))
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
			}
			if err := replaceClusterCA(ctx, o, next); err != nil {
				return err
			}
			say("stored the new CA as the cluster CA; the old CA's key is deleted")
			r, err = setPhase(ctx, o, r, PhaseRetire)
		case PhaseRetire:
			say("phase retire: every member trusts the new CA alone")
			if err := waitMembers(ctx, o, "trust the new CA alone", r.Phase, newFP); err != nil {
				return err
			}
			// No member trusts the old CA now: a mark that its key was
			// once in the clear (clusterca.ExposedKey) is over.
			if e, ok, err := clusterca.LoadExposure(ctx, o.Coordinator); err == nil && ok && e.CA != newFP {
				if err := o.Coordinator.Delete(ctx, clusterca.ExposedKey); err != nil {
					return fmt.Errorf("delete %s: %w", clusterca.Location(o.Cluster, clusterca.ExposedKey), err)
				}
				say("deleted the mark of the old CA's exposed key")
			}
			r, err = setPhase(ctx, o, r, PhaseDone)
		case PhaseDone:
			say(fmt.Sprintf("CA rotation done in %s: the cluster CA is %s", time.Since(r.Started).Round(time.Millisecond), newFP))
			// A running creds pinned to the old CA keeps trusting it
			// (creds/pin.go): the rotation does not end an exposure of
			// the old CA's key for it.
			say(fmt.Sprintf("re-pin the applications: set ETCD_NOMAD_CA_FINGERPRINT (creds -ca-fingerprint) to %s in every application job and redeploy; until then a creds pinned to the old CA still trusts it, and sends its workload identity to whatever the old CA's key signs", newFP))
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// verifyRecord returns the new CA of the rotation record r once it shows
// that its writer held the cluster CA's key (Rotation.Verify) and that it
// replaces the cluster CA: its old CA is the coordinator's cluster CA, or
// (from phase issue on, once the command stored it) its new one. Anything
// else is refused before a step: resuming a planted record would end with
// the planter's CA stored, sealed, as the cluster CA.
func verifyRecord(ctx context.Context, o RotateOptions, r Rotation) (certs.Pair, error) {
	refuse := func(why string) error {
		return fmt.Errorf("the CA rotation record %s (phase %s, started %s) is refused: %s. "+
			"No `tls rotate-ca` writes such a record: find who wrote it, delete it, and run the command again",
			clusterca.Location(o.Cluster, rotationKey), r.Phase, r.Started.UTC().Format(time.RFC3339), why)
	}
	next, err := r.Verify(o.KEK)
	if err != nil {
		return certs.Pair{}, refuse(err.Error())
	}
	held, err := clusterca.Read(ctx, o.Coordinator, o.Cluster.Name, o.KEK)
	if err != nil {
		return certs.Pair{}, err
	}
	heldFP := certs.Fingerprint(held.Cert)
	switch {
	case heldFP == certs.Fingerprint(r.OldCert) && r.Phase != PhaseRetire && r.Phase != PhaseDone:
	case clusterca.Same(held, next) && r.Phase != PhaseTrust:
	default:
		return certs.Pair{}, refuse(fmt.Sprintf("at phase %s it replaces %s by %s, but the cluster CA is %s",
			r.Phase, certs.Fingerprint(r.OldCert), certs.Fingerprint(next.Cert), heldFP))
	}
	return next, nil
}

// startRotation creates the new CA and its cross certificate and stores
// the rotation record at phase trust (or returns the record another
// command stored first).
func startRotation(ctx context.Context, o RotateOptions) (Rotation, error) {
	prev, err := clusterca.Read(ctx, o.Coordinator, o.Cluster.Name, o.KEK)
	if err != nil {
		return Rotation{}, err
	}
	now := time.Now()
	next, err := certs.NewCA(o.Cluster.Name, now)
	if err != nil {
		return Rotation{}, err
	}
	cross, err := certs.CrossSign(prev, next)
	if err != nil {
		return Rotation{}, err
	}
	blob := next.Bundle()
	if o.KEK != nil {
		if blob, err = certs.Seal(next, o.KEK); err != nil {
			return Rotation{}, err
		}
	}
	// The same for the peer port: the peer CAs and their cross
	// certificate (certs.PeerCross).
	peerOld, err := certs.PeerCACert(prev)
	if err != nil {
		return Rotation{}, err
	}
	peerCross, err := certs.PeerCross(prev, next)
	if err != nil {
		return Rotation{}, err
	}
	chain, peerChain := cross, append([]byte{}, peerCross...)
	if last, err := LoadRotation(ctx, o.Coordinator); err == nil {
		// The rotation that made the CA replaced now: its chain leads on
		// to the CAs before, which members may still have loaded. Only
		// a record that proves itself (Verify) lends its chain.
		if c, err := last.Verify(o.KEK); err == nil && clusterca.Same(c, prev) {
			chain = append(append([]byte{}, cross...), last.chain()...)
			peerChain = append(peerChain, last.peerChain()...)
		}
	}
	r := Rotation{Phase: PhaseTrust, OldCert: prev.Cert, New: blob, Cross: cross, Chain: chain,
		PeerOld: peerOld, PeerCross: peerCross, PeerChain: peerChain, Started: now, Changed: now}
	if err := o.Coordinator.Delete(ctx, rotationKey); err != nil {
		return Rotation{}, fmt.Errorf("delete the finished CA rotation: %w", err)
	}
	b, _ := json.Marshal(r)
	got, err := o.Coordinator.LoadOrStore(ctx, rotationKey, b)
	if err != nil {
		return Rotation{}, fmt.Errorf("store the CA rotation: %w", err)
	}
	if !bytes.Equal(got, b) {
		return LoadRotation(ctx, o.Coordinator)
	}
	o.progress(fmt.Sprintf("started a CA rotation: %s replaces %s", certs.Fingerprint(next.Cert), certs.Fingerprint(prev.Cert)))
	return r, nil
}

func (o RotateOptions) progress(s string) {
	if o.Progress != nil {
		o.Progress(s)
	}
}

// setPhase writes the record at phase under the coordination lock. The
// record is briefly absent between the delete and the store: members
// read that as no change.
func setPhase(ctx context.Context, o RotateOptions, r Rotation, phase string) (Rotation, error) {
	r.Phase, r.Changed = phase, time.Now()
	b, _ := json.Marshal(r)
	err := underLock(ctx, o, func() error {
		if err := o.Coordinator.Delete(ctx, rotationKey); err != nil {
			return err
		}
		_, err := o.Coordinator.LoadOrStore(ctx, rotationKey, b)
		return err
	})
	if err != nil {
		return Rotation{}, fmt.Errorf("set the CA rotation to phase %s: %w", phase, err)
	}
	return r, nil
}

// replaceClusterCA stores next as the cluster CA (sealed with the KEK, or
// in the clear without) and its status CA. Between the delete and the
// store a member may store the CA it issues from (restoreCA): by now that
// is next too, and anything else is replaced again.
func replaceClusterCA(ctx context.Context, o RotateOptions, next certs.Pair) error {
	key, blob := clusterca.PlainKey, next.Bundle()
	if o.KEK != nil {
		sealed, err := certs.Seal(next, o.KEK)
		if err != nil {
			return err
		}
		key, blob = clusterca.SealedKey, sealed
	}
	st, err := certs.StatusCA(next)
	if err != nil {
		return err
	}
	return underLock(ctx, o, func() error {
		for _, kv := range []struct {
			key  string
			blob []byte
			same func([]byte) bool
		}{
			{key, blob, func(b []byte) bool {
				held, err := clusterca.Load(ctx, o.Coordinator, o.KEK)
				return err == nil && clusterca.Same(held, next)
			}},
			{clusterca.StatusKey, st.Bundle(), func(b []byte) bool { return bytes.Equal(b, st.Bundle()) }},
		} {
			for try := 0; ; try++ {
				if try == 5 {
					return fmt.Errorf("replace %s: another value keeps being stored", kv.key)
				}
				if err := o.Coordinator.Delete(ctx, kv.key); err != nil {
					return fmt.Errorf("replace %s: %w", kv.key, err)
				}
				got, err := o.Coordinator.LoadOrStore(ctx, kv.key, kv.blob)
				if err != nil {
					return fmt.Errorf("replace %s: %w", kv.key, err)
				}
				if kv.same(got) {
					break
				}
			}
		}
		return nil
	})
}

// underLock runs f holding the coordination lock, so that no member
// changes the membership meanwhile.
func underLock(ctx context.Context, o RotateOptions, f func() error) error {
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l, err := o.Coordinator.Lock(lctx, "tls rotate-ca")
	if err != nil {
		return fmt.Errorf("take the coordination lock: %w", err)
	}
	defer l.Unlock(context.WithoutCancel(ctx))
	return f()
}

// waitMembers waits until every member of the definition reports phase
// carried out for the new CA newFP (planner.RotationPhaseDone).
func waitMembers(ctx context.Context, o RotateOptions, what, phase, newFP string) error {
	last := ""
	for {
		sts, err := o.Members(ctx)
		ms := make([]planner.RotationMember, 0, len(sts))
		for _, s := range sts {
			m := planner.RotationMember{Name: s.Name, Answered: !s.Unreachable}
			if s.CA != nil {
				m.Reports, m.Issuer, m.Trusted = true, s.CA.Issuer, s.CA.Trusted
			}
			ms = append(ms, m)
		}
		done, waiting := planner.RotationPhaseDone(phase, newFP, ms)
		n := len(sts) - len(waiting)
		if err != nil {
			waiting = append([]string{err.Error()}, waiting...)
		}
		line := fmt.Sprintf("  %d/%d members %s", n, len(sts), what)
		if len(waiting) > 0 {
			line += "; waiting for " + strings.Join(waiting, ", ")
		}
		if line != last {
			o.progress(line)
			last = line
		}
		if err == nil && done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for members to %s: %w (run the command again to resume)", what, ctx.Err())
		case <-time.After(o.Poll):
		}
	}
}
