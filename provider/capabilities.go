package provider

import "context"

// A provider may have, beside Provider, any of the optional capabilities
// below: the member's loop (package task) asks for each with a type
// assertion and does without the ones a provider lacks. Each backend runs
// provider/providertest for the capabilities it has.
//
//	                  Leaver  Inheritor  Departer  Replacer  Invalidator
//	nomad.Provider    yes     yes
//	asg.Provider      yes                yes       yes       yes
//	asg.OnNomad       yes                yes       yes       yes
//	static.Provider

// Leaver knows when this member's slot is going away for good (a
// scale-down, an instance being terminated): the member then removes
// itself from the membership before it stops, when that is safe.
type Leaver interface {
	// Leaving reports whether this member's slot is going away. A slot
	// stopped with the whole cluster (Nomad's job stop) is not leaving:
	// the next start finds its membership whole.
	Leaving(ctx context.Context) (bool, error)
}

// Inheritor knows whether this member's replacement inherits its data
// (Nomad's sticky, migrating ephemeral disk): a member whose data goes on
// does not remove itself when it leaves.
type Inheritor interface {
	// Inherited reports whether a replacement of this member's slot
	// exists that will receive its data. Any doubt reads as false.
	Inherited(ctx context.Context) (bool, error)
}

// Departer's instances learn, while they run, that they are being taken
// away (an auto-scaling group's lifecycle hook, Terminating:Wait) and wait
// for the member: it leaves the cluster, then calls Depart.
type Departer interface {
	Leaver
	// Depart tells the backend that this member has left and its
	// instance may go.
	Depart(ctx context.Context) error
}

// Replacer can replace an instance whose member cannot recover (an
// auto-scaling group launches a new one), one at a time.
type Replacer interface {
	// ReplacementInFlight reports whether the backend is already
	// replacing an instance; the member asks for no second one meanwhile.
	ReplacementInFlight(ctx context.Context) (bool, error)
	// MarkUnhealthy asks the backend to replace the instance of member
	// name.
	MarkUnhealthy(ctx context.Context, name string) error
}

// Invalidator caches its readings of the backend: Invalidate drops them,
// so that the next call reads afresh. A Replacer whose readings are
// cached must be one: the member reads ReplacementInFlight afresh before
// it asks for a replacement, so that one another member started meanwhile
// holds it back.
type Invalidator interface {
	Invalidate()
}
