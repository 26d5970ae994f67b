package snapshot

// Authentication. age encrypts to public recipients, and the recipients
// are in the Nomad job: whoever can write the store can encrypt a
// snapshot of their own making (an auth store that makes them root) to
// the cluster's recipient, and a restore would decrypt it as genuine.
// Encryption keeps the store's readers out, not its writers. A MAC keyed
// by a secret only members and operators hold keeps the writers out: it
// is taken over the metadata (macInput), and the metadata holds the
// plaintext's sha256 and size, which Decode checks the content against,
// so one MAC binds the content and everything a restore trusts from the
// metadata (name, cluster, cluster id, epoch, revision, kind, the base
// and first revision of a delta) together. A genuine object's metadata
// edited or swapped onto another genuine object fails it as a forged one
// does.

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
)

// ErrUnauthenticated reports an object whose metadata carries no MAC: it
// was written before snapshots were authenticated, or by a member without
// the key, or by someone who stripped the MAC. Only an operator's
// explicit choice (Encryption.AcceptUnauthenticated) restores it.
var ErrUnauthenticated = errors.New("snapshot is not authenticated (no MAC)")

// ErrForged reports an object whose MAC does not verify: written or
// edited by someone without the key. Nothing restores it.
var ErrForged = errors.New("snapshot MAC does not verify (forged or altered)")

// MACKeySize is the size of a key DeriveMACKey returns.
const MACKeySize = 32

// macInfo separates the snapshot MAC key from anything else derived from
// the same secret (the KEK seals the cluster CA with AES-GCM, unhashed).
const macInfo = "etcd-nomad snapshot mac v1\x00"

// DeriveMACKey derives the snapshot MAC key of cluster from secret (the
// cluster CA's key encryption key, certs.KEKEnv) with HKDF-SHA256: a
// distinct key, so that a MAC never exposes the KEK, and one per cluster
// name, so that a MAC of one cluster's snapshot never verifies for
// another sharing the secret. nil without a secret.
func DeriveMACKey(secret []byte, cluster string) ([]byte, error) {
	if len(secret) == 0 {
		return nil, nil
	}
	k, err := hkdf.Key(sha256.New, secret, nil, macInfo+cluster, MACKeySize)
	if err != nil {
		return nil, fmt.Errorf("derive the snapshot MAC key: %w", err)
	}
	return k, nil
}

// macInput is the metadata a MAC covers, every field but the MAC, each
// length-prefixed or fixed-width, so that no two metadata read alike.
func macInput(m Meta) []byte {
	b := []byte("etcd-nomad snapshot meta v1\n")
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	num := func(v uint64) { b = binary.BigEndian.AppendUint64(b, v) }
	str(m.Name)
	str(m.Cluster)
	str(m.ClusterID)
	num(m.Epoch)
	num(uint64(m.Revision))
	str(m.Endpoint)
	str(m.MemberID)
	str(m.EtcdVersion)
	// Seconds and nanoseconds apart: UnixNano wraps modulo 2^64 outside
	// 1678-2262, and a Created moved by 2^64 ns would read alike.
	num(uint64(m.Created.Unix()))
	num(uint64(m.Created.Nanosecond()))
	num(uint64(m.Size))
	str(m.SHA256)
	num(uint64(m.StoredSize))
	enc := uint64(0)
	if m.Encrypted {
		enc = 1
	}
	num(enc)
	str(m.Codec)
	str(m.Kind)
	num(uint64(m.FirstRevision))
	str(m.Base)
	num(uint64(m.Events))
	return b
}

func mac(key []byte, m Meta) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(macInput(m))
	return h.Sum(nil)
}

// sign sets m.MAC with the key (none without one).
func (e Encryption) sign(m Meta) Meta {
	m.MAC = ""
	if len(e.MACKey) > 0 {
		m.MAC = hex.EncodeToString(mac(e.MACKey, m))
	}
	return m
}

// Authenticated reports whether m's metadata, and through its sha256 the
// content Decode checks against it, were written by a holder of the MAC
// key. The error names the object: ErrForged for a MAC that does not
// verify (always refused), ErrUnauthenticated for none (refused unless
// AcceptUnauthenticated or AcceptNames names it). Without a key nothing
// can be checked: an object without a MAC passes (the cluster does not
// authenticate its snapshots; validate and the member's start say so),
// one with a MAC is refused, since a reader that cannot check it should
// say where the key is rather than trust it. An object whose metadata a
// listing could not read (Meta.Corrupt, NameMeta) is ErrCorruptMeta,
// always refused.
func (e Encryption) Authenticated(m Meta) error {
	if m.Corrupt != "" {
		return fmt.Errorf("%s: %w: %s; nothing restores it: an operator deletes it, or puts back its metadata", m.Name, ErrCorruptMeta, m.Corrupt)
	}
	if m.MAC == "" {
		if len(e.MACKey) == 0 || e.AcceptUnauthenticated || e.AcceptNames[m.Name] {
			return nil
		}
		return fmt.Errorf("%s: %w: written before snapshots were authenticated, or by a member without the cluster's key; restore it only by hand and by name (-accept-unauthenticated; a delta: -accept-unauthenticated-deltas), if you know where it came from", m.Name, ErrUnauthenticated)
	}
	if len(e.MACKey) == 0 {
		return fmt.Errorf("%s carries a MAC and no key was given to check it: set ETCD_NOMAD_CA_KEK to the cluster's key (nomad var get -item ca_kek nomad/jobs/JOB)", m.Name)
	}
	got, err := hex.DecodeString(m.MAC)
	if err != nil || !hmac.Equal(got, mac(e.MACKey, m)) {
		return fmt.Errorf("%s: %w", m.Name, ErrForged)
	}
	return nil
}

// Authentic splits a listing into the objects that authenticate
// (Authenticated) and the others, by name, with why each is refused. A
// caller that chooses from a listing (the newest snapshot, a delta
// chain) chooses from what is kept: a forged snapshot is never the
// newest, and a forged or unauthenticated segment ends its chain at
// observation as a damaged one does.
func (e Encryption) Authentic(list []Meta) (kept []Meta, refused map[string]error) {
	kept = make([]Meta, 0, len(list))
	for _, m := range list {
		if err := e.Authenticated(m); err != nil {
			if refused == nil {
				refused = map[string]error{}
			}
			refused[m.Name] = err
			continue
		}
		kept = append(kept, m)
	}
	return kept, refused
}

// Adopt writes the metadata of objects an operator verified with
// AcceptUnauthenticated (Decode's checks passed, without a MAC) again,
// signed with e's key, so that members, which never accept an
// unauthenticated object, restore them: the operator's explicit choice is
// recorded in the store as a MAC only a key holder can write. metas must
// be the metadata the content was verified against (the snapshot and the
// verified chain). Objects whose MAC verifies are left as they are;
// without a key there is nothing to sign.
//
// All or nothing, as far as the store lets it: an object whose MAC does
// not verify refuses the whole adoption before anything is written; the
// deltas are signed first, in chain order, and the snapshots last; on an
// error what was signed is put back unsigned. An adoption that stops part
// way without its undo (the store went away, the process was killed)
// leaves signed deltas whose snapshot is still refused: they are in no
// chain a member replays, and members weigh the refused snapshot at the
// end of every delta of it, signed ones included (snapshot.Reach), so
// they wait for an operator rather than recover from anything older. In
// the other order (the snapshot signed, deltas not) its unsigned deltas
// would be refused objects at their own revisions: members wait as well.
// Running the command again finishes the adoption.
func Adopt(ctx context.Context, store Store, e Encryption, metas []Meta) (adopted []string, err error) {
	if len(e.MACKey) == 0 {
		return nil, nil
	}
	check := e
	check.AcceptUnauthenticated = false
	var todo []Meta
	for _, m := range metas {
		if m.MAC == "" {
			todo = append(todo, m)
			continue
		}
		if err := check.Authenticated(m); err != nil {
			return nil, fmt.Errorf("not adopting anything: %w", err)
		}
	}
	sort.SliceStable(todo, func(i, j int) bool { return todo[i].Kind == KindDelta && todo[j].Kind != KindDelta })
	var done []Meta
	for _, m := range todo {
		if err := store.PutMeta(ctx, e.sign(m)); err != nil {
			err = fmt.Errorf("sign the metadata of %s: %w", m.Name, err)
			var undo []error
			for _, d := range done {
				if uerr := store.PutMeta(context.WithoutCancel(ctx), d); uerr != nil {
					undo = append(undo, fmt.Errorf("put %s back unsigned: %w", d.Name, uerr))
				}
			}
			if len(undo) > 0 {
				return nil, errors.Join(append([]error{err}, undo...)...)
			}
			return nil, err
		}
		done = append(done, m)
		adopted = append(adopted, m.Name)
	}
	return adopted, nil
}
