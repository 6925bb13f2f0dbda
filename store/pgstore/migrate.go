package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one embedded migrations/NNNN_name.sql file.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order; versions
// run 1, 2, 3… without gaps.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, file := range names { // fs.Glob sorts
		base := strings.TrimSuffix(path.Base(file), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != len(out)+1 {
			return nil, fmt.Errorf("pgstore: migration file %s: want %04d_<name>.sql", file, len(out)+1)
		}
		body, err := migrationFiles.ReadFile(file)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(body)})
	}
	return out, nil
}

// Migrate applies the embedded migrations that the database lacks. It is
// idempotent, and safe when several processes start at once: they
// serialize on the lock row (version 0) of schema_migrations, taken with
// SELECT … FOR UPDATE, which PostgreSQL and CockroachDB both provide (no
// advisory lock). Each pending migration runs with its version row in the
// lock's transaction, so a migration is applied completely or not at all.
// A database migrated by a newer build (a version this build does not know)
// is refused. Open calls Migrate.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	all, err := migrations()
	if err != nil {
		return err
	}
	if err := s.ensureMigrationTable(ctx); err != nil {
		return err
	}
	cockroach, err := s.isCockroach(ctx)
	if err != nil {
		return err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT version FROM schema_migrations WHERE version = 0 FOR UPDATE`); err != nil {
		return fmt.Errorf("pgstore: migrate: lock: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations WHERE version > 0`)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		if int(v) > len(all) {
			return fmt.Errorf("pgstore: the database has schema version %d; this build knows up to %d", v, len(all))
		}
		applied[int(v)] = true
	}
	for _, m := range all {
		if applied[m.version] {
			continue
		}
		sql := m.sql
		if cockroach {
			// CockroachDB strings compare bytewise already, and it refuses
			// COLLATE "C" on a column.
			sql = strings.ReplaceAll(sql, ` COLLATE "C"`, "")
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			return fmt.Errorf("pgstore: migration %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return fmt.Errorf("pgstore: migration %04d_%s: %w", m.version, m.name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: migrate: commit: %w", err)
	}
	return nil
}

// ensureMigrationTable creates schema_migrations and its lock row. Two
// processes creating the table at once can collide in the catalog despite
// IF NOT EXISTS (catalogRaces); the loser tries again.
// catalogRaces are the errors of a concurrent CREATE TABLE IF NOT EXISTS:
// unique_violation (23505) in pg_type, duplicate_table (42P07),
// duplicate_object (42710), and a serialization failure (40001).
var catalogRaces = []string{"23505", "42P07", "42710", "40001"}

func (s *Store) ensureMigrationTable(ctx context.Context) error {
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer NOT NULL PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
	)`
	var err error
	for range 5 {
		if _, err = s.pool.Exec(ctx, create); err == nil {
			break
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || !slices.Contains(catalogRaces, pgErr.Code) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("pgstore: migrate: create schema_migrations: %w", err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (0, 'lock') ON CONFLICT (version) DO NOTHING`)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: lock row: %w", err)
	}
	return nil
}

func (s *Store) isCockroach(ctx context.Context) (bool, error) {
	var v string
	if err := s.pool.QueryRow(ctx, `SELECT version()`).Scan(&v); err != nil {
		return false, fmt.Errorf("pgstore: migrate: %w", err)
	}
	return strings.Contains(v, "CockroachDB"), nil
}
