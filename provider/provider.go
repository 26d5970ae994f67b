// Package provider declares where members come from. A provider lists the
// member slots that should exist (Nomad allocations, ASG instances, or a
// static list) and the desired size; it never touches etcd. Backends live in
// sub-packages: provider/static, and later provider/nomad and provider/asg.
package provider

import (
	"context"
	"net"
	"strconv"
)

// Instance is one member slot.
type Instance struct {
	Name       string
	Address    string
	ClientPort int
	PeerPort   int
	StatusPort int
	// Unknown: the provider cannot tell whether this instance still runs
	// (Nomad: its client is disconnected, the allocation is unknown or
	// lost, or it is being stopped and its client has not yet reported it
	// terminal). It may still hold data or a quorum: it counts as present
	// and possibly alive, never as a slot to join or a proof of absence.
	// Its address and ports are those last allocated, and may be zero.
	Unknown bool
}

// URL is the URL of an endpoint on host and port: scheme://host:port, an
// IPv6 host in brackets. Every member endpoint's URL is built here.
func URL(scheme, host string, port int) string {
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// ClientURL is the instance's etcd client URL.
func (in Instance) ClientURL(scheme string) string { return URL(scheme, in.Address, in.ClientPort) }

// PeerURL is the instance's etcd peer URL.
func (in Instance) PeerURL(scheme string) string { return URL(scheme, in.Address, in.PeerPort) }

// StatusURL is the base URL of the instance's status port.
func (in Instance) StatusURL(scheme string) string { return URL(scheme, in.Address, in.StatusPort) }

// Provider lists member slots.
type Provider interface {
	// Instances returns the slots that should be members now, and those
	// that might still run (Unknown). An instance missing from the list is
	// proven gone.
	Instances(ctx context.Context) ([]Instance, error)
	// DesiredSize is the number of voters the cluster should have.
	DesiredSize(ctx context.Context) (int, error)
}
