package status

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Member is what a member's /status reports: for peers, the CLI and humans.
type Member struct {
	Name      string `json:"name"`
	Cluster   string `json:"cluster"`
	PeerURL   string `json:"peer_url"`
	ClientURL string `json:"client_url"`
	MemberID  uint64 `json:"member_id"`
	ClusterID uint64 `json:"cluster_id"`
	Token     string `json:"token,omitempty"`
	Epoch     uint64 `json:"epoch"`
	Running   bool   `json:"running"`
	Learner   bool   `json:"learner"`
	Leader    bool   `json:"leader"`
	Healthy   bool   `json:"healthy"`
	Revision  int64  `json:"revision"`
	// ForceNewPending: stopped data of this member's recovery from data
	// whose ForceNewCluster start never became ready (planner.Local).
	ForceNewPending bool `json:"force_new_pending,omitempty"`
	// Unstarted: stopped data that no etcd start ever ran on as the
	// incarnation it names (planner.Local.Unstarted).
	Unstarted bool `json:"unstarted,omitempty"`
	// MetaEpoch, with no Token, is the epoch this member's metadata
	// names without data, when that metadata is of this cluster
	// (planner.PeerStatus.MetaEpoch): a new epoch is chosen above it.
	MetaEpoch uint64 `json:"meta_epoch,omitempty"`
	DBSize    int64  `json:"db_size"`
	PID       int    `json:"pid"`
	Decision  string `json:"decision"`
	// Unreachable is set by the CLI for an instance whose /status did not
	// answer.
	Unreachable bool `json:"unreachable,omitempty"`
	// NoSpace is true while etcd's NOSPACE alarm is raised: the cluster
	// refuses writes until maintenance disarms it.
	NoSpace bool `json:"nospace,omitempty"`
	// Corrupt names the members (hex ids, 0: no majority) etcd's CORRUPT
	// alarms name: the cluster refuses writes until they are handled.
	Corrupt []string `json:"corrupt,omitempty"`
	// Paused names the operator's pause when the cluster is paused.
	Paused string `json:"paused,omitempty"`
	// DamagedDeltas names the delta segments this member's recovery found
	// failing their checksum: its peers leave them out of the chain they
	// observe too.
	DamagedDeltas []string `json:"damaged_deltas,omitempty"`
	// FoundVoters are the voters this member's probes before a recovery
	// or a seed found answering (its last known membership's, the
	// summary's, the store's writers', its peers'), within the recovery
	// grace of their last answer: its peers probe them too and recover
	// or seed nothing beside them while they are named.
	FoundVoters []FoundVoter `json:"found_voters,omitempty"`
	// Holders are the peers this member remembers holding data of a
	// cluster (their /status named it while its provider listed them,
	// or a peer's /status named them here), within the recovery grace of
	// that listing: its peers probe them too and, without a record, seed
	// nothing beside them while they are named.
	Holders []Holder `json:"holders,omitempty"`
	// HoldersError, when set, is why the member's last write of the
	// holders it remembers failed (the file and the error): a restart
	// would forget them, so it seeds nothing without a record meanwhile.
	HoldersError string `json:"holders_error,omitempty"`
	// MetaError, when set, is why the member could not read its own
	// metadata for this answer: its Token and ClusterID say nothing,
	// and peers take it as silent, not as empty.
	MetaError string `json:"meta_error,omitempty"`
	// Asides are the copies of data this member set aside (its data
	// dir's aside/: renamed, never deleted on the spot), newest first, at
	// most MaxAsides; AsidesMore counts those left out. A recovery that
	// loses revisions may find them in one (etcd-nomad status, recover).
	Asides     []AsideCopy `json:"asides,omitempty"`
	AsidesMore int         `json:"asides_more,omitempty"`

	Reason string `json:"reason"`
	Time   string `json:"time"`
	// CAMismatch, when set, names the CA this member runs with and the
	// different one the coordinator holds (TLS auto): members that start
	// without a saved CA take the coordinator's and cannot join.
	CAMismatch *CAMismatch `json:"ca_mismatch,omitempty"`
	// CertExpiry is when the first of this member's certificates and
	// trusted CAs expires (RFC 3339), CertName which one it is.
	CertExpiry string `json:"cert_expiry,omitempty"`
	CertName   string `json:"cert_name,omitempty"`
	// CertWarning names the certificates that expire within the warning
	// window (certs.WarnBefore): the Consul check turns warning.
	CertWarning string `json:"cert_warning,omitempty"`
	// SnapshotError says why this member's last snapshot failed or was
	// not taken (the store unavailable, the record not confirmed from
	// its data), with its time; empty once one is saved or none is due.
	SnapshotError string `json:"snapshot_error,omitempty"`
	// CA names the CA this member issues from and those it trusts (TLS
	// auto), and the CA rotation phase it carried out.
	CA *RotationView `json:"ca,omitempty"`
	// CAKeyExposed, when set, says that a CA this member trusts had its
	// key in the coordinator in the clear (an earlier version's, until a
	// member migrated it to the sealed form): Consul snapshots taken
	// before hold it. Set until `etcd-nomad tls rotate-ca` retires that CA.
	CAKeyExposed string `json:"ca_key_exposed,omitempty"`
}

// FoundVoter is a voter a member found answering its probes (Member.FoundVoters).
type FoundVoter struct {
	Name       string   `json:"name"`
	ClientURLs []string `json:"client_urls"`
	// ClusterIDs are the cluster ids it was asked for (one answered).
	ClusterIDs []uint64 `json:"cluster_ids"`
	// Leader is true when it answered with a leader.
	Leader bool `json:"leader"`
	// AgoMillis is how long ago it last answered, in milliseconds (a
	// duration: members' clocks differ).
	AgoMillis int64 `json:"ago_ms"`
}

// Holder is a data holder a member remembers (Member.Holders).
type Holder struct {
	Name      string `json:"name"`
	ClientURL string `json:"client_url"`
	ClusterID uint64 `json:"cluster_id"`
	Epoch     uint64 `json:"epoch"`
	// AgoMillis is how long ago a provider last listed it, in
	// milliseconds (a duration: members' clocks differ).
	AgoMillis int64 `json:"ago_ms"`
}

// MaxAsides bounds the set-aside copies a member names in /status.
const MaxAsides = 16

// AsideCopy is one copy of data a member set aside (Member.Asides).
type AsideCopy struct {
	// Name is its directory under aside/: when it was set aside and why.
	Name string `json:"name"`
	// Path is where it is on the member's host.
	Path string `json:"path"`
	// The incarnation its metadata names (empty and 0 when unreadable).
	Cluster   string `json:"cluster,omitempty"`
	Token     string `json:"token,omitempty"`
	Epoch     uint64 `json:"epoch"`
	ClusterID uint64 `json:"cluster_id"`
	// Revision is the newest revision in its data, 0 if unknown.
	Revision int64 `json:"revision"`
	// At is when it was set aside (RFC 3339, from its name), "" if the
	// name does not say.
	At string `json:"at,omitempty"`
}

// String names the copy for an operator: where it is and what it holds.
func (a AsideCopy) String() string {
	what := "metadata unreadable"
	if a.Cluster != "" {
		what = fmt.Sprintf("epoch %d, cluster %x, revision %d", a.Epoch, a.ClusterID, a.Revision)
	}
	if a.At != "" {
		what += ", set aside " + a.At
	}
	return fmt.Sprintf("%s (%s)", a.Path, what)
}

// AsidesBeyond names the set-aside copies of cluster members report whose
// data reaches past revision rev ("MEMBER:PATH (epoch E, cluster C,
// revision R, set aside T)"): where the revisions a recovery to rev loses
// may still be. Revisions of different incarnations are not comparable:
// each copy names its epoch and cluster id for the operator to judge.
func AsidesBeyond(members []Member, cluster string, rev int64) []string {
	var out []string
	for _, m := range members {
		for _, a := range m.Asides {
			if a.Cluster == cluster && a.Revision > rev {
				out = append(out, m.Name+":"+a.String())
			}
		}
	}
	return out
}

// RotationView is what /status reports of the CAs (TLS auto).
type RotationView struct {
	// Issuer is the fingerprint of the CA this member issues from.
	Issuer string `json:"issuer"`
	// Trusted are the fingerprints of the CAs this member trusts now
	// (its ca.crt).
	Trusted []string `json:"trusted"`
	// Phase is the last rotation phase this member carried out.
	Phase string `json:"phase,omitempty"`
	// Refused says why this member refuses the rotation record the
	// coordinator holds (not made with the current CA's key, or its new
	// CA not sealed with the KEK): /health warns while it is set.
	Refused string `json:"refused,omitempty"`
}

// CAMismatch is reported (log, /status, /health) by a member that runs with
// the CA it saved while the coordinator holds another one. Members that
// start without a saved CA take the coordinator's and cannot join it.
type CAMismatch struct {
	// Member is the fingerprint of the CA this member runs with (its saved
	// tls/ca.bundle, trusted by its peers).
	Member string `json:"member"`
	// Coordinator is the fingerprint of the CA the coordinator holds.
	Coordinator string `json:"coordinator"`
}

func (c *CAMismatch) String() string {
	return fmt.Sprintf("member_ca=%s coordinator_ca=%s", c.Member, c.Coordinator)
}

// Fetch reads a member's /status at base (scheme://host:port).
func Fetch(ctx context.Context, hc *http.Client, base string) (Member, error) {
	var st Member
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s/status: %s", base, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("decode %s/status: %w", base, err)
	}
	return st, nil
}
