package datadir

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// HoldersFile keeps the data holders a member remembers (task's
// knownState.holders): the peers a provider listed while their /status
// named data, or that a peer's /status named so, for the recovery grace
// after that listing. It lives in the member's directory beside current/
// (not in it: setting data aside keeps it), so that a restart of the
// process, or of every member that remembered a holder at once, does not
// forget a holder that may run behind a partition (review rev18f F3).
// It is lost with the directory.
const HoldersFile = "holders.json"

// HoldersVersion is the format HoldersFile is written in; a file of
// another version is refused as unreadable.
const HoldersVersion = 1

// Holders is HoldersFile's content.
type Holders struct {
	Version int `json:"version"`
	// Cluster is the cluster's name: a replacement on the same host
	// reads a predecessor's file only for its own cluster.
	Cluster string `json:"cluster,omitempty"`
	// Written is when it was written (the member's wall clock).
	Written time.Time `json:"written"`
	Holders []Holder  `json:"holders"`
}

// Holder is one remembered data holder.
type Holder struct {
	Name      string `json:"name"`
	ClientURL string `json:"client_url,omitempty"`
	ClusterID uint64 `json:"cluster_id,omitempty"`
	Epoch     uint64 `json:"epoch,omitempty"`
	// ListedAt is when a provider last listed it (the member's wall
	// clock; for one a peer named, the peer's age subtracted from it).
	ListedAt time.Time `json:"listed_at"`
	// Listed: the provider still listed it when the file was written,
	// so it may have listed it until the next rewrite.
	Listed bool `json:"listed,omitempty"`
	// WordAt, when not zero, is the listing time a peer's word first
	// claimed for it: words keep it no longer than the recovery grace
	// after that.
	WordAt time.Time `json:"word_at"`
	// Note, when set, says why the holder is not a listed peer (an
	// unreadable file's stand-in).
	Note string `json:"note,omitempty"`
	// Words are the addresses peers' words gave for it (ClientURL is
	// only the member's own listing's), the most recently named last.
	Words []HolderWord `json:"words,omitempty"`
}

// HolderWord is an address a peer's word gave for a holder, and the
// cluster id it named there.
type HolderWord struct {
	ClientURL string `json:"client_url"`
	ClusterID uint64 `json:"cluster_id"`
}

// HoldersPath is HoldersFile's path.
func (d Dir) HoldersPath() string { return filepath.Join(d.Root, HoldersFile) }

// ReadHolders reads HoldersFile. A missing file is an error that
// errors.Is os.ErrNotExist; any other error (unreadable, not JSON,
// another version, a holder without a name or time) means the file
// cannot say which holders it named.
func (d Dir) ReadHolders() (Holders, error) {
	var h Holders
	b, err := os.ReadFile(d.HoldersPath())
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return Holders{}, fmt.Errorf("decode %s: %w", HoldersFile, err)
	}
	if h.Version != HoldersVersion {
		return Holders{}, fmt.Errorf("decode %s: version %d, want %d", HoldersFile, h.Version, HoldersVersion)
	}
	for _, e := range h.Holders {
		if e.Name == "" || e.ListedAt.IsZero() {
			return Holders{}, fmt.Errorf("decode %s: a holder without a name or listing time: %+v", HoldersFile, e)
		}
	}
	return h, nil
}

// WriteHolders replaces HoldersFile atomically and durably: a temporary
// file synced, renamed over it, the directory synced.
func (d Dir) WriteHolders(h Holders) error {
	if err := os.MkdirAll(d.Root, 0o700); err != nil {
		return err
	}
	h.Version = HoldersVersion
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	p := d.HoldersPath()
	if err := writeSynced(p+".tmp", b); err != nil {
		return err
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		return err
	}
	return syncDir(d.Root)
}
