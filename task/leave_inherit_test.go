package task

import (
	"context"
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// answers is an Inheritor that gives its answers in turn.
type answers struct {
	said []error // nil: yes; errNo: no; other: the read failed
	n    int
}

var errNo = errors.New("no")

func (a *answers) Inherited(context.Context) (bool, error) {
	e := a.said[min(a.n, len(a.said)-1)]
	a.n++
	switch e {
	case nil:
		return true, nil
	case errNo:
		return false, nil
	}
	return false, e
}

// e2e TestScaleWithNomadJobRun (session 18's CI): a member told to stop
// read once, at the start of its leave, whether its replacement inherits
// its data; the read said no, the member went on to remove itself, and the
// replacement, which did take the data over, found its member removed:
// the membership fell to 2 voters. The answer is asked again before every
// attempt while it is no (or the read fails); a yes stays yes.
func TestInheritanceIsAskedAgainWhileItIsNo(t *testing.T) {
	ctx := context.Background()
	a := &answers{said: []error{errNo, errors.New("nomad: 500"), nil, errNo}}
	h := inheritance{ask: a, log: hclog.NewNullLogger()}
	for attempt, want := range []bool{false, false, true, true, true} {
		if got := h.now(ctx, attempt+1); got != want {
			t.Fatalf("attempt %d: inherited %v, want %v", attempt+1, got, want)
		}
	}
	if a.n != 3 {
		t.Fatalf("asked %d times, want 3 (again after each no, never after the yes)", a.n)
	}
	none := inheritance{log: hclog.NewNullLogger()}
	if none.now(ctx, 1) {
		t.Fatal("a provider that never hands data over: inherited")
	}
}
