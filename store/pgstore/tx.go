package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// errTxDone is returned by a Tx used after its Update returned.
var errTxDone = errors.New("pgstore: transaction already finished")

// tx is the transaction of one group of an org's Updates (see group.go),
// lent to each member's fn in turn: every call runs on the group's
// connection, inside its transaction, so reads see the transaction's own
// writes, the earlier members' included.
//
// Writes are not sent when they are made: they wait in pending and go to
// the server in one batch (one round trip) before the next read, or when
// the member's fn returns. A write refused then (a row count that is not
// the one expected, or a statement error) fails the member: its fn has
// returned, but its Update does not succeed, and nothing of it is kept.
type tx struct {
	ctx  context.Context // the group's: connection I/O; a member's own ctx is checked at each call
	conn *pgx.Conn
	org  string
	now  func() time.Time // nil: the database clock

	mu     sync.Mutex // a connection is not safe for concurrent use
	done   bool
	wrote  bool  // writes were sent: commit with a marker
	failed error // a failure fn cannot see (Now has no error result, a write is refused late)

	// The running member.
	pending     []pendingWrite
	needsSave   bool // other members' work is in the transaction: take a savepoint before writing
	saved       bool // the member's savepoint is taken
	memberWrote bool // some of the member's writes reached the server

	// The ledger head as of the transaction's writes so far (headOK), read
	// once and then kept as entries are appended; beganHead is its value
	// when the member began, restored if the member is undone.
	head, beganHead     ledger.Head
	headOK, beganHeadOK bool
	// The org's activation, read with the lock and kept as the
	// transaction activates (orgNow; its head is unused); beganActive is
	// orgNow when the member began.
	orgNow, beganActive orgState
}

var _ store.Tx = (*tx)(nil)

// pendingWrite is a write waiting for the next flush. check turns its
// statement's outcome (tag, or err when the statement failed) into the
// write's error.
type pendingWrite struct {
	sql   string
	args  []any
	check func(tag pgconn.CommandTag, err error) error
}

// wrapped is the check of a write whose row count does not matter.
func wrapped(what string) func(pgconn.CommandTag, error) error {
	return func(_ pgconn.CommandTag, err error) error {
		if err != nil {
			return fmt.Errorf("pgstore: %s: %w", what, err)
		}
		return nil
	}
}

// oneRow is the check of a write that must change exactly one row; refused
// is its error otherwise.
func oneRow(what string, refused func() error) func(pgconn.CommandTag, error) error {
	return func(tag pgconn.CommandTag, err error) error {
		if err != nil {
			return fmt.Errorf("pgstore: %s: %w", what, err)
		}
		if tag.RowsAffected() != 1 {
			return refused()
		}
		return nil
	}
}

// lock acquires the tx for a call that reads, after sending the writes
// waiting before it; on success the caller unlocks t.mu.
func (t *tx) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	locked := false
	defer func() {
		if !locked { // an error, or a panic while flushing
			t.mu.Unlock()
		}
	}()
	if t.done {
		return errTxDone
	}
	if err := t.flushLocked(); err != nil {
		return err
	}
	locked = true
	return nil
}

// queue adds a write to send with the next flush.
func (t *tx) queue(ctx context.Context, check func(pgconn.CommandTag, error) error, sql string, args ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return errTxDone
	}
	if t.failed != nil {
		return t.failed
	}
	for i, a := range args {
		if b, ok := a.([]byte); ok {
			args[i] = bytes.Clone(b) // sent later: the caller may reuse its buffer
		}
	}
	t.pending = append(t.pending, pendingWrite{sql: sql, args: args, check: check})
	return nil
}

// exec is a write sent at once (with those waiting before it), for the
// writes whose callers may act on their refusal.
func (t *tx) exec(ctx context.Context, check func(pgconn.CommandTag, error) error, sql string, args ...any) error {
	if err := t.queue(ctx, check, sql, args...); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.flushLocked()
	var r *refusal
	if errors.As(err, &r) && r.last && t.conn.PgConn().TxStatus() == 'T' {
		// Its own refusal, which changed nothing: the caller may act on
		// it, and the transaction goes on.
		t.failed = nil
	}
	return err
}

// refusal is a write that changed no row, or not the rows expected,
// without a statement error; last is whether it was the last of its flush.
type refusal struct {
	err  error
	last bool
}

func (e *refusal) Error() string { return e.err.Error() }
func (e *refusal) Unwrap() error { return e.err }

// flushLocked sends the pending writes in one batch, preceded by the
// member's savepoint when it needs one and has none yet. The first refusal
// is the error, and fails the member. t.mu is held.
//
// Savepoints are never released: a RELEASE in the same batch would run even
// after a refused write (a refusal is no statement error), leaving nothing
// to roll back to. They nest instead, at most one per member, and the
// newest of the name is always the running member's.
func (t *tx) flushLocked() error {
	if t.failed != nil {
		return t.failed
	}
	if len(t.pending) == 0 {
		return nil
	}
	save := t.needsSave && !t.saved
	b := &pgx.Batch{}
	if save {
		b.Queue("SAVEPOINT member")
	}
	for _, w := range t.pending {
		b.Queue(w.sql, w.args...)
	}
	t.wrote, t.memberWrote = true, true
	br := t.conn.SendBatch(t.ctx, b)
	var err error
	if save {
		if _, err = br.Exec(); err == nil {
			t.saved = true
		}
	}
	for i, w := range t.pending {
		if err != nil {
			break
		}
		tag, serr := br.Exec()
		if err = w.check(tag, serr); err != nil && serr == nil {
			err = &refusal{err: err, last: i == len(t.pending)-1}
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("pgstore: send writes: %w", cerr)
	}
	clear(t.pending)
	t.pending = t.pending[:0]
	if err != nil {
		t.failed = err
	}
	return err
}

// begin readies t for the next member; needsSave is whether other
// members' work is already in the transaction.
func (t *tx) begin(needsSave bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = t.pending[:0]
	t.needsSave, t.saved, t.memberWrote, t.failed = needsSave, false, false, nil
	t.beganHead, t.beganHeadOK = t.head, t.headOK
	t.beganActive = t.orgNow
}

// end finishes a member whose fn returned nil: its writes are sent. An
// error fails the member (undo it).
func (t *tx) end() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.failure(); err != nil {
		return err
	}
	return t.flushLocked()
}

// undo takes a failed member's work out of the transaction: its unsent
// writes are dropped, and what it sent is rolled back to its savepoint. It
// reports false when that is impossible (it sent writes without a
// savepoint, or the transaction is aborted and there is none): the
// transaction as a whole must then be rolled back.
func (t *tx) undo() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.pending)
	t.pending = t.pending[:0]
	t.head, t.headOK = t.beganHead, t.beganHeadOK
	t.orgNow = t.beganActive
	if t.saved {
		// The simple protocol: pgx would prepare a batch's statements
		// first, and PostgreSQL prepares nothing in an aborted transaction.
		if _, err := t.conn.PgConn().Exec(t.ctx, "ROLLBACK TO SAVEPOINT member; RELEASE SAVEPOINT member").ReadAll(); err != nil {
			return false
		}
		t.saved = false
	} else if t.memberWrote || t.conn.PgConn().TxStatus() != 'T' {
		return false
	}
	t.failed = nil
	return true
}

func (t *tx) finish() {
	t.mu.Lock()
	t.done = true
	clear(t.pending)
	t.pending = nil
	t.mu.Unlock()
}

// failure returns why the member must not succeed although fn returned
// nil: a clock read failed, a write was refused, or a statement error
// (which fn may have ignored) aborted the transaction.
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
// It is read once per transaction; the org's row lock keeps other writers
// out, so after that it is the last entry this transaction appended.
func (t *tx) LedgerHead(ctx context.Context) (ledger.Head, error) {
	if err := t.lock(ctx); err != nil {
		return ledger.Head{}, err
	}
	defer t.mu.Unlock()
	if t.headOK {
		return t.head, nil
	}
	h, err := readHead(t.ctx, t.conn, t.org)
	if err == nil {
		t.head, t.headOK = h, true
	}
	return h, err
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
	org := t.org
	err := t.queue(ctx, oneRow("append ledger entry", func() error {
		return fmt.Errorf("pgstore: ledger entry seq %d does not follow the head of org %q", e.Seq, org)
	}), appendEntry, t.org, int64(e.Seq), e.Kind, e.SubjectID, e.PayloadDigest, e.RecordedAt, e.PrevEntryHash, e.EntryHash)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.head, t.headOK = ledger.Head{Seq: e.Seq, EntryHash: e.EntryHash}, true
	t.mu.Unlock()
	return nil
}

// LedgerEntriesInTx implements ledger.SealTx.
func (t *tx) LedgerEntriesInTx(ctx context.Context, afterSeq uint64, limit int) ([]ledger.Entry, error) {
	if err := t.lock(ctx); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	return readEntries(t.ctx, t.conn, t.org, afterSeq, limit)
}

// LedgerHashesInTx implements ledger.SealTx.
func (t *tx) LedgerHashesInTx(ctx context.Context, indexes []int64) ([]tlog.Hash, error) {
	if err := t.lock(ctx); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	return readTreeHashes(t.ctx, t.conn, t.org, indexes)
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
	raw := make([][]byte, len(hashes))
	for i := range hashes {
		raw[i] = hashes[i][:]
	}
	org := t.org
	return t.exec(ctx, func(tag pgconn.CommandTag, err error) error {
		if err != nil {
			return fmt.Errorf("pgstore: put tree hashes: %w", err)
		}
		if tag.RowsAffected() != int64(len(hashes)) {
			return fmt.Errorf("pgstore: tree hashes at %d do not follow those stored of org %q", start, org)
		}
		return nil
	}, appendHashes, t.org, start, raw)
}

// LatestCheckpointInTx implements ledger.SealTx.
func (t *tx) LatestCheckpointInTx(ctx context.Context) (ledger.Checkpoint, error) {
	if err := t.lock(ctx); err != nil {
		return ledger.Checkpoint{}, err
	}
	defer t.mu.Unlock()
	return readLatestCheckpoint(t.ctx, t.conn, t.org)
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
	note := c.Note
	if note == nil {
		note = []byte{}
	}
	org := t.org
	return t.exec(ctx, oneRow("put checkpoint", func() error {
		return fmt.Errorf("pgstore: checkpoint of size %d is older than the latest of org %q", c.Size, org)
	}), putCheckpoint, t.org, int64(c.Size), []byte(c.Origin), c.Root[:], note)
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
	body := r.Body
	if body == nil {
		body = []byte{}
	}
	org := t.org
	return t.queue(ctx, oneRow("put dossier", func() error {
		return fmt.Errorf("pgstore: dossier %s or the dossier of decision %s already exists in org %q", r.DossierID, r.DecisionID, org)
	}), `
		INSERT INTO dossiers (org_id, dossier_id, decision_id, evaluation_id, created_at, outcome, mode, workflow_key, decision_type, body)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT DO NOTHING`,
		t.org, r.DossierID, r.DecisionID, r.EvaluationID, r.CreatedAt, r.Outcome, r.Mode, r.WorkflowKey, r.DecisionType, body)
}

// PutOrg implements tenant.Tx; o.ID must be the transaction's org.
func (t *tx) PutOrg(ctx context.Context, o tenant.Org) error {
	if err := t.checkOrg("org record", o.ID); err != nil {
		return err
	}
	return t.exec(ctx, wrapped("put org"), `
		INSERT INTO orgs (org_id, name, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (org_id) DO UPDATE SET name = excluded.name, created_at = excluded.created_at`,
		o.ID, o.Name, o.CreatedAt)
}

// PutAPIKey implements tenant.Tx. Keys are indexed globally by hash, so a
// key may be written in any org's transaction (the platform key in
// tenant.PlatformOrgID's).
func (t *tx) PutAPIKey(ctx context.Context, k tenant.APIKey) error {
	if k.Hash == "" || k.OrgID == "" {
		return errors.New("pgstore: api key needs a hash and an org id")
	}
	scopes := make([]string, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = string(s)
	}
	return t.exec(ctx, wrapped("put api key"), `
		INSERT INTO api_keys (hash, org_id, key_id, kind, scopes, created_at, expires_at, revoked_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (hash) DO UPDATE SET org_id = excluded.org_id, key_id = excluded.key_id, kind = excluded.kind,
			scopes = excluded.scopes, created_at = excluded.created_at, expires_at = excluded.expires_at,
			revoked_at = excluded.revoked_at`,
		k.Hash, k.OrgID, k.ID, string(k.Kind), scopes, k.CreatedAt, nullTime(k.ExpiresAt), nullTime(k.RevokedAt))
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
	body := b.Body
	if body == nil {
		body = []byte{}
	}
	var refused bool
	err := t.exec(ctx, func(tag pgconn.CommandTag, err error) error {
		if err != nil {
			return fmt.Errorf("pgstore: put bundle: %w", err)
		}
		refused = tag.RowsAffected() != 1
		return nil
	}, `
		INSERT INTO bundles (org_id, version, seq, bundle_id, digest, mode, rule_count, published_at, body)
		SELECT $1::text, $2::text, $3::bigint, $4::text, $5::text, $6::text, $7::bigint, $8::timestamptz, $9::bytea
		WHERE coalesce((SELECT max(seq) FROM bundles WHERE org_id = $1), 0) = $3::bigint - 1
		ON CONFLICT DO NOTHING`,
		t.org, b.Version, int64(b.Seq), b.BundleID, b.Digest, b.Mode, int64(b.RuleCount), b.PublishedAt, body)
	if err != nil || !refused {
		return err
	}
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if _, err := readBundle(t.ctx, t.conn, t.org, b.Version); err == nil {
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
	return readBundle(t.ctx, t.conn, t.org, version)
}

// LatestBundleInTx implements store.Tx.
func (t *tx) LatestBundleInTx(ctx context.Context) (store.BundleRecord, error) {
	if err := t.lock(ctx); err != nil {
		return store.BundleRecord{}, err
	}
	defer t.mu.Unlock()
	return readLatestBundle(t.ctx, t.conn, t.org)
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
	org := t.org
	err := t.exec(ctx, oneRow("put activation", func() error {
		return fmt.Errorf("pgstore: activation of version %q, which org %q has not published", a.Version, org)
	}), `
		INSERT INTO policy_activations (org_id, version, activated_at, ledger_seq)
		SELECT $1::text, $2::text, $3::timestamptz, $4::bigint
		WHERE EXISTS (SELECT 1 FROM bundles WHERE org_id = $1 AND version = $2)
		ON CONFLICT (org_id) DO UPDATE SET version = excluded.version, activated_at = excluded.activated_at,
			ledger_seq = excluded.ledger_seq`,
		t.org, a.Version, a.ActivatedAt, int64(a.LedgerSeq))
	if err == nil {
		t.mu.Lock()
		a.OrgID, a.ActivatedAt = t.org, a.ActivatedAt.UTC().Truncate(time.Microsecond)
		t.orgNow.active, t.orgNow.hasActive = a, true
		t.mu.Unlock()
	}
	return err
}

// ActivationInTx implements store.Tx.
func (t *tx) ActivationInTx(ctx context.Context) (store.Activation, error) {
	if err := t.lock(ctx); err != nil {
		return store.Activation{}, err
	}
	defer t.mu.Unlock()
	if !t.orgNow.hasActive {
		return store.Activation{}, notFound("activation of org %q", t.org)
	}
	return t.orgNow.active, nil
}

// Idempotency implements store.Tx.
func (t *tx) Idempotency(ctx context.Context, scope, key string) (store.IdempotencyRecord, error) {
	if err := t.lock(ctx); err != nil {
		return store.IdempotencyRecord{}, err
	}
	defer t.mu.Unlock()
	return readIdempotency(t.ctx, t.conn, t.org, scope, key)
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
	resp := r.Response
	if resp == nil {
		resp = []byte{}
	}
	return t.queue(ctx, wrapped("put idempotency record"), `
		INSERT INTO idempotency (org_id, scope, idem_key, request_digest, response, created_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (org_id, scope, idem_key) DO UPDATE SET request_digest = excluded.request_digest,
			response = excluded.response, created_at = excluded.created_at`,
		t.org, r.Scope, r.Key, r.RequestDigest, resp, r.CreatedAt)
}
