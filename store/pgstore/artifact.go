package pgstore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/store"
)

// Artifacts live in one table (migrations/0003_artifacts.sql):
//
//	artifacts(org_id, kind, id), INDEX(org_id, kind, ref, created_at, id)
//
// The index serves ArtifactsByRef; a replace is one INSERT … ON CONFLICT DO
// UPDATE, so it follows the row. (The index across orgs of 0003 and 0004 is
// dropped by 0009: such work is a job now.)
// Every argument is checked (artifact.Validate and friends) before a
// statement is sent: a NUL or invalid UTF-8 in a text parameter would
// otherwise fail the statement and abort the Update's transaction.

var (
	_ artifact.Tx     = (*tx)(nil)
	_ artifact.Reader = (*Store)(nil)
)

const artifactColumns = `org_id, kind, id, ref, created_at, body`

func scanArtifact(row pgx.Row, format string, args ...any) (artifact.Record, error) {
	var r artifact.Record
	if err := scanOne(row, []any{&r.OrgID, &r.Kind, &r.ID, &r.Ref, &r.CreatedAt, &r.Body}, format, args...); err != nil {
		return artifact.Record{}, err
	}
	r.CreatedAt = r.CreatedAt.UTC()
	if len(r.Body) == 0 {
		r.Body = nil
	}
	return r, nil
}

func readArtifact(ctx context.Context, q querier, orgID, kind, id string) (artifact.Record, error) {
	return scanArtifact(q.QueryRow(ctx, `SELECT `+artifactColumns+` FROM artifacts WHERE org_id = $1 AND kind = $2 AND id = $3`,
		orgID, kind, id), "%s artifact %q of org %q", kind, id, orgID)
}

func readArtifacts(ctx context.Context, q querier, what, sql string, args ...any) ([]artifact.Record, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list %s: %w", what, err)
	}
	defer rows.Close()
	var out []artifact.Record
	for rows.Next() {
		r, err := scanArtifact(rows, "%s", what)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list %s: %w", what, err)
	}
	return out, nil
}

// sqlLimit maps a listing's limit (<= 0: all) to a LIMIT value.
func sqlLimit(limit int) int64 {
	if limit <= 0 {
		return math.MaxInt64
	}
	return int64(limit)
}

// PutArtifact implements artifact.Tx; it replaces a record with the same
// kind and id.
func (t *tx) PutArtifact(ctx context.Context, r artifact.Record) error {
	if err := r.ValidateFor(t.org); err != nil {
		return err
	}
	body := r.Body
	if body == nil {
		body = []byte{}
	}
	if r.Kind == store.DataProtectionKind && r.ID == store.DataProtectionID {
		t.mu.Lock()
		t.orgNow.protection = append([]byte(nil), r.Body...)
		t.mu.Unlock()
	}
	return t.queue(ctx, wrapped(fmt.Sprintf("put %s artifact %q", r.Kind, r.ID)), `
		INSERT INTO artifacts (`+artifactColumns+`) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (org_id, kind, id) DO UPDATE SET ref = excluded.ref, created_at = excluded.created_at, body = excluded.body`,
		t.org, r.Kind, r.ID, r.Ref, r.CreatedAt.Truncate(time.Microsecond), body)
}

// ArtifactInTx implements artifact.Tx.
func (t *tx) ArtifactInTx(ctx context.Context, kind, id string) (artifact.Record, error) {
	if err := artifact.ValidateKey(t.org, kind, id); err != nil {
		return artifact.Record{}, err
	}
	if err := t.lock(ctx); err != nil {
		return artifact.Record{}, err
	}
	defer t.mu.Unlock()
	return readArtifact(t.ctx, t.conn, t.org, kind, id)
}

// Artifact implements artifact.Reader.
func (s *Store) Artifact(ctx context.Context, orgID, kind, id string) (artifact.Record, error) {
	if err := artifact.ValidateKey(orgID, kind, id); err != nil {
		return artifact.Record{}, err
	}
	if err := s.enter(ctx); err != nil {
		return artifact.Record{}, err
	}
	return readArtifact(ctx, s.rd, orgID, kind, id)
}

// ArtifactsByRef implements artifact.Reader: one ordered statement on the
// (org_id, kind, ref, created_at, id) index.
func (s *Store) ArtifactsByRef(ctx context.Context, orgID, kind, ref string, limit int) ([]artifact.Record, error) {
	if err := artifact.ValidateRef(orgID, kind, ref); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	return readArtifacts(ctx, s.rd, fmt.Sprintf("%s artifacts of ref %q in org %q", kind, ref, orgID), `
		SELECT `+artifactColumns+` FROM artifacts WHERE org_id = $1 AND kind = $2 AND ref = $3
		ORDER BY created_at, id LIMIT $4`, orgID, kind, ref, sqlLimit(limit))
}

// DeleteArtifact implements artifact.Tx: one DELETE, sent before it
// answers (the caller learns whether there was a record).
func (t *tx) DeleteArtifact(ctx context.Context, kind, id string) (bool, error) {
	if err := artifact.ValidateKey(t.org, kind, id); err != nil {
		return false, err
	}
	var deleted bool
	if err := t.queue(ctx, func(tag pgconn.CommandTag, err error) error {
		if err != nil {
			return fmt.Errorf("pgstore: delete %s artifact %q: %w", kind, id, err)
		}
		deleted = tag.RowsAffected() == 1
		return nil
	}, `DELETE FROM artifacts WHERE org_id = $1 AND kind = $2 AND id = $3`, t.org, kind, id); err != nil {
		return false, err
	}
	if err := t.lock(ctx); err != nil { // sends the delete
		return false, err
	}
	defer t.mu.Unlock()
	if kind == store.DataProtectionKind && id == store.DataProtectionID {
		t.orgNow.protection = nil
	}
	return deleted, nil
}

// selectProtection is read with the org's lock (lockOrg).
const selectProtection = `SELECT body FROM artifacts WHERE org_id = $1 AND kind = '` + store.DataProtectionKind +
	`' AND id = '` + store.DataProtectionID + `'`

// DataProtectionInTx implements store.Tx: as read with the org's lock and
// kept as the transaction writes it.
func (t *tx) DataProtectionInTx(ctx context.Context) ([]byte, error) {
	if err := t.lock(ctx); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	return t.orgNow.protection, nil
}
