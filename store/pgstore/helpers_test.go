package pgstore_test

import (
	"context"
	"github.com/clearancehq/clearance/store/pgstore/pgtest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clearancehq/clearance/store/pgstore"
)

// testURL is the database the tests use (pgtest.URL).
func testURL() string { return pgtest.URL() }

// needDB returns the admin pool (pgtest.Admin): it skips the test when the
// database is unreachable, or fails it when CLEARANCE_REQUIRE_POSTGRES=1.
func needDB(t testing.TB) *pgxpool.Pool { return pgtest.Admin(t) }

// newSchema creates a fresh schema, dropped when the test ends.
func newSchema(t testing.TB) string { return pgtest.NewSchema(t, "pgstore_test_") }

// openIn opens a store on schema, closed when the test ends (before the
// schema is dropped).
func openIn(t testing.TB, schema string, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	opts.Schema = schema
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, testURL(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// open opens a store on a fresh schema.
func open(t testing.TB, opts pgstore.Options) (*pgstore.Store, string) {
	t.Helper()
	schema := newSchema(t)
	return openIn(t, schema, opts), schema
}

// raw runs sql in schema behind the store's back.
func raw(t testing.TB, schema, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := needDB(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// dbNow reads the database clock.
func dbNow(t testing.TB) time.Time {
	t.Helper()
	var now time.Time
	if err := needDB(t).QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}
