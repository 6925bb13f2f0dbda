package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// errTxDone is returned by a Tx used after its Update returned.
var errTxDone = errors.New("pgstore: transaction already finished")

// tx is one attempt of an Update: every call runs on the attempt's
// connection, inside its transaction, so reads see the transaction's own
// writes.
type tx struct {
	ctx  context.Context // the Update's, for Now
	conn *pgx.Conn
	org  string
	now  func() time.Time // nil: the database clock

	mu     sync.Mutex // a connection is not safe for concurrent use
	done   bool
	wrote  bool  // a write statement was sent: commit with a marker
	failed error // a failure fn cannot see (Now has no error result)
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

// write is lock for a call that writes.
func (t *tx) write(ctx context.Context) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	t.wrote = true
	return nil
}

func (t *tx) finish() {
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

// failure returns why the transaction must not commit although fn returned
// nil: a clock read failed, or a statement error (which fn may have
// ignored) aborted the transaction.
func (t *tx) failure() error {
	if t.failed != nil {
		return t.failed
	}
	if t.conn.PgConn().TxStatus() != 'T' {
		return errors.New("pgstore: the transaction was aborted by an earlier error")
	}
	return nil
}

func (t *tx) checkOrg(what, orgID string) error {
	if orgID != t.org {
		return fmt.Errorf("pgstore: %s of org %q in a transaction of org %q", what, orgID, t.org)
	}
	return nil
}

// Now implements claim.Tx: Options.Now when set, otherwise the database's
// clock_timestamp() read in the transaction at each call (not now(), which
// is the transaction's start). Whole microseconds either way. A failed read
// returns the zero time and fails the Update.
func (t *tx) Now() time.Time {
	if t.now != nil {
		return t.now().UTC().Truncate(time.Microsecond)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return time.Time{}
	}
	var now time.Time
	if err := t.conn.QueryRow(t.ctx, "SELECT clock_timestamp()").Scan(&now); err != nil {
		if t.failed == nil {
			t.failed = fmt.Errorf("pgstore: read the database clock: %w", err)
		}
		return time.Time{}
	}
	return now.UTC()
}

// OrgID implements store.Tx.
func (t *tx) OrgID() string { return t.org }

// LedgerHead implements ledger.Tx: the zero Head when the ledger is empty.
func (t *tx) LedgerHead(ctx context.Context) (ledger.Head, error) {
	if err := t.lock(ctx); err != nil {
		return ledger.Head{}, err
	}
	defer t.mu.Unlock()
	return readHead(ctx, t.conn, t.org)
}

// appendEntry inserts entry $2 and moves the head to it, in one statement,
// only when the stored head is $2 - 1 (0: no head yet).
const appendEntry = `
WITH cur AS (
	SELECT coalesce((SELECT seq FROM ledger_heads WHERE org_id = $1), 0) AS seq
), ins AS (
	INSERT INTO ledger_entries (org_id, seq, kind, subject_id, payload_digest, recorded_at, prev_entry_hash, entry_hash)
	SELECT $1::text, $2::bigint, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text
	FROM cur WHERE cur.seq = $2::bigint - 1
	ON CONFLICT DO NOTHING
	RETURNING seq
)
INSERT INTO ledger_heads (org_id, seq, entry_hash)
SELECT $1::text, seq, $8::text FROM ins
ON CONFLICT (org_id) DO UPDATE SET seq = excluded.seq, entry_hash = excluded.entry_hash`

// PutLedgerEntry implements ledger.Tx. It refuses an entry of another org or
// one whose seq is not the head's seq + 1; it does not check hashes (that is
// ledger.Append's and ledger.Verify's job).
func (t *tx) PutLedgerEntry(ctx context.Context, e ledger.Entry) error {
	if err := t.checkOrg("ledger entry", e.OrgID); err != nil {
		return err
	}
	if e.Seq == 0 || e.Seq > math.MaxInt64 {
		return fmt.Errorf("pgstore: ledger entry seq %d out of range", e.Seq)
	}
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	tag, err := t.conn.Exec(ctx, appendEntry, t.org, int64(e.Seq), e.Kind, e.SubjectID, e.PayloadDigest,
		e.RecordedAt, e.PrevEntryHash, e.EntryHash)
	if err != nil {
		return fmt.Errorf("pgstore: append ledger entry: %w", err)
	}
	if tag.RowsAffected() != 1 {
		head, err := readHead(ctx, t.conn, t.org)
		if err != nil {
			return err
		}
		return fmt.Errorf("pgstore: ledger entry seq %d does not follow head seq %d of org %q", e.Seq, head.Seq, t.org)
	}
	return nil
}

// LedgerEntriesInTx implements ledger.SealTx.
func (t *tx) LedgerEntriesInTx(ctx context.Context, afterSeq uint64, limit int) ([]ledger.Entry, error) {
	if err := t.lock(ctx); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	return readEntries(ctx, t.conn, t.org, afterSeq, limit)
}

// LedgerHashesInTx implements ledger.SealTx.
func (t *tx) LedgerHashesInTx(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	if err := t.lock(ctx); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	return readTreeHashes(ctx, t.conn, t.org, indexes)
}

// appendHashes inserts hashes $3 at indexes $2, $2+1, … only when $2 is the
// number of hashes the org has stored, in one statement.
const appendHashes = `
INSERT INTO ledger_hashes (org_id, idx, hash)
SELECT $1::text, $2::bigint + u.i - 1, u.h
FROM unnest($3::bytea[]) WITH ORDINALITY AS u(h, i)
WHERE (SELECT coalesce(max(idx) + 1, 0) FROM ledger_hashes WHERE org_id = $1) = $2::bigint`

// PutLedgerHashes implements ledger.SealTx: hashes are appended at start,
// which must be the number already stored.
func (t *tx) PutLedgerHashes(ctx context.Context, start int64, hashes []tlog.Hash) error {
	if start < 0 {
		return fmt.Errorf("pgstore: tree hash index %d out of range", start)
	}
	if len(hashes) == 0 {
		return nil
	}
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	raw := make([][]byte, len(hashes))
	for i := range hashes {
		raw[i] = hashes[i][:]
	}
	tag, err := t.conn.Exec(ctx, appendHashes, t.org, start, raw)
	if err != nil {
		return fmt.Errorf("pgstore: put tree hashes: %w", err)
	}
	if tag.RowsAffected() != int64(len(hashes)) {
		return fmt.Errorf("pgstore: tree hashes at %d do not follow those stored of org %q", start, t.org)
	}
	return nil
}

// LatestCheckpointInTx implements ledger.SealTx.
func (t *tx) LatestCheckpointInTx(ctx context.Context) (ledger.Checkpoint, error) {
	if err := t.lock(ctx); err != nil {
		return ledger.Checkpoint{}, err
	}
	defer t.mu.Unlock()
	return readLatestCheckpoint(ctx, t.conn, t.org)
}

// putCheckpoint stores checkpoint $2 (replacing one of the same size) only
// when no larger one is stored, in one statement.
const putCheckpoint = `
INSERT INTO ledger_checkpoints (org_id, tree_size, origin, root_hash, note)
SELECT $1::text, $2::bigint, $3::bytea, $4::bytea, $5::bytea
WHERE coalesce((SELECT max(tree_size) FROM ledger_checkpoints WHERE org_id = $1), 0) <= $2::bigint
ON CONFLICT (org_id, tree_size) DO UPDATE SET origin = excluded.origin, root_hash = excluded.root_hash, note = excluded.note`

// PutCheckpoint implements ledger.SealTx. It replaces the checkpoint of
// the same size and refuses one smaller than the latest.
func (t *tx) PutCheckpoint(ctx context.Context, c ledger.Checkpoint) error {
	if c.Size > math.MaxInt64 {
		return fmt.Errorf("pgstore: checkpoint size %d out of range", c.Size)
	}
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	note := c.Note
	if note == nil {
		note = []byte{}
	}
	tag, err := t.conn.Exec(ctx, putCheckpoint, t.org, int64(c.Size), []byte(c.Origin), c.Root[:], note)
	if err != nil {
		return fmt.Errorf("pgstore: put checkpoint: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("pgstore: checkpoint of size %d is older than the latest of org %q", c.Size, t.org)
	}
	return nil
}

// PutDossier implements dossier.Tx. Dossiers are write-once: a second put
// of the same dossier id or decision id is an error.
func (t *tx) PutDossier(ctx context.Context, r dossier.Stored) error {
	if err := t.checkOrg("dossier", r.OrgID); err != nil {
		return err
	}
	if r.DossierID == "" || r.DecisionID == "" {
		return errors.New("pgstore: dossier needs a dossier id and a decision id")
	}
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	body := r.Body
	if body == nil {
		body = []byte{}
	}
	tag, err := t.conn.Exec(ctx, `
		INSERT INTO dossiers (org_id, dossier_id, decision_id, evaluation_id, created_at, outcome, mode, workflow_key, decision_type, body)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT DO NOTHING`,
		t.org, r.DossierID, r.DecisionID, r.EvaluationID, r.CreatedAt, r.Outcome, r.Mode, r.WorkflowKey, r.DecisionType, body)
	if err != nil {
		return fmt.Errorf("pgstore: put dossier: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("pgstore: dossier %s or the dossier of decision %s already exists in org %q", r.DossierID, r.DecisionID, t.org)
	}
	return nil
}

// PutOrg implements tenant.Tx; o.ID must be the transaction's org.
func (t *tx) PutOrg(ctx context.Context, o tenant.Org) error {
	if err := t.checkOrg("org record", o.ID); err != nil {
		return err
	}
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	_, err := t.conn.Exec(ctx, `
		INSERT INTO orgs (org_id, name, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (org_id) DO UPDATE SET name = excluded.name, created_at = excluded.created_at`,
		o.ID, o.Name, o.CreatedAt)
	if err != nil {
		return fmt.Errorf("pgstore: put org: %w", err)
	}
	return nil
}

// PutAPIKey implements tenant.Tx. Keys are indexed globally by hash, so a
// key may be written in any org's transaction (the platform key in
// tenant.PlatformOrgID's).
func (t *tx) PutAPIKey(ctx context.Context, k tenant.APIKey) error {
	if k.Hash == "" || k.OrgID == "" {
		return errors.New("pgstore: api key needs a hash and an org id")
	}
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	scopes := make([]string, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = string(s)
	}
	_, err := t.conn.Exec(ctx, `
		INSERT INTO api_keys (hash, org_id, key_id, kind, scopes, created_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (hash) DO UPDATE SET org_id = excluded.org_id, key_id = excluded.key_id, kind = excluded.kind,
			scopes = excluded.scopes, created_at = excluded.created_at`,
		k.Hash, k.OrgID, k.ID, string(k.Kind), scopes, k.CreatedAt)
	if err != nil {
		return fmt.Errorf("pgstore: put api key: %w", err)
	}
	return nil
}

// PutBundle implements store.Tx. Published versions are immutable and
// numbered without gaps: the version must be new and b.Seq must be the
// latest bundle's seq + 1 (1 for the first).
func (t *tx) PutBundle(ctx context.Context, b store.BundleRecord) error {
	if err := t.checkOrg("bundle", b.OrgID); err != nil {
		return err
	}
	if b.Version == "" {
		return errors.New("pgstore: bundle needs a version")
	}
	if b.Seq == 0 || b.Seq > math.MaxInt64 {
		return fmt.Errorf("pgstore: bundle seq %d out of range", b.Seq)
	}
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	body := b.Body
	if body == nil {
		body = []byte{}
	}
	tag, err := t.conn.Exec(ctx, `
		INSERT INTO bundles (org_id, version, seq, bundle_id, digest, mode, rule_count, published_at, body)
		SELECT $1::text, $2::text, $3::bigint, $4::text, $5::text, $6::text, $7::bigint, $8::timestamptz, $9::bytea
		WHERE coalesce((SELECT max(seq) FROM bundles WHERE org_id = $1), 0) = $3::bigint - 1
		ON CONFLICT DO NOTHING`,
		t.org, b.Version, int64(b.Seq), b.BundleID, b.Digest, b.Mode, int64(b.RuleCount), b.PublishedAt, body)
	if err != nil {
		return fmt.Errorf("pgstore: put bundle: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if _, err := readBundle(ctx, t.conn, t.org, b.Version); err == nil {
		return fmt.Errorf("pgstore: bundle version %q already exists in org %q", b.Version, t.org)
	}
	return fmt.Errorf("pgstore: bundle seq %d does not follow the latest seq of org %q", b.Seq, t.org)
}

// BundleInTx implements store.Tx.
func (t *tx) BundleInTx(ctx context.Context, version string) (store.BundleRecord, error) {
	if err := t.lock(ctx); err != nil {
		return store.BundleRecord{}, err
	}
	defer t.mu.Unlock()
	return readBundle(ctx, t.conn, t.org, version)
}

// LatestBundleInTx implements store.Tx.
func (t *tx) LatestBundleInTx(ctx context.Context) (store.BundleRecord, error) {
	if err := t.lock(ctx); err != nil {
		return store.BundleRecord{}, err
	}
	defer t.mu.Unlock()
	return readLatestBundle(ctx, t.conn, t.org)
}

// PutActivation implements store.Tx; the version must be published in the
// transaction's org (checked in the statement, so a refusal does not abort
// the transaction).
func (t *tx) PutActivation(ctx context.Context, a store.Activation) error {
	if err := t.checkOrg("activation", a.OrgID); err != nil {
		return err
	}
	if a.LedgerSeq > math.MaxInt64 {
		return fmt.Errorf("pgstore: activation ledger seq %d out of range", a.LedgerSeq)
	}
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	tag, err := t.conn.Exec(ctx, `
		INSERT INTO policy_activations (org_id, version, activated_at, ledger_seq)
		SELECT $1::text, $2::text, $3::timestamptz, $4::bigint
		WHERE EXISTS (SELECT 1 FROM bundles WHERE org_id = $1 AND version = $2)
		ON CONFLICT (org_id) DO UPDATE SET version = excluded.version, activated_at = excluded.activated_at,
			ledger_seq = excluded.ledger_seq`,
		t.org, a.Version, a.ActivatedAt, int64(a.LedgerSeq))
	if err != nil {
		return fmt.Errorf("pgstore: put activation: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("pgstore: activation of version %q, which org %q has not published", a.Version, t.org)
	}
	return nil
}

// ActivationInTx implements store.Tx.
func (t *tx) ActivationInTx(ctx context.Context) (store.Activation, error) {
	if err := t.lock(ctx); err != nil {
		return store.Activation{}, err
	}
	defer t.mu.Unlock()
	return readActivation(ctx, t.conn, t.org)
}

// Idempotency implements store.Tx.
func (t *tx) Idempotency(ctx context.Context, scope, key string) (store.IdempotencyRecord, error) {
	if err := t.lock(ctx); err != nil {
		return store.IdempotencyRecord{}, err
	}
	defer t.mu.Unlock()
	return readIdempotency(ctx, t.conn, t.org, scope, key)
}

// PutIdempotency implements store.Tx; it replaces any record with the same
// scope and key.
func (t *tx) PutIdempotency(ctx context.Context, r store.IdempotencyRecord) error {
	if err := t.checkOrg("idempotency record", r.OrgID); err != nil {
		return err
	}
	if r.Scope == "" || r.Key == "" {
		return errors.New("pgstore: idempotency record needs a scope and a key")
	}
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	resp := r.Response
	if resp == nil {
		resp = []byte{}
	}
	_, err := t.conn.Exec(ctx, `
		INSERT INTO idempotency (org_id, scope, idem_key, request_digest, response, created_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (org_id, scope, idem_key) DO UPDATE SET request_digest = excluded.request_digest,
			response = excluded.response, created_at = excluded.created_at`,
		t.org, r.Scope, r.Key, r.RequestDigest, resp, r.CreatedAt)
	if err != nil {
		return fmt.Errorf("pgstore: put idempotency record: %w", err)
	}
	return nil
}
