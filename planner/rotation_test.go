package planner

import (
	"reflect"
	"testing"
)

// The command moves on only once every member answers and reports the
// phase carried out; a silent member or one that reports no CA is waited
// for, and no member at all never is done.
func TestRotationPhaseDone(t *testing.T) {
	both := RotationMember{Name: "m0", Answered: true, Reports: true, Issuer: "old", Trusted: []string{"old", "new"}}
	issuing := RotationMember{Name: "m1", Answered: true, Reports: true, Issuer: "new", Trusted: []string{"old", "new"}}
	alone := RotationMember{Name: "m2", Answered: true, Reports: true, Issuer: "new", Trusted: []string{"new"}}
	silent := RotationMember{Name: "m3"}
	for _, c := range []struct {
		phase   string
		members []RotationMember
		waiting []string
	}{
		{RotationTrust, []RotationMember{both, issuing, alone}, nil},
		{RotationTrust, []RotationMember{both, silent}, []string{"m3"}},
		{RotationIssue, []RotationMember{both, issuing}, []string{"m0"}},
		{RotationIssue, []RotationMember{issuing, alone}, nil},
		{RotationRetire, []RotationMember{issuing, alone}, []string{"m1"}},
		{RotationRetire, []RotationMember{alone}, nil},
		{RotationRetire, []RotationMember{{Name: "m4", Answered: true}}, []string{"m4"}},
	} {
		done, waiting := RotationPhaseDone(c.phase, "new", c.members)
		if done != (len(c.waiting) == 0) || !reflect.DeepEqual(waiting, c.waiting) {
			t.Errorf("%s over %v: done %v, waiting %v; want waiting %v", c.phase, c.members, done, waiting, c.waiting)
		}
	}
	if done, _ := RotationPhaseDone(RotationTrust, "new", nil); done {
		t.Errorf("no member at all: done")
	}
}

// A member follows a rotation of its own CA (or of the one it moved
// from), trusting both CAs until retire, moving to the new one from
// issue on; it ignores a rotation of a CA it neither issues from nor
// moved from, and refuses one that would add a CA it does not trust.
func TestFollowRotation(t *testing.T) {
	for _, c := range []struct {
		phase, cur string
		trustsOld  bool
		want       RotationFollow
	}{
		{RotationTrust, "old", true, RotationFollow{Trust: []string{"old", "new"}}},
		{RotationIssue, "old", true, RotationFollow{Trust: []string{"old", "new"}, IssueNew: true, Cross: true}},
		{RotationIssue, "new", true, RotationFollow{Trust: []string{"old", "new"}, Cross: true}},
		{RotationRetire, "old", true, RotationFollow{Trust: []string{"new"}, IssueNew: true, Cross: true}},
		{RotationDone, "new", false, RotationFollow{Trust: []string{"new"}, Cross: true}},
	} {
		if got := FollowRotation(c.phase, "old", "new", c.cur, c.trustsOld); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s issuing from %s: %+v, want %+v", c.phase, c.cur, got, c.want)
		}
	}
	if f := FollowRotation(RotationIssue, "old", "new", "other", false); f.Ignored == "" {
		t.Errorf("a rotation of another CA followed: %+v", f)
	}
	if f := FollowRotation(RotationTrust, "planted", "new", "new", false); f.Refused == "" {
		t.Errorf("a rotation adding a CA this member does not trust followed: %+v", f)
	}
}
