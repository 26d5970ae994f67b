package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcd-nomad/etcd-nomad/planner"
)

// The cluster CA and 'etcd-nomad tls rotate-ca' (task/trust/ca.go, rotate.go),
// as far as trust between members goes. CAs are numbers; a CA made by a
// rotation is certified by the CA it replaces (the cross certificate,
// caParent). Each allocation's member directory keeps the CA it issues
// from (tls/ca.bundle) and the CAs it trusts (ca.crt); its process
// settles its CA at start (chooseCA: the saved one, else the
// coordinator's, else a new one where no cluster exists), offers it to the
// coordinator (restoreCA, at start and at each CA check), follows the
// rotation record at start and at every loop (planner.FollowRotation),
// and its etcd loads the CAs ca.crt names when it starts. A member
// presents its certificate with the chain of cross certificates up from
// its CA once it follows a rotation record.
//
// The operator's command moves the record through its phases once every
// listed member reports the current one carried out
// (planner.RotationPhaseDone, over /status); it stores the new CA as the
// cluster CA before retire. Consul's state loss takes the CA and the
// record with it; a restore of an older state brings back the ones then.
//
// The check (InvTLS): two members of one cluster that can reach each other
// and whose CAs descend from one CA (a rotation's) verify each other's
// certificates (the issuer, or a CA of its presented chain, is among the
// CAs the verifier's etcd loaded): a rotation never cuts members off.
// Two CAs of no common descent (a member with no saved CA created one
// while Consul had lost the cluster's and every member holding it was
// out of reach: firstCA's known blind spot) are not checked, and the
// model never makes a failed verification cut a connection (it does not
// model TLS on the client or status ports either).

// tlsDisk is what the member directory keeps (lost with the disk).
type tlsDisk struct {
	saved int   // the CA it issues from (tls/ca.bundle), 0: none
	trust []int // the CAs ca.crt names, nil: none written
}

// tlsProc is the process's TLS state (lost on a crash).
type tlsProc struct {
	issuer    int
	following bool   // follows a rotation record: presents the chain up from its CA
	step      string // the rotation step last carried out
	loaded    []int  // the CAs its etcd loaded when it started
}

// rotationRec is the rotation record in the coordinator.
type rotationRec struct {
	id       int
	phase    string
	old, new int
}

func fp(ca int) string { return fmt.Sprintf("ca%d", ca) }

// setupTLS is task's setupTLS at process start: chooseCA, restoreCA,
// followRotation. It fails (the process retries at its next loop, as a
// restarted one does) while Consul does not answer, or while no CA is
// held and a cluster exists (firstCA waits for a member to store it).
func (w *World) setupTLS(n *node) error {
	if n.noConsul {
		return fmt.Errorf("choose the cluster CA: %w", errConsul)
	}
	if n.tlsDisk == nil {
		n.tlsDisk = &tlsDisk{}
	}
	saved, held := n.tlsDisk.saved, w.coord.ca
	ca := saved
	switch {
	case saved != 0 && held == 0:
		w.coord.ca = saved // stored again, create-only
	case saved != 0:
		// Saved and held differ: the saved one, the mismatch reported.
	case held != 0:
		ca = held
		n.tlsDisk.saved = held
	default:
		if why := w.clusterExists(n); why != "" {
			return fmt.Errorf("no cluster CA in the coordinator although a cluster exists (%s): waiting for a member holding it to store it again", why)
		}
		ca = int(w.id())
		w.coord.ca, n.tlsDisk.saved = ca, ca
		w.logf(n.name, "created the cluster CA %s: no cluster exists yet", fp(ca))
	}
	n.tls = &tlsProc{issuer: ca}
	w.restoreCA(n)
	w.followRotation(n)
	return nil
}

// clusterExists is firstCA's judgement, "" when no cluster exists: no
// record, no etcd data here, no other instance listening on its status
// port (peers listen once they have their CA).
func (w *World) clusterExists(n *node) string {
	if w.coord.record != nil {
		return "a cluster record"
	}
	if n.data != nil && n.data.wal {
		return "etcd data here"
	}
	for _, p := range w.nodes {
		if p != n && p.tls != nil && reachable(n, p) {
			return p.name + " listens"
		}
	}
	return ""
}

// restoreCA offers the CA this member issues from to the coordinator
// (create-only): stored again when Consul lost it.
func (w *World) restoreCA(n *node) {
	if n.tls != nil && !n.noConsul && w.coord.ca == 0 {
		w.coord.ca = n.tls.issuer
		w.logf(n.name, "stored the cluster CA %s again", fp(n.tls.issuer))
	}
}

// followRotation is task's followRotation: the record's phase carried out
// once, as planner.FollowRotation decides.
func (w *World) followRotation(n *node) {
	r := w.coord.rot
	if r == nil || n.tls == nil || n.noConsul {
		return
	}
	step := fmt.Sprintf("%d %s", r.id, r.phase)
	if n.tls.step == step {
		return
	}
	trustsOld := n.tls.issuer == r.old || slices.Contains(n.tlsDisk.trust, r.old)
	f := planner.FollowRotation(r.phase, fp(r.old), fp(r.new), fp(n.tls.issuer), trustsOld)
	if f.Ignored != "" || f.Refused != "" {
		return
	}
	if f.IssueNew {
		n.tlsDisk.saved, n.tls.issuer = r.new, r.new // saved first
	}
	n.tlsDisk.trust = nil
	for _, t := range f.Trust {
		if t == fp(r.old) {
			n.tlsDisk.trust = append(n.tlsDisk.trust, r.old)
		} else {
			n.tlsDisk.trust = append(n.tlsDisk.trust, r.new)
		}
	}
	n.tls.following, n.tls.step = true, step
}

// tlsStarted: n's etcd starts and loads the CAs ca.crt names (the CA it
// issues from when none is written).
func (w *World) tlsStarted(n *node) {
	if n.tls == nil {
		return
	}
	n.tls.loaded = []int{n.tls.issuer}
	if n.tlsDisk != nil && n.tlsDisk.trust != nil {
		n.tls.loaded = slices.Clone(n.tlsDisk.trust)
	}
}

// presented is the CAs n's certificate verifies under: its issuer, and
// the CAs up its chain of cross certificates once it follows a rotation.
func (w *World) presented(n *node) []int {
	out := []int{n.tls.issuer}
	for c := n.tls.issuer; n.tls.following && w.caParent[c] != 0; c = w.caParent[c] {
		out = append(out, w.caParent[c])
	}
	return out
}

// caRoot is the CA ca descends from by rotations.
func (w *World) caRoot(ca int) int {
	for w.caParent[ca] != 0 {
		ca = w.caParent[ca]
	}
	return ca
}

// checkTLS: members of one cluster that reach each other verify each
// other's certificates.
func (w *World) checkTLS() {
	for _, a := range w.nodes {
		if a.etcd == nil || a.tls == nil || !a.up {
			continue
		}
		for _, b := range w.nodes {
			if b == a || b.etcd == nil || b.tls == nil || b.etcd.group != a.etcd.group || !reachable(a, b) || w.caRoot(a.tls.issuer) != w.caRoot(b.tls.issuer) {
				continue
			}
			ok := false
			for _, c := range w.presented(b) {
				ok = ok || slices.Contains(a.tls.loaded, c)
			}
			if !ok {
				w.violate(InvTLS, "%s (etcd loaded %v) cannot verify %s's certificate (issued by %s, chain %v) in %s", a.name, a.tls.loaded, b.name, fp(b.tls.issuer), w.presented(b), a.etcd.group)
				return
			}
		}
	}
}

// rotateCA is the operator's 'etcd-nomad tls rotate-ca', one poll of it:
// start a rotation (or resume the one the coordinator holds), check the
// record against the cluster CA (verifyRecord), and move to the next
// phase once every listed member reports the current one carried out.
// It returns what it did and whether the command ends (done or refused).
func (w *World) rotateCA() (string, bool) {
	c := &w.coord
	if c.ca == 0 {
		return "no cluster CA in the coordinator: refused", true
	}
	if c.rot == nil || c.rot.phase == planner.RotationDone {
		r := &rotationRec{id: int(w.id()), phase: planner.RotationTrust, old: c.ca, new: int(w.id())}
		w.caParent[r.new] = c.ca
		c.rot = r
		return fmt.Sprintf("started a CA rotation: %s replaces %s", fp(r.new), fp(r.old)), false
	}
	r := c.rot
	if !(c.ca == r.old && r.phase != planner.RotationRetire) && !(c.ca == r.new && r.phase != planner.RotationTrust) {
		return fmt.Sprintf("the CA rotation record (phase %s) replaces %s by %s, but the cluster CA is %s: refused", r.phase, fp(r.old), fp(r.new), fp(c.ca)), true
	}
	var ms []planner.RotationMember
	for _, n := range w.listed() {
		m := planner.RotationMember{Name: n.name, Answered: w.operatorReaches(n)}
		if m.Answered && n.tls != nil {
			m.Reports, m.Issuer = true, fp(n.tls.issuer)
			trust := []int{n.tls.issuer}
			if n.tlsDisk.trust != nil {
				trust = n.tlsDisk.trust
			}
			for _, t := range trust {
				m.Trusted = append(m.Trusted, fp(t))
			}
		}
		ms = append(ms, m)
	}
	done, waiting := planner.RotationPhaseDone(r.phase, fp(r.new), ms)
	if w.cfg.Defects.RotationSkipsMembers {
		done = true
	}
	if !done {
		return "phase " + r.phase + ": waiting for " + strings.Join(waiting, ", "), false
	}
	if c.holder != nil {
		return "phase " + r.phase + " carried out; the lock is held", false
	}
	if r.phase == planner.RotationIssue {
		c.ca = r.new // the new CA stored as the cluster CA, the old key deleted
	}
	rc := *r
	rc.phase = planner.RotationNext(r.phase)
	c.rot = &rc
	if rc.phase == planner.RotationDone {
		w.op.rotated++
	}
	return "phase " + rc.phase, rc.phase == planner.RotationDone
}

// opRotateCA runs the command until it ends, polling every 2 s; the
// impatient operator interrupts it now and then (it resumes from the
// record when run again).
func (w *World) opRotateCA() string {
	if w.op.rotating {
		return "tls rotate-ca: already running"
	}
	w.op.rotating = true
	var poll func(w *World) string
	poll = func(w *World) string {
		if !w.quiet && w.op.rng.IntN(50) == 0 {
			w.op.rotating = false
			return "tls rotate-ca interrupted (run again to resume)"
		}
		did, end := w.rotateCA()
		if end {
			w.op.rotating = false
		} else {
			w.schedule(2*time.Second, "tls rotate-ca", poll)
		}
		return did
	}
	w.schedule(0, "tls rotate-ca", poll)
	return "tls rotate-ca: started"
}
