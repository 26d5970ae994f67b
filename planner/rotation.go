package planner

import "slices"

// A CA rotation ('etcd-nomad tls rotate-ca') moves a record in the
// coordinator through these phases; every member follows it on its own
// (FollowRotation) and the command moves to the next phase once every
// member reports the current one carried out (RotationPhaseDone). The I/O
// (certificates, the record, /status) is task's; the decisions are here,
// in CA fingerprints, so that the simulation runs the same ones.
const (
	RotationTrust  = "trust"  // members trust the new CA beside the old one
	RotationIssue  = "issue"  // members issue from the new CA, presented with the cross certificate
	RotationRetire = "retire" // the new CA is the cluster CA; members trust it alone
	RotationDone   = "done"
)

// RotationNext is the phase the command moves to once every member
// carried out phase ("" after done).
func RotationNext(phase string) string {
	switch phase {
	case RotationTrust:
		return RotationIssue
	case RotationIssue:
		return RotationRetire
	case RotationRetire:
		return RotationDone
	}
	return ""
}

// RotationMember is what 'tls rotate-ca' reads of one member's /status:
// whether it answered and, when it reports a CA, the fingerprints of the
// CA it issues from and of those it trusts.
type RotationMember struct {
	Name     string
	Answered bool
	Reports  bool
	Issuer   string
	Trusted  []string
}

// RotationPhaseDone reports whether every member carried out phase of the
// rotation to the CA newFP: trust, it trusts newFP; issue, it issues from
// newFP; retire, it trusts newFP alone. waiting names the others (a
// member that does not answer, or reports no CA, among them). No member
// at all is never done.
func RotationPhaseDone(phase, newFP string, members []RotationMember) (done bool, waiting []string) {
	for _, m := range members {
		ok := m.Answered && m.Reports
		switch phase {
		case RotationTrust:
			ok = ok && slices.Contains(m.Trusted, newFP)
		case RotationIssue:
			ok = ok && m.Issuer == newFP
		case RotationRetire:
			ok = ok && len(m.Trusted) == 1 && m.Trusted[0] == newFP
		}
		if !ok {
			waiting = append(waiting, m.Name)
		}
	}
	return len(members) > 0 && len(waiting) == 0, waiting
}

// RotationFollow is what a member does with the rotation record it reads
// (FollowRotation).
type RotationFollow struct {
	// Ignored, when not empty, says why the record changes nothing here:
	// it replaces a CA this member neither issues from nor moved from.
	Ignored string
	// Refused, when not empty, says why the record is refused (reported
	// in /status and /health): it would add a CA this member does not
	// trust already.
	Refused string
	// Trust are the fingerprints of the CAs to trust (ca.crt).
	Trust []string
	// IssueNew: move to the new CA (save it first, then issue from it).
	IssueNew bool
	// Cross: the certificates of the new CA are presented with the cross
	// certificate (and the chains before it) from now on.
	Cross bool
}

// FollowRotation decides how a member follows a rotation record at phase
// replacing the CA oldFP by newFP, curFP being the CA it issues from and
// trustsOld whether it trusts oldFP already (its ca.crt or the rotation
// it follows). The record has proved itself first (its writer held the
// old CA's key: task's Rotation.Verify).
func FollowRotation(phase, oldFP, newFP, curFP string, trustsOld bool) RotationFollow {
	if curFP != oldFP && curFP != newFP {
		return RotationFollow{Ignored: "the CA rotation record replaces " + oldFP + " by " + newFP + ", but this member's CA is " + curFP + ": not following it"}
	}
	trust := []string{oldFP, newFP}
	switch {
	case phase == RotationRetire || phase == RotationDone:
		trust = []string{newFP}
	case curFP != oldFP && !trustsOld:
		// This member issues from the new CA already: the record would
		// only add its old CA to what it trusts. The cross certificate
		// proves nothing about a CA its writer chose: it must be one
		// this member trusts already (it did when it moved to the new
		// one).
		return RotationFollow{Refused: "its old CA " + oldFP + " is neither this member's CA nor one it trusts"}
	}
	issuing := phase != RotationTrust
	return RotationFollow{Trust: trust, IssueNew: issuing && curFP == oldFP, Cross: issuing}
}
