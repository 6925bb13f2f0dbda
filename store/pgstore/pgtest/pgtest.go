// Package pgtest is the PostgreSQL plumbing shared by Clearance's tests:
// which database to use, skipping (or failing) when it is unreachable, and
// one fresh schema per test.
//
// The database is CLEARANCE_TEST_POSTGRES (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable). When it cannot be
// reached, tests skip — unless CLEARANCE_REQUIRE_POSTGRES=1, when they fail.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is the database used when CLEARANCE_TEST_POSTGRES is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL is CLEARANCE_TEST_POSTGRES or DefaultURL.
func URL() string {
	if u := os.Getenv("CLEARANCE_TEST_POSTGRES"); u != "" {
		return u
	}
	return DefaultURL
}

var (
	adminOnce sync.Once
	admin     *pgxpool.Pool
	adminErr  error
)

// Admin returns a small pool for creating, editing and dropping schemas. It
// skips t when the database is unreachable, or fails it when
// CLEARANCE_REQUIRE_POSTGRES=1.
func Admin(t testing.TB) *pgxpool.Pool {
	t.Helper()
	adminOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cfg, err := pgxpool.ParseConfig(URL())
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
			t.Fatalf("PostgreSQL at %s is required (CLEARANCE_REQUIRE_POSTGRES=1): %v", URL(), adminErr)
		}
		t.Skipf("PostgreSQL at %s unreachable (set CLEARANCE_TEST_POSTGRES): %v", URL(), adminErr)
	}
	return admin
}

// NewSchema creates a schema named prefix + random hex and drops it, with
// everything in it, when t ends (cleanups run last-registered first, so
// register it before anything that must close first).
func NewSchema(t testing.TB, prefix string) string {
	t.Helper()
	a := Admin(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := prefix + hex.EncodeToString(b[:])
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

// SchemaURL returns URL() with search_path set to schema, for processes
// that only take a URL (pgx passes unknown parameters to the server).
func SchemaURL(t testing.TB, schema string) string {
	t.Helper()
	u, err := url.Parse(URL())
	if err != nil {
		t.Fatalf("CLEARANCE_TEST_POSTGRES: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
