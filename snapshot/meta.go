package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxMetaSize bounds what a store reads of one metadata object. Metadata a
// member writes is under 2 KiB; one a store writer planted may be of any
// size, and every member lists the store (the leader's save check, every
// loop during a quorum loss): read whole, a planted object of a few GiB
// was an OOM of every member in turn.
const MaxMetaSize = 64 << 10

// ErrCorruptMeta marks a metadata object that cannot be a snapshot's: it
// does not decode, is larger than MaxMetaSize, or names another object
// or cluster. A listing lists its object by name (NameMeta), refused,
// and reports it; it neither fails the listing, which would hold every
// seed, recovery and save, nor hides the object, which would let a store
// writer without delete access make members recover from older data.
var ErrCorruptMeta = errors.New("corrupt snapshot metadata")

// DecodeMeta decodes one metadata object from r, reading at most
// MaxMetaSize+1 bytes of it. A read error is returned as it is;
// undecodable or oversize metadata is ErrCorruptMeta.
func DecodeMeta(r io.Reader) (Meta, error) {
	var m Meta
	b, err := io.ReadAll(io.LimitReader(r, MaxMetaSize+1))
	if err != nil {
		return m, err
	}
	if len(b) > MaxMetaSize {
		return m, fmt.Errorf("%w: larger than %d bytes", ErrCorruptMeta, MaxMetaSize)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("%w: %w", ErrCorruptMeta, err)
	}
	return m, nil
}
