// Package provider declares where members come from. A provider lists the
// member slots that should exist (Nomad allocations, ASG instances, or a
// static list) and the desired size; it never touches etcd. Backends live in
// sub-packages: provider/static, and later provider/nomad and provider/asg.
package provider

import "context"

// Instance is one member slot.
type Instance struct {
	Name       string
	Address    string
	ClientPort int
	PeerPort   int
	StatusPort int
}

// Provider lists member slots.
type Provider interface {
	// Instances returns the slots that should be members now.
	Instances(ctx context.Context) ([]Instance, error)
	// DesiredSize is the number of voters the cluster should have.
	DesiredSize(ctx context.Context) (int, error)
}
