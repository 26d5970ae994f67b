package nomadglue

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Client is a Nomad API client from the standard environment: NOMAD_ADDR,
// NOMAD_TOKEN, NOMAD_NAMESPACE, NOMAD_CACERT and the others the nomad CLI
// reads.
func Client() (*nomadapi.Client, error) {
	cli, err := nomadapi.NewClient(nomadapi.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("nomad client: %w", err)
	}
	return cli, nil
}

// Port labels of the rendered job's group network.
const (
	PortClient = "client"
	PortPeer   = "peer"
	PortStatus = "status"
)

// MemberName is the name a fresh member of allocation allocID takes. Once
// the member has data, the name persisted there is its identity.
func MemberName(group, allocID string) string {
	if len(allocID) > 8 {
		allocID = allocID[:8]
	}
	return group + "-" + allocID
}

// Self is this member's allocation as the variables Nomad sets in the task
// describe it.
type Self struct {
	// Name is the name a fresh member of this allocation takes
	// (MemberName).
	Name string
	// Alloc is the allocation's id (NOMAD_ALLOC_ID).
	Alloc string
	// Address is the peer port's address (NOMAD_IP_peer).
	Address                          string
	ClientPort, PeerPort, StatusPort int
}

// SelfFromEnv reads this member's allocation from the variables Nomad sets
// in the task: NOMAD_ALLOC_ID, NOMAD_GROUP_NAME, NOMAD_IP_<label>,
// NOMAD_PORT_<label>.
func SelfFromEnv() (Self, error) {
	alloc := os.Getenv("NOMAD_ALLOC_ID")
	group := os.Getenv("NOMAD_GROUP_NAME")
	if alloc == "" || group == "" {
		return Self{}, errors.New("NOMAD_ALLOC_ID and NOMAD_GROUP_NAME are not set: the nomad provider runs inside a Nomad allocation")
	}
	in := Self{Name: MemberName(group, alloc), Alloc: alloc, Address: os.Getenv("NOMAD_IP_" + PortPeer)}
	var err error
	for label, dst := range map[string]*int{PortClient: &in.ClientPort, PortPeer: &in.PeerPort, PortStatus: &in.StatusPort} {
		v := os.Getenv("NOMAD_PORT_" + label)
		n, perr := strconv.Atoi(v)
		if perr != nil {
			err = errors.Join(err, fmt.Errorf("NOMAD_PORT_%s=%q: the group needs a network port labelled %q", label, v, label))
		}
		*dst = n
	}
	if in.Address == "" {
		err = errors.Join(err, errors.New("NOMAD_IP_peer is not set"))
	}
	return in, err
}
