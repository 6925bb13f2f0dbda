package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clearancehq/clearance/store/pgstore"
)

const defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testURL is CLEARANCE_TEST_POSTGRES or the default local database.
func testURL() string {
	if u := os.Getenv("CLEARANCE_TEST_POSTGRES"); u != "" {
		return u
	}
	return defaultURL
}

var (
	adminOnce sync.Once
	admin     *pgxpool.Pool // creates and drops the tests' schemas
	adminErr  error
)

// needDB returns the admin pool, skipping the test when the database is
// unreachable — or failing it when CLEARANCE_REQUIRE_POSTGRES=1.
func needDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	adminOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cfg, err := pgxpool.ParseConfig(testURL())
		if err != nil {
			adminErr = err
			return
		}
		cfg.MaxConns = 4
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err == nil {
			err = p.Ping(ctx)
		}
		if err != nil {
			if p != nil {
				p.Close()
			}
			adminErr = err
			return
		}
		admin = p
	})
	if adminErr != nil {
		if os.Getenv("CLEARANCE_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("PostgreSQL at %s is required (CLEARANCE_REQUIRE_POSTGRES=1): %v", testURL(), adminErr)
		}
		t.Skipf("PostgreSQL at %s unreachable (set CLEARANCE_TEST_POSTGRES): %v", testURL(), adminErr)
	}
	return admin
}

// newSchema creates a fresh schema with a random name, dropped (with
// everything in it) when the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	a := needDB(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "pgstore_test_" + hex.EncodeToString(b[:])
	if _, err := a.Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := a.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

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
