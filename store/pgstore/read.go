package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// querier is what reads need: the pool for Reader methods (each statement
// its own snapshot of committed data), the transaction's connection for Tx
// getters (committed data plus the transaction's own writes).
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pageSize is how many rows a listing reads per statement. Listings that
// call back into the caller (DossierSummaries, GrantsInState) read a page,
// release the connection, then call fn for its rows, so fn may use the
// store without holding a connection that the pool may need.
const pageSize = 256

// notFound wraps store.ErrNotFound with what was looked up.
func notFound(format string, args ...any) error {
	return fmt.Errorf("pgstore: %s: %w", fmt.Sprintf(format, args...), store.ErrNotFound)
}

// scanOne runs a single-row query; no row is notFound(what...).
func scanOne(row pgx.Row, dest []any, format string, args ...any) error {
	err := row.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound(format, args...)
	}
	if err != nil {
		return fmt.Errorf("pgstore: read %s: %w", fmt.Sprintf(format, args...), err)
	}
	return nil
}

func encodeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("pgstore: encode %T: %w", v, err)
	}
	return b, nil
}

// decodeJSON reads what encodeJSON wrote, with JSON v2 (faster), as
// store/pebblestore does.
func decodeJSON(b []byte, v any) error {
	if err := jsonv2.Unmarshal(b, v); err != nil {
		return fmt.Errorf("pgstore: decode %T: %w", v, err)
	}
	return nil
}

func readOrg(ctx context.Context, q querier, orgID string) (tenant.Org, error) {
	o := tenant.Org{ID: orgID}
	err := scanOne(q.QueryRow(ctx, `SELECT name, created_at FROM orgs WHERE org_id = $1`, orgID),
		[]any{&o.Name, &o.CreatedAt}, "org %q", orgID)
	o.CreatedAt = o.CreatedAt.UTC()
	return o, err
}

func readAPIKey(ctx context.Context, q querier, hash string) (tenant.APIKey, error) {
	k := tenant.APIKey{Hash: hash}
	var kind string
	var scopes []string
	var expires, revoked *time.Time
	err := scanOne(q.QueryRow(ctx, `SELECT org_id, key_id, kind, scopes, created_at, expires_at, revoked_at FROM api_keys WHERE hash = $1`, hash),
		[]any{&k.OrgID, &k.ID, &kind, &scopes, &k.CreatedAt, &expires, &revoked}, "api key")
	if err != nil {
		return tenant.APIKey{}, err
	}
	if expires != nil {
		k.ExpiresAt = *expires
	}
	if revoked != nil {
		k.RevokedAt = *revoked
	}
	k.Kind = tenant.KeyKind(kind)
	if len(scopes) > 0 {
		k.Scopes = make([]tenant.Scope, len(scopes))
		for i, s := range scopes {
			k.Scopes[i] = tenant.Scope(s)
		}
	}
	k.CreatedAt = k.CreatedAt.UTC()
	return k, nil
}

// readHead returns the org's head, the zero Head when its ledger is empty.
func readHead(ctx context.Context, q querier, orgID string) (ledger.Head, error) {
	return scanHead(q.QueryRow(ctx, selectHead, orgID), orgID)
}

const selectHead = `SELECT seq, entry_hash FROM ledger_heads WHERE org_id = $1`

func scanHead(row pgx.Row, orgID string) (ledger.Head, error) {
	var h ledger.Head
	var seq int64
	err := row.Scan(&seq, &h.EntryHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Head{}, nil
	}
	if err != nil {
		return ledger.Head{}, fmt.Errorf("pgstore: read ledger head of %q: %w", orgID, err)
	}
	h.Seq = uint64(seq)
	return h, nil
}

// readTreeHashes returns the org's tree hashes at indexes, in order, in one
// statement; a missing one is store.ErrNotFound.
func readTreeHashes(ctx context.Context, q querier, orgID string, indexes []int64) ([]tlog.Hash, error) {
	if len(indexes) == 0 {
		return []tlog.Hash{}, nil
	}
	rows, err := q.Query(ctx, `SELECT idx, hash FROM ledger_hashes WHERE org_id = $1 AND idx = ANY($2::bigint[])`, orgID, indexes)
	if err != nil {
		return nil, fmt.Errorf("pgstore: read tree hashes of %q: %w", orgID, err)
	}
	got := make(map[int64][]byte, len(indexes))
	for rows.Next() {
		var idx int64
		var h []byte
		if err := rows.Scan(&idx, &h); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: read tree hashes of %q: %w", orgID, err)
		}
		got[idx] = h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: read tree hashes of %q: %w", orgID, err)
	}
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		h, ok := got[x]
		if !ok {
			return nil, notFound("tree hash %d of %q", x, orgID)
		}
		if len(h) != tlog.HashSize {
			return nil, fmt.Errorf("pgstore: corrupt tree hash %d of %q", x, orgID)
		}
		copy(out[i][:], h)
	}
	return out, nil
}

const checkpointColumns = `tree_size, origin, root_hash, note`

func scanCheckpoint(row pgx.Row) (ledger.Checkpoint, error) {
	var c ledger.Checkpoint
	var size int64
	var origin, root []byte
	if err := row.Scan(&size, &origin, &root, &c.Note); err != nil {
		return ledger.Checkpoint{}, err
	}
	if size < 0 || len(root) != tlog.HashSize {
		return ledger.Checkpoint{}, errors.New("pgstore: corrupt checkpoint row")
	}
	c.Size, c.Origin = uint64(size), string(origin)
	copy(c.Root[:], root)
	if c.Note == nil {
		c.Note = []byte{}
	}
	return c, nil
}

// readLatestCheckpoint returns the org's largest checkpoint, the zero
// Checkpoint when it has none.
func readLatestCheckpoint(ctx context.Context, q querier, orgID string) (ledger.Checkpoint, error) {
	c, err := scanCheckpoint(q.QueryRow(ctx, `SELECT `+checkpointColumns+` FROM ledger_checkpoints
		WHERE org_id = $1 ORDER BY tree_size DESC LIMIT 1`, orgID))
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Checkpoint{}, nil
	}
	if err != nil {
		return ledger.Checkpoint{}, fmt.Errorf("pgstore: read latest checkpoint of %q: %w", orgID, err)
	}
	return c, nil
}

func readCheckpoint(ctx context.Context, q querier, orgID string, size uint64) (ledger.Checkpoint, error) {
	if size > math.MaxInt64 {
		return ledger.Checkpoint{}, fmt.Errorf("pgstore: checkpoint of size %d of %q: %w (%w)", size, orgID, ledger.ErrCheckpointNotFound, store.ErrNotFound)
	}
	c, err := scanCheckpoint(q.QueryRow(ctx, `SELECT `+checkpointColumns+` FROM ledger_checkpoints
		WHERE org_id = $1 AND tree_size = $2`, orgID, int64(size)))
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Checkpoint{}, fmt.Errorf("pgstore: checkpoint of size %d of %q: %w (%w)", size, orgID, ledger.ErrCheckpointNotFound, store.ErrNotFound)
	}
	if err != nil {
		return ledger.Checkpoint{}, fmt.Errorf("pgstore: read checkpoint of %q: %w", orgID, err)
	}
	return c, nil
}

func readEntries(ctx context.Context, q querier, orgID string, afterSeq uint64, limit int) ([]ledger.Entry, error) {
	if limit <= 0 || afterSeq >= math.MaxInt64 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `
		SELECT seq, kind, subject_id, payload_digest, recorded_at, prev_entry_hash, entry_hash
		FROM ledger_entries WHERE org_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
		orgID, int64(afterSeq), int64(limit))
	if err != nil {
		return nil, fmt.Errorf("pgstore: read ledger of %q: %w", orgID, err)
	}
	var out []ledger.Entry
	for rows.Next() {
		e := ledger.Entry{OrgID: orgID}
		var seq int64
		if err := rows.Scan(&seq, &e.Kind, &e.SubjectID, &e.PayloadDigest, &e.RecordedAt, &e.PrevEntryHash, &e.EntryHash); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: read ledger of %q: %w", orgID, err)
		}
		e.Seq = uint64(seq)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: read ledger of %q: %w", orgID, err)
	}
	return out, nil
}

const bundleColumns = `bundle_id, version, seq, digest, mode, rule_count, published_at, body`

func scanBundle(row pgx.Row, orgID string, format string, args ...any) (store.BundleRecord, error) {
	b := store.BundleRecord{OrgID: orgID}
	var seq, rules int64
	if err := scanOne(row, []any{&b.BundleID, &b.Version, &seq, &b.Digest, &b.Mode, &rules, &b.PublishedAt, &b.Body}, format, args...); err != nil {
		return store.BundleRecord{}, err
	}
	b.Seq, b.RuleCount, b.PublishedAt = uint64(seq), int(rules), b.PublishedAt.UTC()
	if len(b.Body) == 0 {
		b.Body = nil
	}
	return b, nil
}

func readBundle(ctx context.Context, q querier, orgID, version string) (store.BundleRecord, error) {
	return scanBundle(q.QueryRow(ctx, `SELECT `+bundleColumns+` FROM bundles WHERE org_id = $1 AND version = $2`, orgID, version),
		orgID, "bundle %q of org %q", version, orgID)
}

func readLatestBundle(ctx context.Context, q querier, orgID string) (store.BundleRecord, error) {
	return scanBundle(q.QueryRow(ctx, `SELECT `+bundleColumns+` FROM bundles WHERE org_id = $1 ORDER BY seq DESC LIMIT 1`, orgID),
		orgID, "no bundle in org %q", orgID)
}

func readActivation(ctx context.Context, q querier, orgID string) (store.Activation, error) {
	return scanActivation(q.QueryRow(ctx, selectActivation, orgID), orgID)
}

const selectActivation = `SELECT version, activated_at, ledger_seq FROM policy_activations WHERE org_id = $1`

func scanActivation(row pgx.Row, orgID string) (store.Activation, error) {
	a := store.Activation{OrgID: orgID}
	var seq int64
	err := scanOne(row, []any{&a.Version, &a.ActivatedAt, &seq}, "activation of org %q", orgID)
	if err != nil {
		return store.Activation{}, err
	}
	a.ActivatedAt, a.LedgerSeq = a.ActivatedAt.UTC(), uint64(seq)
	return a, nil
}

func readBundles(ctx context.Context, q querier, orgID string) ([]store.BundleRecord, error) {
	rows, err := q.Query(ctx, `SELECT `+bundleColumns+` FROM bundles WHERE org_id = $1 ORDER BY seq`, orgID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list bundles of %q: %w", orgID, err)
	}
	defer rows.Close()
	var out []store.BundleRecord
	for rows.Next() {
		b, err := scanBundle(rows, orgID, "bundle of org %q", orgID)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list bundles of %q: %w", orgID, err)
	}
	return out, nil
}

const dossierColumns = `dossier_id, decision_id, evaluation_id, created_at, outcome, mode, workflow_key, decision_type, body`

func scanDossier(row pgx.Row, orgID string, format string, args ...any) (dossier.Stored, error) {
	r, err := scanDossierRow(row, orgID)
	if errors.Is(err, pgx.ErrNoRows) {
		return dossier.Stored{}, notFound(format, args...)
	}
	if err != nil {
		return dossier.Stored{}, fmt.Errorf("pgstore: read %s: %w", fmt.Sprintf(format, args...), err)
	}
	return r, nil
}

// scanDossierRow reads one row of dossierColumns.
func scanDossierRow(row pgx.Row, orgID string) (dossier.Stored, error) {
	r := dossier.Stored{OrgID: orgID}
	err := row.Scan(&r.DossierID, &r.DecisionID, &r.EvaluationID, &r.CreatedAt, &r.Outcome, &r.Mode,
		&r.WorkflowKey, &r.DecisionType, &r.Body)
	if err != nil {
		return dossier.Stored{}, err
	}
	r.CreatedAt = r.CreatedAt.UTC()
	if len(r.Body) == 0 {
		r.Body = nil
	}
	return r, nil
}

func readDossier(ctx context.Context, q querier, orgID, dossierID string) (dossier.Stored, error) {
	return scanDossier(q.QueryRow(ctx, `SELECT `+dossierColumns+` FROM dossiers WHERE org_id = $1 AND dossier_id = $2`, orgID, dossierID),
		orgID, "dossier %q of org %q", dossierID, orgID)
}

func readDossierByDecision(ctx context.Context, q querier, orgID, decisionID string) (dossier.Stored, error) {
	return scanDossier(q.QueryRow(ctx, `SELECT `+dossierColumns+` FROM dossiers WHERE org_id = $1 AND decision_id = $2`, orgID, decisionID),
		orgID, "dossier of decision %q in org %q", decisionID, orgID)
}

func readIdempotency(ctx context.Context, q querier, orgID, scope, key string) (store.IdempotencyRecord, error) {
	r := store.IdempotencyRecord{OrgID: orgID, Scope: scope, Key: key}
	err := scanOne(q.QueryRow(ctx, `SELECT request_digest, response, created_at FROM idempotency
		WHERE org_id = $1 AND scope = $2 AND idem_key = $3`, orgID, scope, key),
		[]any{&r.RequestDigest, &r.Response, &r.CreatedAt}, "idempotency key in scope %q of org %q", scope, orgID)
	if err != nil {
		return store.IdempotencyRecord{}, orDomain(err, idempotency.ErrNotFound)
	}
	r.CreatedAt = r.CreatedAt.UTC()
	if len(r.Response) == 0 {
		r.Response = nil
	}
	return r, nil
}

// Reader methods: each statement reads committed data on a pooled
// connection.

// Org implements tenant.Reader.
func (s *Store) Org(ctx context.Context, orgID string) (tenant.Org, error) {
	if err := s.enter(ctx); err != nil {
		return tenant.Org{}, err
	}
	return readOrg(ctx, s.rd, orgID)
}

// Orgs implements tenant.Reader: orgs in org_id order (the primary key).
func (s *Store) Orgs(ctx context.Context, afterID string, limit int) ([]tenant.Org, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return []tenant.Org{}, nil
	}
	rows, err := s.rd.Query(ctx, `SELECT org_id, name, created_at FROM orgs WHERE org_id > $1 ORDER BY org_id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list orgs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (tenant.Org, error) {
		var o tenant.Org
		err := row.Scan(&o.ID, &o.Name, &o.CreatedAt)
		o.CreatedAt = o.CreatedAt.UTC()
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: list orgs: %w", err)
	}
	return out, nil
}

// APIKeysOf implements tenant.Reader (index api_keys_org).
func (s *Store) APIKeysOf(ctx context.Context, orgID string) ([]tenant.APIKey, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := s.rd.Query(ctx, `SELECT hash FROM api_keys WHERE org_id = $1`, orgID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list api keys: %w", err)
	}
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgstore: list api keys: %w", err)
	}
	out := make([]tenant.APIKey, 0, len(hashes))
	for _, h := range hashes {
		k, err := readAPIKey(ctx, s.rd, h)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b tenant.APIKey) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// APIKeyByHash implements tenant.Reader.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (tenant.APIKey, error) {
	if err := s.enter(ctx); err != nil {
		return tenant.APIKey{}, err
	}
	return readAPIKey(ctx, s.rd, hash)
}

// LedgerEntries implements ledger.Reader. A limit <= 0 returns no entries.
func (s *Store) LedgerEntries(ctx context.Context, orgID string, afterSeq uint64, limit int) ([]ledger.Entry, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	return readEntries(ctx, s.rd, orgID, afterSeq, limit)
}

// LedgerHashes implements ledger.TreeReader.
func (s *Store) LedgerHashes(ctx context.Context, orgID string, indexes []int64) ([]tlog.Hash, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	return readTreeHashes(ctx, s.rd, orgID, indexes)
}

// LatestCheckpoint implements ledger.TreeReader.
func (s *Store) LatestCheckpoint(ctx context.Context, orgID string) (ledger.Checkpoint, error) {
	if err := s.enter(ctx); err != nil {
		return ledger.Checkpoint{}, err
	}
	return readLatestCheckpoint(ctx, s.rd, orgID)
}

// CheckpointAt implements ledger.TreeReader.
func (s *Store) CheckpointAt(ctx context.Context, orgID string, size uint64) (ledger.Checkpoint, error) {
	if err := s.enter(ctx); err != nil {
		return ledger.Checkpoint{}, err
	}
	return readCheckpoint(ctx, s.rd, orgID, size)
}

// LedgerHeadOf implements ledger.Reader.
func (s *Store) LedgerHeadOf(ctx context.Context, orgID string) (ledger.Head, error) {
	if err := s.enter(ctx); err != nil {
		return ledger.Head{}, err
	}
	return readHead(ctx, s.rd, orgID)
}

// Dossier implements dossier.Reader.
func (s *Store) Dossier(ctx context.Context, orgID, dossierID string) (dossier.Stored, error) {
	if err := s.enter(ctx); err != nil {
		return dossier.Stored{}, err
	}
	return readDossier(ctx, s.rd, orgID, dossierID)
}

// DossierByDecision implements dossier.Reader.
func (s *Store) DossierByDecision(ctx context.Context, orgID, decisionID string) (dossier.Stored, error) {
	if err := s.enter(ctx); err != nil {
		return dossier.Stored{}, err
	}
	return readDossierByDecision(ctx, s.rd, orgID, decisionID)
}

// DossierSummaries implements dossier.Reader: the index on (org_id,
// created_at, dossier_id), read in pages; dossiers created at the same
// instant come in dossier id order (bytewise).
func (s *Store) DossierSummaries(ctx context.Context, orgID string, from, to time.Time, fn func(dossier.Summary) bool) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	return pageDossiers(ctx, s.rd, orgID, from, to,
		`dossier_id, decision_id, created_at, outcome, mode, workflow_key, decision_type`,
		func(r pgx.CollectableRow) (dossier.Summary, error) {
			var s dossier.Summary
			err := r.Scan(&s.DossierID, &s.DecisionID, &s.CreatedAt, &s.Outcome, &s.Mode, &s.WorkflowKey, &s.DecisionType)
			s.CreatedAt = s.CreatedAt.UTC()
			return s, err
		},
		func(s dossier.Summary) (time.Time, string) { return s.CreatedAt, s.DossierID },
		fn)
}

// Dossiers implements dossier.Reader: DossierSummaries' pages, with every
// column Dossier reads. Each page is its own snapshot, as for
// DossierSummaries; dossiers are write-once, so a scan never sees one
// changed, only (past its cursor) one committed while it runs.
func (s *Store) Dossiers(ctx context.Context, orgID string, from, to time.Time, fn func(dossier.Stored) bool) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	return pageDossiers(ctx, s.rd, orgID, from, to, dossierColumns,
		func(r pgx.CollectableRow) (dossier.Stored, error) { return scanDossierRow(r, orgID) },
		func(r dossier.Stored) (time.Time, string) { return r.CreatedAt, r.DossierID },
		fn)
}

// pageDossiers calls fn for the org's dossiers created in [from, to) in
// (created_at, dossier_id) order, reading columns pageSize rows per
// statement (keyset paging on the dossiers_created index); cursor returns
// a row's place in that order.
func pageDossiers[T any](ctx context.Context, q querier, orgID string, from, to time.Time, columns string,
	scanRow func(pgx.CollectableRow) (T, error), cursor func(T) (time.Time, string), fn func(T) bool) error {
	if !from.Before(to) {
		return nil
	}
	var (
		afterAt time.Time
		afterID string
		first   = true
	)
	for {
		var rows pgx.Rows
		var err error
		if first {
			rows, err = q.Query(ctx, `
				SELECT `+columns+` FROM dossiers
				WHERE org_id = $1 AND created_at >= $2 AND created_at < $3
				ORDER BY created_at, dossier_id LIMIT $4`, orgID, from, to, pageSize)
		} else {
			rows, err = q.Query(ctx, `
				SELECT `+columns+` FROM dossiers
				WHERE org_id = $1 AND (created_at, dossier_id) > ($2, $3) AND created_at < $4
				ORDER BY created_at, dossier_id LIMIT $5`, orgID, afterAt, afterID, to, pageSize)
		}
		if err != nil {
			return fmt.Errorf("pgstore: list dossiers of %q: %w", orgID, err)
		}
		page, err := pgx.CollectRows(rows, scanRow)
		if err != nil {
			return fmt.Errorf("pgstore: list dossiers of %q: %w", orgID, err)
		}
		for _, row := range page {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !fn(row) {
				return nil
			}
		}
		if len(page) < pageSize {
			return nil
		}
		afterAt, afterID = cursor(page[len(page)-1])
		first = false
	}
}

// Bundle implements store.Reader.
func (s *Store) Bundle(ctx context.Context, orgID, version string) (store.BundleRecord, error) {
	if err := s.enter(ctx); err != nil {
		return store.BundleRecord{}, err
	}
	return readBundle(ctx, s.rd, orgID, version)
}

// LatestBundle implements store.Reader.
func (s *Store) LatestBundle(ctx context.Context, orgID string) (store.BundleRecord, error) {
	if err := s.enter(ctx); err != nil {
		return store.BundleRecord{}, err
	}
	return readLatestBundle(ctx, s.rd, orgID)
}

// Activation implements store.Reader.
func (s *Store) Activation(ctx context.Context, orgID string) (store.Activation, error) {
	if err := s.enter(ctx); err != nil {
		return store.Activation{}, err
	}
	return readActivation(ctx, s.rd, orgID)
}

// Bundles implements store.Reader.
func (s *Store) Bundles(ctx context.Context, orgID string) ([]store.BundleRecord, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	return readBundles(ctx, s.rd, orgID)
}
