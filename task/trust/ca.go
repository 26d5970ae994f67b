package trust

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/certs/clusterca"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// The cluster CA (TLS auto) is kept in the coordinator by certs/clusterca;
// this file decides which CA a member runs with. The copy saved in the
// member's data dir (tls/ca.bundle) is what the member's peers trust, so it
// always wins for that member: a different CA in the coordinator is
// reported, never adopted; a missing one is stored again from the saved
// copy.

// Waiting for the cluster CA when it must not be created here.
const (
	// caWaitTimeout bounds how long a member without a saved CA waits for
	// a member that has one to store it again; then it exits with the
	// reason and its scheduler restarts it. Running members store it within
	// a loop of seeing the record gone, so minutes mean nobody holds it.
	caWaitTimeout = 2 * time.Minute
	caPoll        = 2 * time.Second
	caWaitLog     = 30 * time.Second
	// requestTimeout bounds a request to a peer's status port (a dial in
	// clusterExists, HTTPClient's): task's rpcTimeout.
	requestTimeout = 1500 * time.Millisecond
)

// retirePlaintextCA deletes the plaintext cluster CA (clusterca.PlainKey) that earlier
// versions stored, once the sealed one holds the same CA: the migration of
// a running cluster, done by every member with a KEK at start and at every
// CA check, so that a member of an earlier version that stores it again
// during a rolling update is undone. A different plaintext CA is left for
// the operator and logged.
func (t *Trust) retirePlaintextCA(ctx context.Context, held certs.Pair) {
	if t.cfg.KEK == nil {
		return
	}
	b, err := t.cfg.Reads.Load(ctx, clusterca.PlainKey)
	if errors.Is(err, coord.ErrNotStored) {
		return
	}
	if err != nil {
		t.log.Warn("plaintext cluster CA not checked", "error", err)
		return
	}
	old, err := certs.ParseBundle(b)
	if err == nil && !clusterca.Same(old, held) {
		t.log.Error("the coordinator holds a plaintext cluster CA other than the sealed one: left in place for an operator", "plaintext_ca", certs.Fingerprint(old.Cert), "sealed_ca", certs.Fingerprint(held.Cert), "location", clusterca.Location(t.cfg.Cluster, clusterca.PlainKey))
		return
	}
	// Deleting the copy does not take the key back from the Consul
	// snapshots (and backups of them) taken while it was there: the
	// mark, stored first, keeps the members warning until a CA rotation.
	if err := clusterca.MarkExposed(ctx, t.cfg.Coordinator, certs.Fingerprint(held.Cert), time.Now()); err != nil {
		t.log.Warn("plaintext cluster CA not deleted", "error", err)
		return
	}
	if err := t.cfg.Coordinator.Delete(ctx, clusterca.PlainKey); err != nil {
		t.log.Warn("plaintext cluster CA not deleted", "error", err)
		return
	}
	t.log.Info("deleted the plaintext cluster CA: the coordinator holds it sealed", "ca", certs.Fingerprint(held.Cert), "deleted", clusterca.Location(t.cfg.Cluster, clusterca.PlainKey))
}

// readExposure reads the coordinator's mark of a CA whose key it held in
// the clear (clusterca.ExposedKey) and logs it while this member trusts
// that CA (once per mark and start).
func (t *Trust) readExposure(ctx context.Context) {
	e, ok, err := clusterca.LoadExposure(ctx, t.cfg.Reads)
	if err != nil {
		t.log.Warn("mark of an exposed cluster CA key not read", "error", err)
		return
	}
	if !ok {
		t.caExposed.Store(nil)
		return
	}
	prev := t.caExposed.Swap(&e)
	if w := t.KeyExposed(); w != "" && (prev == nil || *prev != e) {
		t.log.Warn("the cluster CA's key was exposed: rotate the CA", "warning", w, "mark", clusterca.Location(t.cfg.Cluster, clusterca.ExposedKey))
	}
}

// KeyExposed is the warning while this member issues from or trusts a CA
// the coordinator marks as once held in the clear; "" otherwise. It stops
// once a CA rotation retires that CA (phase retire: the new CA alone is
// trusted), whether or not the mark is deleted.
func (t *Trust) KeyExposed() string {
	e := t.caExposed.Load()
	v := t.RotationView()
	if e == nil || v == nil {
		return ""
	}
	if v.Issuer == e.CA || slices.Contains(v.Trusted, e.CA) {
		return e.Warning()
	}
	return ""
}

// repairStatusCA replaces a status CA in the coordinator that this
// cluster's CA (held: the coordinator's, the one this member runs with)
// does not derive: a writer of the coordinator's keys planted it, and every
// read-only client's certificate would be refused (clusterca.RepairStatusCA).
func (t *Trust) repairStatusCA(ctx context.Context, held certs.Pair) {
	replaced, err := clusterca.RepairStatusCA(ctx, t.cfg.Reads, t.cfg.Coordinator, held)
	if replaced != nil {
		t.log.Error("the coordinator held a status CA this cluster's CA does not derive (a writer of the coordinator's keys stored it; members never accepted it): replaced",
			"replaced", certs.Fingerprint(replaced), "location", clusterca.Location(t.cfg.Cluster, clusterca.StatusKey))
	}
	if err != nil {
		t.log.Warn("status CA not checked", "error", err)
	}
}

// caKeyInUse is the coordinator key this member keeps the cluster CA under.
func (t *Trust) caKeyInUse() string {
	if t.cfg.KEK != nil {
		return clusterca.SealedKey
	}
	return clusterca.PlainKey
}

// chooseCA decides which cluster CA this member runs with (TLS auto).
//
//   - saved and held, the same: that one.
//   - saved and held, different: the saved one, and the mismatch reported.
//   - saved, none held (the coordinator lost its state): the saved one,
//     stored again create-only (another member may store first: then it is
//     a mismatch as above).
//   - none saved, held: the held one, saved.
//   - none saved, none held: created only when no cluster exists (firstCA).
func (t *Trust) chooseCA(ctx context.Context) (certs.Pair, error) {
	co, kek := t.cfg.Coordinator, t.cfg.KEK
	saved, err := readCA(t.cfg.Dir)
	if err != nil {
		// Not a CA: nothing peers could trust. Kept (renamed) for the
		// operator rather than overwritten.
		aside := t.cfg.Dir.CAFile() + ".unreadable-" + time.Now().UTC().Format("20060102T150405Z")
		t.log.Error("saved cluster CA unreadable: moving it aside", "error", err, "path", aside)
		if rerr := os.Rename(t.cfg.Dir.CAFile(), aside); rerr != nil {
			return certs.Pair{}, fmt.Errorf("set aside unreadable %s: %w", t.cfg.Dir.CAFile(), rerr)
		}
		saved = nil
	}
	held, err := clusterca.Load(ctx, co, kek)
	missing := errors.Is(err, clusterca.ErrNoClusterCA)
	if errors.Is(err, clusterca.ErrPlaintextCA) {
		// Only a plaintext CA (an earlier version's, or anyone's who
		// may write the coordinator): never taken with a KEK. A member
		// with a saved CA stores it sealed (restoreCA then retires the
		// plaintext copy if it is the same CA: the migration); one
		// without has no CA it may trust.
		if saved == nil {
			return certs.Pair{}, fmt.Errorf("%w (%s, %s)", err, clusterca.Location(t.cfg.Cluster, clusterca.SealedKey), clusterca.Location(t.cfg.Cluster, clusterca.PlainKey))
		}
		t.log.Warn("the coordinator holds the cluster CA only in the clear: storing the CA this member saved, sealed", "ca", certs.Fingerprint(saved.Cert), "plaintext", clusterca.Location(t.cfg.Cluster, clusterca.PlainKey))
		missing, err = true, nil
	}
	if errors.Is(err, certs.ErrWrongKEK) && saved != nil {
		// The CA this member saved is the one its peers trust: run with
		// it; only members without a saved CA need the coordinator's.
		t.log.Error("the cluster CA in the coordinator does not open with this member's key encryption key: running with the CA this member saved; members without a saved CA cannot start until "+certs.KEKEnv+" is the key the CA was sealed with",
			"error", err, "saved", t.cfg.Dir.CAFile(), "coordinator", clusterca.Location(t.cfg.Cluster, clusterca.SealedKey))
		return *saved, nil
	}
	if err != nil && !missing && !errors.Is(err, clusterca.ErrCASealed) {
		return certs.Pair{}, err
	}
	if kek == nil && t.cfg.Cluster.Coordination.Kind == config.CoordConsul {
		return certs.Pair{}, fmt.Errorf("TLS auto with Consul coordination keeps the cluster CA's key in Consul sealed with a key encryption key only members hold: set %s (32 bytes, base64). "+
			"The rendered job takes it from the Nomad variable nomad/jobs/<job>, key ca_kek, which its first member creates where its workload identity may write the variable (no Nomad ACLs) and `etcd-nomad job run` creates otherwise; "+
			"by hand: nomad var put -check-index 0 nomad/jobs/<job> ca_kek=$(openssl rand -base64 32) (create-only; where the variable exists, add the item and keep consul_token)", certs.KEKEnv)
	}
	if errors.Is(err, clusterca.ErrCASealed) {
		return certs.Pair{}, err
	}
	switch {
	case saved != nil && !missing:
		if !clusterca.Same(*saved, held) {
			t.reportCAMismatch(*saved, held)
		}
		return *saved, nil
	case saved != nil:
		got, err := clusterca.Offer(ctx, co, *saved, kek)
		if err != nil {
			return certs.Pair{}, err
		}
		if !clusterca.Same(*saved, got) {
			t.reportCAMismatch(*saved, got)
		} else {
			t.log.Warn("the coordinator had no cluster CA: stored the one this member saved", "ca", certs.Fingerprint(saved.Cert))
		}
		return *saved, nil
	case !missing:
		if err := writeCA(t.cfg.Dir, held); err != nil {
			return certs.Pair{}, fmt.Errorf("save cluster CA: %w", err)
		}
		return held, nil
	}
	ca, err := t.firstCA(ctx)
	if err != nil {
		return certs.Pair{}, err
	}
	if err := writeCA(t.cfg.Dir, ca); err != nil {
		return certs.Pair{}, fmt.Errorf("save cluster CA: %w", err)
	}
	return ca, nil
}

// firstCA is for a member with no saved CA that finds none in the
// coordinator. It creates the cluster CA only where no cluster exists yet;
// otherwise the coordinator lost the CA of a cluster whose members trust
// it, and a new one would keep this member out for good (and be adopted by
// every member that starts after it). It then waits for a member holding
// the CA to store it again, up to caWaitTimeout.
//
// "No cluster exists" is judged here, before the planner runs, because a
// member cannot ask its peers' /status without a certificate from this
// very CA: no cluster record, no etcd data in this member's dir, and no
// other instance listening on its status port (peers listen only once they
// have their CA). What it cannot see: peers that hold the CA but are all
// down at this moment; they report the mismatch when they start.
func (t *Trust) firstCA(ctx context.Context) (certs.Pair, error) {
	deadline := time.Now().Add(caWaitTimeout)
	var lastLog time.Time
	for {
		exists, err := t.clusterExists(ctx)
		if err != nil {
			return certs.Pair{}, err
		}
		if exists == "" {
			fresh, err := certs.NewCA(t.cfg.Cluster.Name, time.Now())
			if err != nil {
				return certs.Pair{}, fmt.Errorf("create CA: %w", err)
			}
			ca, err := clusterca.Offer(ctx, t.cfg.Coordinator, fresh, t.cfg.KEK)
			if err == nil && clusterca.Same(ca, fresh) {
				t.log.Info("created the cluster CA: no cluster exists yet", "ca", certs.Fingerprint(ca.Cert))
			}
			return ca, err
		}
		held, err := clusterca.Load(ctx, t.cfg.Coordinator, t.cfg.KEK)
		if err == nil {
			return held, nil
		}
		if !errors.Is(err, clusterca.ErrNoClusterCA) {
			return certs.Pair{}, err
		}
		if time.Now().After(deadline) {
			return certs.Pair{}, fmt.Errorf("%w (%s) although a cluster exists: %s; not creating a CA its members would not trust. "+
				"A member with a saved CA (<data_dir>/<member>/tls/ca.bundle) stores it again when it starts or sees the record gone",
				clusterca.ErrNoClusterCA, clusterca.Location(t.cfg.Cluster, t.caKeyInUse()), exists)
		}
		if time.Since(lastLog) >= caWaitLog {
			t.log.Warn("no cluster CA in the coordinator, but a cluster exists: waiting for a member that holds it to store it again", "evidence", exists, "location", clusterca.Location(t.cfg.Cluster, t.caKeyInUse()))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return certs.Pair{}, fmt.Errorf("%w: %s: %w", clusterca.ErrNoClusterCA, exists, ctx.Err())
		case <-time.After(caPoll):
		}
	}
}

// clusterExists returns why a cluster exists already, or "" when nothing
// shows one: see firstCA.
func (t *Trust) clusterExists(ctx context.Context) (string, error) {
	rec, err := t.cfg.Coordinator.Record(ctx)
	switch {
	case err == nil:
		return fmt.Sprintf("the coordinator holds a cluster record (epoch %d, seeded by %s)", rec.Epoch, rec.Seeder), nil
	case !errors.Is(err, coord.ErrNoRecord):
		return "", fmt.Errorf("read cluster record: %w", err)
	}
	if t.cfg.Dir.HasEtcdData() {
		return "this member's data dir holds etcd data", nil
	}
	insts, err := t.cfg.Instances(ctx)
	if err != nil {
		// Unknown peers could be running ones.
		return fmt.Sprintf("cannot list the other instances (%v)", err), nil
	}
	for _, in := range insts {
		if in.Name == t.cfg.Name || in.Address == "" || in.StatusPort == 0 {
			continue
		}
		addr := net.JoinHostPort(in.Address, strconv.Itoa(in.StatusPort))
		d := net.Dialer{Timeout: requestTimeout}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return fmt.Sprintf("member %s is listening on its status port %s", in.Name, addr), nil
		}
	}
	return "", nil
}

// reportCAMismatch records and logs (once per pair) that the coordinator
// holds another CA than the one this member runs with.
func (t *Trust) reportCAMismatch(mine, held certs.Pair) {
	mm := &status.CAMismatch{Member: certs.Fingerprint(mine.Cert), Coordinator: certs.Fingerprint(held.Cert)}
	t.mu.Lock()
	same := t.caMismatch != nil && *t.caMismatch == *mm
	t.caMismatch = mm
	t.mu.Unlock()
	if same {
		return
	}
	t.log.Error("the coordinator holds another cluster CA than the one this member runs with: keeping this member's (its peers trust it), not adopting the coordinator's; members that start without a saved CA take the coordinator's and cannot join. "+
		"If this member's CA is the cluster's, delete the coordinator's copy and restart this member (it stores its CA at start); if not, stop this member and move its saved CA aside",
		"member_ca", mm.Member, "coordinator_ca", mm.Coordinator, "saved", t.cfg.Dir.CAFile(), "coordinator", clusterca.Location(t.cfg.Cluster, t.caKeyInUse()))
}

// clearCAMismatch notes that the coordinator holds this member's CA again.
func (t *Trust) clearCAMismatch() {
	t.mu.Lock()
	was := t.caMismatch
	t.caMismatch = nil
	t.mu.Unlock()
	if was != nil {
		t.log.Info("the coordinator holds this member's cluster CA again", "ca", was.Member)
	}
}
