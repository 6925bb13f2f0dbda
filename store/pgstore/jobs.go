package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clearancehq/clearance/jobs"
)

// Jobs live in one table (migrations/0007_jobs.sql) with a partial index
// on (kind, due_at, org_id, id) of the jobs still to do, which DueJobs
// reads up to the database's clock_timestamp() (or Options.Now in tests).
// Every argument is checked before a statement is sent.

var (
	_ jobs.Tx     = (*tx)(nil)
	_ jobs.Reader = (*Store)(nil)
)

const jobColumns = `org_id, kind, id, payload, state, attempts, owner, lease_until, due_at, result, failure, created_at, updated_at`

func scanJob(row pgx.Row, format string, args ...any) (jobs.Job, error) {
	var j jobs.Job
	var lease, due *time.Time
	err := scanOne(row, []any{&j.OrgID, &j.Kind, &j.ID, &j.Payload, &j.State, &j.Attempts, &j.Owner, &lease, &due,
		&j.Result, &j.Failure, &j.CreatedAt, &j.UpdatedAt}, format, args...)
	if err != nil {
		return jobs.Job{}, orDomain(err, jobs.ErrNotFound)
	}
	if lease != nil {
		j.LeaseUntil = lease.UTC()
	}
	if due != nil {
		j.Due = due.UTC()
	}
	j.CreatedAt, j.UpdatedAt = j.CreatedAt.UTC(), j.UpdatedAt.UTC()
	if len(j.Payload) == 0 {
		j.Payload = nil
	}
	if len(j.Result) == 0 {
		j.Result = nil
	}
	return j, nil
}

func readJob(ctx context.Context, q querier, orgID, kind, id string) (jobs.Job, error) {
	return scanJob(q.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE org_id = $1 AND kind = $2 AND id = $3`,
		orgID, kind, id), "%s job %q of org %q", kind, id, orgID)
}

// nullTime is t to the microsecond, or NULL when zero.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC().Truncate(time.Microsecond)
	return &t
}

func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// PutJob implements jobs.Tx; it replaces a job with the same kind and id.
func (t *tx) PutJob(ctx context.Context, j jobs.Job) error {
	if err := j.ValidateFor(t.org); err != nil {
		return err
	}
	return t.queue(ctx, wrapped(fmt.Sprintf("put %s job %q", j.Kind, j.ID)), `
		INSERT INTO jobs (`+jobColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		ON CONFLICT (org_id, kind, id) DO UPDATE SET payload = excluded.payload, state = excluded.state,
			attempts = excluded.attempts, owner = excluded.owner, lease_until = excluded.lease_until,
			due_at = excluded.due_at, result = excluded.result, failure = excluded.failure,
			created_at = excluded.created_at, updated_at = excluded.updated_at`,
		t.org, j.Kind, j.ID, orEmpty(j.Payload), string(j.State), j.Attempts, j.Owner, nullTime(j.LeaseUntil), nullTime(j.Due),
		orEmpty(j.Result), j.Failure, nullTime(j.CreatedAt), nullTime(j.UpdatedAt))
}

// InsertJob implements jobs.Tx: an existing job fails the transaction.
func (t *tx) InsertJob(ctx context.Context, j jobs.Job) error {
	if err := j.ValidateFor(t.org); err != nil {
		return err
	}
	return t.queue(ctx, wrapped(fmt.Sprintf("insert %s job %q", j.Kind, j.ID)), `
		INSERT INTO jobs (`+jobColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		t.org, j.Kind, j.ID, orEmpty(j.Payload), string(j.State), j.Attempts, j.Owner, nullTime(j.LeaseUntil), nullTime(j.Due),
		orEmpty(j.Result), j.Failure, nullTime(j.CreatedAt), nullTime(j.UpdatedAt))
}

// JobInTx implements jobs.Tx.
func (t *tx) JobInTx(ctx context.Context, kind, id string) (jobs.Job, error) {
	if err := jobs.ValidateKey(t.org, kind, id); err != nil {
		return jobs.Job{}, err
	}
	if err := t.lock(ctx); err != nil {
		return jobs.Job{}, err
	}
	defer t.mu.Unlock()
	return readJob(t.ctx, t.conn, t.org, kind, id)
}

// Job implements jobs.Reader.
func (s *Store) Job(ctx context.Context, orgID, kind, id string) (jobs.Job, error) {
	if err := jobs.ValidateKey(orgID, kind, id); err != nil {
		return jobs.Job{}, err
	}
	if err := s.enter(ctx); err != nil {
		return jobs.Job{}, err
	}
	return readJob(ctx, s.rd, orgID, kind, id)
}

// DueJobs implements jobs.Reader: one ordered statement on the due index,
// judged by the database's clock_timestamp() unless Options.Now is set.
func (s *Store) DueJobs(ctx context.Context, kind string, limit int) ([]jobs.Job, error) {
	if err := jobs.ValidateKind(kind); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	var at *time.Time // NULL: the database clock
	if s.now != nil {
		at = nullTime(s.now())
	}
	rows, err := s.rd.Query(ctx, `
		SELECT `+jobColumns+` FROM jobs
		WHERE kind = $1 AND due_at IS NOT NULL AND due_at <= coalesce($2::timestamptz, clock_timestamp())
		ORDER BY due_at, org_id, id LIMIT $3`, kind, at, sqlLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("pgstore: list due %s jobs: %w", kind, err)
	}
	defer rows.Close()
	var out []jobs.Job
	for rows.Next() {
		j, err := scanJob(rows, "due %s job", kind)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list due %s jobs: %w", kind, err)
	}
	return out, nil
}
