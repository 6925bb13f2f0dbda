package lincheck

import (
	"context"
	"github.com/clearancehq/clearance/store/pgstore/pgtest"
	"testing"
	"time"

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

// openPostgres opens a pgstore in a fresh random schema, dropped when the
// test ends; it skips the test when PostgreSQL is unreachable, or fails it
// when CLEARANCE_REQUIRE_POSTGRES=1 (pgtest).
func openPostgres(t *testing.T) store.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	schema := pgtest.NewSchema(t, "lincheck_")
	url := pgtest.URL()
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
