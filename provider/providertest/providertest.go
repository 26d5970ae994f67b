// Package providertest is the conformance suite every provider backend
// (provider/nomad, provider/asg, provider/static) runs: provider.Provider
// and the optional capabilities (provider.Leaver, Inheritor, Departer,
// Replacer, Invalidator) as the member's loop relies on them, checked the
// same way against each backend on its real API (a Nomad agent, the AWS
// calls served by asgtest). Each capability's cases run for the providers
// that have it; a backend says which it means to have, and the suite
// fails when the provider has another set. Backend tests keep only what
// is theirs (ports, paging, ACL refusals, a stopped job).
package providertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/provider"
)

// Capability names an optional capability.
type Capability string

// The capabilities of package provider.
const (
	Leaver      Capability = "Leaver"
	Inheritor   Capability = "Inheritor"
	Departer    Capability = "Departer"
	Replacer    Capability = "Replacer"
	Invalidator Capability = "Invalidator"
)

// Backend is one member's provider on a fresh group of at least two
// running instances, and the levers the suite pulls on the backend.
type Backend struct {
	// Provider is member Self's provider.
	Provider provider.Provider
	// Peer is another member's provider of the same group, with its own
	// client and cache (Replacer).
	Peer provider.Provider
	// Self is Provider's own instance name; Other another running
	// instance's.
	Self, Other string
	// TakeAway makes the backend take Self's slot away (Nomad: stop its
	// allocation; an auto-scaling group: Terminating:Wait). Leaver.
	TakeAway func(t *testing.T)
	// Inherits: the replacement the backend starts after TakeAway
	// receives Self's data (Inheritor).
	Inherits bool
	// Departed reports whether the backend was told that Self may go
	// (Departer).
	Departed func(t *testing.T) bool
}

// Open returns a fresh backend, stopped by the test's cleanup.
type Open func(t *testing.T) Backend

// Run runs the suite for a provider meant to have exactly the
// capabilities has, each case on a fresh backend from open.
func Run(t *testing.T, has []Capability, open Open) {
	want := map[Capability]bool{}
	for _, c := range has {
		want[c] = true
	}
	for _, c := range []struct {
		name string
		need Capability // "": every provider
		test func(*testing.T, Backend)
	}{
		{"HasTheDeclaredCapabilities", "", func(t *testing.T, b Backend) { hasDeclared(t, b, want) }},
		{"ListsSlotsAndSize", "", listsSlotsAndSize},
		{"LeavingOnceTakenAway", Leaver, leavingOnceTakenAway},
		{"InheritedOnlyByAReplacement", Inheritor, inheritedOnlyByAReplacement},
		{"DepartTellsTheBackend", Departer, departTellsTheBackend},
		{"ReplacementSeenAfresh", Replacer, replacementSeenAfresh},
	} {
		if c.need != "" && !want[c.need] {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			c.test(t, open(t))
		})
	}
}

func timeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// fresh drops p's cached readings, as the member does before it acts on
// one, so that a case checks the backend's answer, not a cache's age.
func fresh(p provider.Provider) {
	if inv, ok := p.(provider.Invalidator); ok {
		inv.Invalidate()
	}
}

// waitFor polls cond until it holds or a minute passes.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s: %s", what, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The provider has the capabilities the backend declares, no fewer (the
// loop would silently do without one) and no more (a case would not run).
func hasDeclared(t *testing.T, b Backend, want map[Capability]bool) {
	p := b.Provider
	for c, has := range map[Capability]bool{
		Leaver:      is[provider.Leaver](p),
		Inheritor:   is[provider.Inheritor](p),
		Departer:    is[provider.Departer](p),
		Replacer:    is[provider.Replacer](p),
		Invalidator: is[provider.Invalidator](p),
	} {
		if has != want[c] {
			t.Errorf("%T: %s is %v, the backend declares %v", p, c, has, want[c])
		}
	}
}

func is[I any](p provider.Provider) bool { _, ok := p.(I); return ok }

// Every listed instance has a name, once; a known one (not Unknown) an
// address and its three ports; Self and Other are listed; the desired size
// is at least one.
func listsSlotsAndSize(t *testing.T, b Backend) {
	ctx := timeout(t)
	insts, err := b.Provider.Instances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, in := range insts {
		if in.Name == "" || seen[in.Name] {
			t.Errorf("instance %+v: empty or repeated name", in)
		}
		seen[in.Name] = true
		if !in.Unknown && (in.Address == "" || in.ClientPort == 0 || in.PeerPort == 0 || in.StatusPort == 0) {
			t.Errorf("instance %+v: known, without an address and three ports", in)
		}
	}
	for _, name := range []string{b.Self, b.Other} {
		if !seen[name] {
			t.Errorf("%s is not listed: %+v", name, insts)
		}
	}
	if n, err := b.Provider.DesiredSize(ctx); err != nil || n < 1 {
		t.Errorf("DesiredSize = %d, %v", n, err)
	}
}

// A running slot is not leaving; once the backend takes it away, it is.
func leavingOnceTakenAway(t *testing.T, b Backend) {
	ctx := timeout(t)
	lv := b.Provider.(provider.Leaver)
	if leaving, err := lv.Leaving(ctx); err != nil || leaving {
		t.Fatalf("Leaving = %v, %v while the slot runs", leaving, err)
	}
	takeAway(t, ctx, b)
}

// takeAway takes Self's slot away and waits until its provider says it
// is leaving.
func takeAway(t *testing.T, ctx context.Context, b Backend) {
	t.Helper()
	lv := b.Provider.(provider.Leaver)
	b.TakeAway(t)
	waitFor(t, "Leaving once the slot is taken away", func() (bool, string) {
		fresh(b.Provider)
		leaving, err := lv.Leaving(ctx)
		return err == nil && leaving, fmt.Sprint(leaving, err)
	})
}

// Nothing is inherited while the slot runs; once it is taken away, its
// replacement inherits the data exactly when the backend says it does.
func inheritedOnlyByAReplacement(t *testing.T, b Backend) {
	ctx := timeout(t)
	ih := b.Provider.(provider.Inheritor)
	if inh, err := ih.Inherited(ctx); err != nil || inh {
		t.Fatalf("Inherited = %v, %v while the slot runs", inh, err)
	}
	b.TakeAway(t)
	if !b.Inherits {
		if inh, err := ih.Inherited(ctx); err != nil || inh {
			t.Errorf("Inherited = %v, %v: the backend's replacement starts empty", inh, err)
		}
		return
	}
	waitFor(t, "the replacement inheriting the data", func() (bool, string) {
		inh, err := ih.Inherited(ctx)
		return err == nil && inh, fmt.Sprint(inh, err)
	})
}

// Depart, once the slot is leaving, reaches the backend.
func departTellsTheBackend(t *testing.T, b Backend) {
	ctx := timeout(t)
	dp := b.Provider.(provider.Departer)
	takeAway(t, ctx, b)
	if b.Departed(t) {
		t.Fatal("the backend was told Self may go before Depart")
	}
	if err := dp.Depart(ctx); err != nil {
		t.Fatal(err)
	}
	if !b.Departed(t) {
		t.Error("Depart returned, and the backend was not told Self may go")
	}
}

// A replacement another member asked for is seen by this member's next
// fresh reading, even one made right after a reading that found none: the
// member relies on it to ask for one replacement at a time.
func replacementSeenAfresh(t *testing.T, b Backend) {
	ctx := timeout(t)
	r := b.Provider.(provider.Replacer)
	if inFlight, err := r.ReplacementInFlight(ctx); err != nil || inFlight {
		t.Fatalf("ReplacementInFlight = %v, %v on a group whose instances all serve", inFlight, err)
	}
	if err := b.Peer.(provider.Replacer).MarkUnhealthy(ctx, b.Other); err != nil {
		t.Fatal(err)
	}
	fresh(b.Provider)
	if inFlight, err := r.ReplacementInFlight(ctx); err != nil || !inFlight {
		t.Errorf("ReplacementInFlight = %v, %v after another member marked %s unhealthy: a second replacement would follow", inFlight, err, b.Other)
	}
}
