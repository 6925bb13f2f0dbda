package pgstore

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Deadlines (Options.Timeout). Nothing else bounds a database call: a
// connection whose packets are dropped waits until TCP gives up (about 15
// minutes on Linux). When a deadline ends a call mid-I/O, pgx closes the
// connection (a read or write that timed out leaves the protocol state
// unknown) and the pool discards it on release, so an interrupted
// connection is never reused.

// maxSettle caps the settlement of a COMMIT cut off without an answer.
const maxSettle = 2 * time.Second

// bound is ctx within the store's timeout (ctx itself when there is none),
// or within the longer bound the caller asked for (store.WithLongCall).
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := store.LongCall(ctx); ok && s.timeout > 0 {
		return withTimeout(ctx, max(d, s.timeout))
	}
	return withTimeout(ctx, s.timeout)
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// settleContext is the context a lost COMMIT is settled in: its own short
// deadline, since the transaction's may be what cut the COMMIT off. With
// no timeout configured it is ctx, as before deadlines existed.
func (s *Store) settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), min(s.timeout, maxSettle))
}

// earliestDeadline is the earliest of the members' deadlines; ok is false
// when one of them has none. The group's I/O ends there: a member whose
// function ran waits for the group, and must not wait past its own bound
// (plus a settlement) because a later member joined with a later one. A
// later member cut off early fails as the stuck group made it, or runs
// again if its COMMIT is known not to have happened.
func earliestDeadline(group []*member) (earliest time.Time, ok bool) {
	for i, m := range group {
		d, has := m.ctx.Deadline()
		if !has {
			return time.Time{}, false
		}
		if i == 0 || d.Before(earliest) {
			earliest = d
		}
	}
	return earliest, true
}

// boundedPool is the pool as the Reader methods use it: each statement
// within timeout (until its rows are closed or its row scanned).
type boundedPool struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

var _ querier = boundedPool{}

func (b boundedPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	ctx, cancel := withTimeout(ctx, b.timeout)
	defer cancel()
	return b.pool.Exec(ctx, sql, args...)
}

func (b boundedPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	ctx, cancel := withTimeout(ctx, b.timeout)
	rows, err := b.pool.Query(ctx, sql, args...)
	if err != nil {
		cancel()
		return nil, err
	}
	return &boundedRows{Rows: rows, cancel: cancel}, nil
}

func (b boundedPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	ctx, cancel := withTimeout(ctx, b.timeout)
	return boundedRow{row: b.pool.QueryRow(ctx, sql, args...), cancel: cancel}
}

// boundedRows ends its deadline once the rows are done.
type boundedRows struct {
	pgx.Rows
	cancel context.CancelFunc
}

func (r *boundedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.cancel() // the rows closed themselves
	return false
}

func (r *boundedRows) Close() {
	r.Rows.Close()
	r.cancel()
}

// boundedRow ends its deadline once scanned.
type boundedRow struct {
	row    pgx.Row
	cancel context.CancelFunc
}

func (r boundedRow) Scan(dest ...any) error {
	defer r.cancel()
	return r.row.Scan(dest...)
}
