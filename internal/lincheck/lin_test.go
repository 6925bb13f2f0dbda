package lincheck

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pgstore"
)

// TestLinPebble: the engine in-process over Pebble.
func TestLinPebble(t *testing.T) {
	x := newEngineSys(t, openPebble(t))
	s := runLin(t, x, defaultConfig(t))
	x.requireNoSurprises(t)
	wantExercised(t, s)
}

// TestLinHTTP: the HTTP API (httptest) over Pebble; a cancelled request is
// an HTTP call whose answer was lost.
func TestLinHTTP(t *testing.T) {
	x := newHTTPSys(t, openPebble(t))
	cfg := defaultConfig(t)
	cfg.cancelMax = 3 * time.Millisecond
	s := runLin(t, x, cfg)
	x.requireNoSurprises(t)
	wantExercised(t, s)
}

// TestLinPostgres: the engine in-process over PostgreSQL, in a fresh
// schema; skipped when the database is unreachable unless
// CLEARANCE_REQUIRE_POSTGRES=1.
func TestLinPostgres(t *testing.T) {
	x := newEngineSys(t, openPostgres(t))
	s := runLin(t, x, defaultConfig(t))
	x.requireNoSurprises(t)
	wantExercised(t, s)
}

// wantExercised fails a recording in which nothing was claimed and
// finalized: a history of refusals proves little.
func wantExercised(t *testing.T, s stats) {
	t.Helper()
	if s.claimsOK == 0 || s.finalizesOK == 0 {
		t.Errorf("a degenerate recording: %s", s)
	}
}

// postgresURL is CLEARANCE_TEST_POSTGRES or the default local database.
func postgresURL() string {
	if u := os.Getenv("CLEARANCE_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// openPostgres opens a pgstore in a fresh random schema, dropped when the
// test ends; it skips the test when PostgreSQL is unreachable, or fails it
// when CLEARANCE_REQUIRE_POSTGRES=1.
func openPostgres(t *testing.T) store.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := postgresURL()
	admin, err := pgxpool.New(ctx, url)
	if err == nil {
		if err = admin.Ping(ctx); err != nil {
			admin.Close()
		}
	}
	if err != nil {
		if os.Getenv("CLEARANCE_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("PostgreSQL at %s is required (CLEARANCE_REQUIRE_POSTGRES=1): %v", url, err)
		}
		t.Skipf("PostgreSQL at %s unreachable (set CLEARANCE_TEST_POSTGRES): %v", url, err)
	}
	t.Cleanup(admin.Close)
	schema := "lincheck_" + randHex(6)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	st, err := pgstore.Open(ctx, url, pgstore.Options{Schema: schema, MaxConns: 16, Now: fixedClock})
	if err != nil {
		t.Fatalf("pgstore: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return st
}
