package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// errTxDone is returned by a Tx used after its Update returned.
var errTxDone = errors.New("pebblestore: transaction already finished")

// tx is one org's Update: reads and writes go through an indexed batch.
type tx struct {
	org string
	b   *pebble.Batch
	now func() time.Time

	mu   sync.Mutex // a batch is not safe for concurrent use
	done bool
	// head is the org's ledger head as this transaction last read or wrote
	// it (known once set): the org's lock keeps every other writer out
	// until the transaction ends, so an append need not read it again.
	head      ledger.Head
	headKnown bool
	appended  bool // PutLedgerEntry wrote to the batch: state.head follows t.head when it is applied
	// state is the org's kept state (read under the org's mutex, which
	// the transaction holds); active is the activation this transaction
	// wrote (activeSet), applied to state when its batch is.
	state     *org
	active    store.Activation
	activeSet bool
	// subscribers is the org's outbox subscriber count this transaction
	// wrote (subscribersSet), applied to state when its batch is.
	subscribers    int
	subscribersSet bool
	// protection is the org's data-protection setting this transaction
	// wrote (protectionSet; nil: deleted), applied to state when its
	// batch is.
	protection    []byte
	protectionSet bool
	// dues are the due entries of the jobs this transaction read or
	// wrote, so that a write need not read the job again.
	dues map[string]jobDue
}

var _ store.Tx = (*tx)(nil)

// lock acquires the tx for one call; on success the caller unlocks t.mu.
func (t *tx) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return errTxDone
	}
	return nil
}

func (t *tx) finish() {
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

func (t *tx) checkOrg(what, orgID string) error {
	if orgID != t.org {
		return fmt.Errorf("pebblestore: %s of org %q in a transaction of org %q", what, orgID, t.org)
	}
	return nil
}

func (t *tx) set(key []byte, v any) error {
	var raw []byte
	switch v := v.(type) {
	case []byte:
		raw = v
	default:
		var err error
		if raw, err = encodeJSON(v); err != nil {
			return err
		}
	}
	if err := t.b.Set(key, raw, nil); err != nil {
		return fmt.Errorf("pebblestore: write: %w", err)
	}
	return nil
}

// OrgID implements store.Tx.
func (t *tx) OrgID() string { return t.org }

// LedgerHead implements ledger.Tx: the zero Head when the ledger is empty.
func (t *tx) LedgerHead(ctx context.Context) (ledger.Head, error) {
	if err := t.lock(ctx); err != nil {
		return ledger.Head{}, err
	}
	defer t.mu.Unlock()
	return t.ledgerHead()
}

// ledgerHead is the org's head within this transaction; t.mu is held.
func (t *tx) ledgerHead() (ledger.Head, error) {
	if t.headKnown {
		return t.head, nil
	}
	if o := t.state; !t.appended && o.headKnown {
		t.head, t.headKnown = o.head, true
		return t.head, nil
	}
	h, err := readHead(t.b, t.org)
	if err != nil {
		return h, err
	}
	t.head, t.headKnown = h, true
	if !t.appended { // what the store holds, not this batch's own writes
		t.state.head, t.state.headKnown = h, true
	}
	return h, nil
}

// PutLedgerEntry implements ledger.Tx. It refuses an entry of another org or
// one whose seq is not the head's seq + 1; it does not check hashes (that is
// ledger.Append's and ledger.Verify's job).
func (t *tx) PutLedgerEntry(ctx context.Context, e ledger.Entry) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := t.checkOrg("ledger entry", e.OrgID); err != nil {
		return err
	}
	head, err := t.ledgerHead()
	if err != nil {
		return err
	}
	if e.Seq != head.Seq+1 {
		return fmt.Errorf("pebblestore: ledger entry seq %d does not follow head seq %d of org %q", e.Seq, head.Seq, t.org)
	}
	t.appended = true
	if err := t.set(entryKey(t.org, e.Seq), e); err != nil {
		return err
	}
	next := ledger.Head{Seq: e.Seq, EntryHash: e.EntryHash}
	if err := t.set(headKey(t.org), next); err != nil {
		t.headKnown = false // the batch may or may not hold it: read it again
		return err
	}
	t.head, t.headKnown = next, true
	return nil
}

// LedgerEntriesInTx implements ledger.SealTx.
func (t *tx) LedgerEntriesInTx(ctx context.Context, afterSeq uint64, limit int) ([]ledger.Entry, error) {
	if err := t.lock(ctx); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	return readEntries(t.b, t.org, afterSeq, limit)
}

// LedgerHashesInTx implements ledger.SealTx.
func (t *tx) LedgerHashesInTx(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	if err := t.lock(ctx); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	return readTreeHashes(t.b, t.org, indexes)
}

// PutLedgerHashes implements ledger.SealTx: hashes are appended at start,
// which must be the number already stored.
func (t *tx) PutLedgerHashes(ctx context.Context, start int64, hashes []tlog.Hash) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	count, err := treeHashCount(t.b, t.org)
	if err != nil {
		return err
	}
	if start != count {
		return fmt.Errorf("pebblestore: tree hashes at %d do not follow the %d stored of org %q", start, count, t.org)
	}
	for i := range hashes {
		if err := t.set(treeHashKey(t.org, start+int64(i)), hashes[i][:]); err != nil {
			return err
		}
	}
	return nil
}

// LatestCheckpointInTx implements ledger.SealTx.
func (t *tx) LatestCheckpointInTx(ctx context.Context) (ledger.Checkpoint, error) {
	if err := t.lock(ctx); err != nil {
		return ledger.Checkpoint{}, err
	}
	defer t.mu.Unlock()
	return readLatestCheckpoint(t.b, t.org)
}

// PutCheckpoint implements ledger.SealTx. It replaces the checkpoint of
// the same size and refuses one smaller than the latest.
func (t *tx) PutCheckpoint(ctx context.Context, c ledger.Checkpoint) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	latest, err := readLatestCheckpoint(t.b, t.org)
	if err != nil {
		return err
	}
	if c.Size < latest.Size {
		return fmt.Errorf("pebblestore: checkpoint of size %d is older than the latest, size %d, of org %q", c.Size, latest.Size, t.org)
	}
	return t.set(checkpointKey(t.org, c.Size), encodeCheckpoint(c))
}

// PutDossier implements dossier.Tx. Dossiers are write-once: a second put
// of the same dossier id or decision id is an error.
func (t *tx) PutDossier(ctx context.Context, r dossier.Stored) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := t.checkOrg("dossier", r.OrgID); err != nil {
		return err
	}
	if r.DossierID == "" || r.DecisionID == "" {
		return errors.New("pebblestore: dossier needs a dossier id and a decision id")
	}
	dk, xk := dossierKey(t.org, r.DossierID), decisionKey(t.org, r.DecisionID)
	dp, xp := dk[:len(dk)-len(r.DossierID)], xk[:len(xk)-len(r.DecisionID)]
	for _, k := range [...]struct {
		prefix, key []byte
		what, id    string
	}{{dp, dk, "dossier", r.DossierID}, {xp, xk, "dossier of decision", r.DecisionID}} {
		exists, err := t.exists(k.prefix, k.key)
		if err != nil {
			return err
		}
		if exists {
			return fmt.Errorf("pebblestore: %s %s already exists in org %q", k.what, k.id, t.org)
		}
	}
	// Raised before the writes: a write that fails half-way may still be
	// in the batch, and a ceiling too high is always safe.
	t.raise(dp, dk)
	t.raise(xp, xk)
	if err := encodeDossier(t.b, dk, r); err != nil {
		return err
	}
	if err := t.set(xk, []byte(r.DossierID)); err != nil {
		return err
	}
	return t.set(summaryKey(t.org, r.CreatedAt, r.DossierID), summaryValue{
		DossierID:    r.DossierID,
		DecisionID:   r.DecisionID,
		CreatedAt:    r.CreatedAt,
		Outcome:      r.Outcome,
		Mode:         r.Mode,
		WorkflowKey:  r.WorkflowKey,
		DecisionType: r.DecisionType,
	})
}

// PutOrg implements tenant.Tx; o.ID must be the transaction's org.
func (t *tx) PutOrg(ctx context.Context, o tenant.Org) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := t.checkOrg("org record", o.ID); err != nil {
		return err
	}
	return t.set(orgKey(t.org), o)
}

// PutAPIKey implements tenant.Tx. Keys are indexed globally by hash, so a
// key may be written in any org's transaction (the platform key in
// tenant.PlatformOrgID's).
func (t *tx) PutAPIKey(ctx context.Context, k tenant.APIKey) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if k.Hash == "" || k.OrgID == "" {
		return errors.New("pebblestore: api key needs a hash and an org id")
	}
	return t.set(apiKeyKey(k.Hash), k)
}

// PutBundle implements store.Tx. Published versions are immutable and
// numbered without gaps: the version must be new and b.Seq must be the
// latest bundle's seq + 1 (1 for the first).
func (t *tx) PutBundle(ctx context.Context, b store.BundleRecord) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := t.checkOrg("bundle", b.OrgID); err != nil {
		return err
	}
	if b.Version == "" {
		return errors.New("pebblestore: bundle needs a version")
	}
	vk := bundleVersionKey(t.org, b.Version)
	exists, err := has(t.b, vk)
	if err != nil {
		return err
	}
	if exists {
		return fmt.Errorf("pebblestore: bundle version %q already exists in org %q", b.Version, t.org)
	}
	var latest uint64
	switch l, err := readLatestBundle(t.b, t.org); {
	case err == nil:
		latest = l.Seq
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if b.Seq != latest+1 {
		return fmt.Errorf("pebblestore: bundle seq %d does not follow seq %d of org %q", b.Seq, latest, t.org)
	}
	if err := t.set(bundleKey(t.org, b.Seq), b); err != nil {
		return err
	}
	return t.set(vk, binary.BigEndian.AppendUint64(nil, b.Seq))
}

// BundleInTx implements store.Tx.
func (t *tx) BundleInTx(ctx context.Context, version string) (store.BundleRecord, error) {
	if err := t.lock(ctx); err != nil {
		return store.BundleRecord{}, err
	}
	defer t.mu.Unlock()
	return readBundle(t.b, t.org, version)
}

// LatestBundleInTx implements store.Tx.
func (t *tx) LatestBundleInTx(ctx context.Context) (store.BundleRecord, error) {
	if err := t.lock(ctx); err != nil {
		return store.BundleRecord{}, err
	}
	defer t.mu.Unlock()
	return readLatestBundle(t.b, t.org)
}

// PutActivation implements store.Tx; the version must be published in the
// transaction's org.
func (t *tx) PutActivation(ctx context.Context, a store.Activation) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := t.checkOrg("activation", a.OrgID); err != nil {
		return err
	}
	published, err := has(t.b, bundleVersionKey(t.org, a.Version))
	if err != nil {
		return err
	}
	if !published {
		return fmt.Errorf("pebblestore: activation of version %q, which org %q has not published", a.Version, t.org)
	}
	raw, err := encodeJSON(a)
	if err != nil {
		return err
	}
	// Kept as a read would return it (the JSON form's times).
	var kept store.Activation
	if err := decodeJSON(raw, &kept); err != nil {
		return err
	}
	if err := t.set(activationKey(t.org), raw); err != nil {
		return err
	}
	t.active, t.activeSet = kept, true
	return nil
}

// ActivationInTx implements store.Tx.
func (t *tx) ActivationInTx(ctx context.Context) (store.Activation, error) {
	if err := t.lock(ctx); err != nil {
		return store.Activation{}, err
	}
	defer t.mu.Unlock()
	switch o := t.state; {
	case t.activeSet:
		return t.active, nil
	case !o.activeKnown:
		a, err := readActivation(t.b, t.org)
		switch {
		case err == nil:
			o.active, o.hasActive = a, true
		case !errors.Is(err, store.ErrNotFound):
			return a, err
		}
		o.activeKnown = true
		return a, err
	case !o.hasActive:
		return store.Activation{}, errNoActivation
	default:
		return o.active, nil
	}
}

// errNoActivation is ActivationInTx's answer for an org on the starter
// policy, made once: it is asked on every decision of such an org.
var errNoActivation = fmt.Errorf("pebblestore: the org has no activation: %w", store.ErrNotFound)

// Idempotency implements store.Tx.
func (t *tx) Idempotency(ctx context.Context, scope, key string) (store.IdempotencyRecord, error) {
	if err := t.lock(ctx); err != nil {
		return store.IdempotencyRecord{}, err
	}
	defer t.mu.Unlock()
	return readIdempotency(t.b, t.org, scope, key)
}

// PutIdempotency implements store.Tx; it replaces any record with the same
// scope and key.
func (t *tx) PutIdempotency(ctx context.Context, r store.IdempotencyRecord) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := t.checkOrg("idempotency record", r.OrgID); err != nil {
		return err
	}
	if r.Scope == "" || r.Key == "" {
		return errors.New("pebblestore: idempotency record needs a scope and a key")
	}
	return t.set(idempotencyKey(t.org, r.Scope, r.Key), r)
}
