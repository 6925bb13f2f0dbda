package pgstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pgstore"
	"github.com/clearancehq/clearance/store/storetest"
	"github.com/clearancehq/clearance/tenant"
)

// appendCounting appends one entry to org per run of fn and counts runs.
func appendCounting(ctx context.Context, s store.Backend, org string, runs *atomic.Int64) error {
	return s.Update(ctx, org, func(tx store.Tx) error {
		runs.Add(1)
		_, err := ledger.Append(ctx, tx, org, ledger.Record{Kind: ledger.KindDecision, SubjectID: "dec_1"}, at)
		return err
	})
}

// TestAmbiguousCommitThatCommitted loses the answer to a COMMIT that
// happened: Update finds the commit marker and reports success without
// running fn again.
func TestAmbiguousCommitThatCommitted(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{MaxConns: 1}) // settling needs no second connection
	var lost atomic.Bool
	pgstore.SetCommitHooks(s, nil, func(_ string, err error) error {
		if err == nil && !lost.Swap(true) {
			return errors.New("read tcp 127.0.0.1:5432: connection reset by peer")
		}
		return err
	})
	var runs atomic.Int64
	if err := appendCounting(t.Context(), s, "org_amb", &runs); err != nil {
		t.Fatalf("Update = %v; want success settled by the commit marker", err)
	}
	if !lost.Load() || runs.Load() != 1 {
		t.Fatalf("answer lost %v, fn ran %d times; want lost and 1", lost.Load(), runs.Load())
	}
	wantValid(t, s, "org_amb", 1)
}

// TestAmbiguousCommitThatDidNot kills the transaction's server process just
// before its COMMIT is sent: the COMMIT fails without an answer, the marker
// is absent, and Update runs fn again, so the effect lands exactly once.
func TestAmbiguousCommitThatDidNot(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{MaxConns: 1}) // settling needs no second connection
	a := needDB(t)
	var killed atomic.Bool
	pgstore.SetCommitHooks(s, func(_ string, conn *pgx.Conn) {
		if killed.Swap(true) {
			return
		}
		pid := conn.PgConn().PID()
		ctx := context.Background()
		if _, err := a.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Errorf("terminate backend: %v", err)
			return
		}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			var alive bool
			if err := a.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&alive); err != nil || !alive {
				return
			}
		}
		t.Errorf("backend %d still alive", pid)
	}, nil)
	var runs atomic.Int64
	if err := appendCounting(t.Context(), s, "org_amb", &runs); err != nil {
		t.Fatalf("Update = %v; want success on the second attempt", err)
	}
	if !killed.Load() || runs.Load() != 2 {
		t.Fatalf("killed %v, fn ran %d times; want killed and 2", killed.Load(), runs.Load())
	}
	wantValid(t, s, "org_amb", 1)
}

// TestAmbiguousCommitUnknown loses a COMMIT's answer when the context has
// ended, on a store without a timeout (so the settlement has only that
// context), so the marker cannot be read: Update says the outcome is
// unknown rather than guessing (here the commit did happen). With a
// timeout, see TestAmbiguousCommitSettlementTimesOut.
func TestAmbiguousCommitUnknown(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{Timeout: -1})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pgstore.SetCommitHooks(s, nil, func(_ string, err error) error {
		cancel()
		return errors.New("read tcp 127.0.0.1:5432: i/o timeout")
	})
	var runs atomic.Int64
	err := appendCounting(ctx, s, "org_amb", &runs)
	if !errors.Is(err, pgstore.ErrCommitUnknown) || runs.Load() != 1 {
		t.Fatalf("Update = %v after %d runs; want ErrCommitUnknown after 1", err, runs.Load())
	}
	wantValid(t, s, "org_amb", 1)
}

// TestAmbiguousCommitSettledAfterContextEnds loses a COMMIT's answer as
// the caller's context ends: the settlement has a deadline of its own, so
// it still reads the marker, and Update reports the commit (fn ran once).
func TestAmbiguousCommitSettledAfterContextEnds(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pgstore.SetCommitHooks(s, nil, func(_ string, err error) error {
		cancel()
		return errors.New("read tcp 127.0.0.1:5432: i/o timeout")
	})
	var runs atomic.Int64
	if err := appendCounting(ctx, s, "org_amb", &runs); err != nil || runs.Load() != 1 {
		t.Fatalf("Update = %v after %d runs; want the commit settled after 1", err, runs.Load())
	}
	wantValid(t, s, "org_amb", 1)
}

// TestAbortedTransactionDoesNotCommit: a statement error aborts the
// transaction; fn ignoring it and returning nil still fails the Update,
// and the writes before it are gone.
func TestAbortedTransactionDoesNotCommit(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{})
	ctx := t.Context()
	err := s.Update(ctx, "org_ab", func(tx store.Tx) error {
		if err := tx.PutOrg(ctx, tenant.Org{ID: "org_ab", Name: "A", CreatedAt: at}); err != nil {
			return err
		}
		// Text with a NUL byte is refused by PostgreSQL: the error aborts
		// the transaction. fn "forgets" to return it.
		_ = tx.PutAPIKey(ctx, tenant.APIKey{ID: "k", OrgID: "org_ab", Kind: tenant.KindOrg, Hash: "h\x00", CreatedAt: at})
		return nil
	})
	if err == nil {
		t.Fatal("Update committed a transaction that a statement error had aborted")
	}
	if _, err := s.Org(ctx, "org_ab"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Org after the failed Update = %v, want ErrNotFound", err)
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	t.Run("ConcurrentStarts", func(t *testing.T) {
		schema := newSchema(t)
		const starts = 6
		var wg sync.WaitGroup
		stores := make([]*pgstore.Store, starts)
		errs := make([]error, starts)
		for i := range starts {
			wg.Go(func() {
				stores[i], errs[i] = pgstore.Open(t.Context(), testURL(), pgstore.Options{Schema: schema, MaxConns: 2})
			})
		}
		wg.Wait()
		for i, s := range stores {
			if errs[i] != nil {
				t.Errorf("Open %d: %v", i, errs[i])
				continue
			}
			if err := s.Migrate(t.Context()); err != nil { // idempotent
				t.Errorf("second Migrate: %v", err)
			}
			s.Close()
		}
		var versions []int32
		rows, err := needDB(t).Query(t.Context(), "SELECT version FROM "+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+" ORDER BY version")
		if err == nil {
			versions, err = pgx.CollectRows(rows, pgx.RowTo[int32])
		}
		files, _ := filepath.Glob(filepath.Join("migrations", "*.sql"))
		ok := err == nil && len(files) > 0 && len(versions) == len(files)+1
		for i, v := range versions {
			ok = ok && v == int32(i)
		}
		if !ok {
			t.Fatalf("schema_migrations versions = %v, %v; want the lock row 0 and migrations 1..%d, each once", versions, err, len(files))
		}
	})
	t.Run("RefusesNewerSchema", func(t *testing.T) {
		_, schema := open(t, pgstore.Options{})
		raw(t, schema, `INSERT INTO schema_migrations (version, name) VALUES (99, 'future')`)
		s, err := pgstore.Open(t.Context(), testURL(), pgstore.Options{Schema: schema})
		if err == nil {
			s.Close()
			t.Fatal("Open accepted a database with schema version 99")
		}
		if !strings.Contains(err.Error(), "99") {
			t.Fatalf("Open = %v; want it to name version 99", err)
		}
	})
}

// TestCommitMarkersSwept: old commit markers are deleted by later commits
// of the same org, so the table does not grow without bound.
func TestCommitMarkersSwept(t *testing.T) {
	t.Parallel()
	s, schema := open(t, pgstore.Options{})
	raw(t, schema, `INSERT INTO commit_markers (org_id, id, created_at)
		SELECT 'org_sw', gen_random_uuid(), clock_timestamp() - interval '2 hours' FROM generate_series(1, 10)`)
	ctx := t.Context()
	for i := range 70 {
		if err := s.Update(ctx, "org_sw", func(tx store.Tx) error {
			_, err := ledger.Append(ctx, tx, "org_sw", ledger.Record{Kind: ledger.KindDecision, SubjectID: "d"}, at.Add(time.Duration(i)))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	var old, fresh int
	err := needDB(t).QueryRow(ctx, `SELECT count(*) FILTER (WHERE created_at < clock_timestamp() - interval '1 hour'), count(*) FILTER (WHERE created_at >= clock_timestamp() - interval '1 hour') FROM `+
		pgx.Identifier{schema, "commit_markers"}.Sanitize()).Scan(&old, &fresh)
	if err != nil {
		t.Fatal(err)
	}
	if old != 0 || fresh != 70 {
		t.Fatalf("%d old and %d fresh markers; want 0 and 70", old, fresh)
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, "postgres://nobody@127.0.0.1:1/x?sslmode=disable&connect_timeout=2", pgstore.Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open of an unreachable database succeeded")
	}
}

// TestPanicReleasesTheOrg: a panicking fn leaves no connection checked out
// and no row lock held; the next Update of the org goes ahead.
func TestPanicReleasesTheOrg(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{MaxConns: 1})
	ctx := t.Context()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not reach the caller")
			}
		}()
		_ = s.Update(ctx, "org_p", func(tx store.Tx) error {
			if err := tx.PutOrg(ctx, tenant.Org{ID: "org_p", Name: "P", CreatedAt: at}); err != nil {
				return err
			}
			panic("fn failed hard")
		})
	}()
	done, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Update(done, "org_p", func(tx store.Tx) error {
		if _, err := tx.LedgerHead(done); err != nil {
			return err
		}
		return nil
	}); err != nil {
		t.Fatalf("Update after a panic: %v", err)
	}
	if _, err := s.Org(done, "org_p"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Org = %v; the panicking Update's write must not land", err)
	}
}

// TestMigrationCarriesOverActivations: before migration 0005 an org's newest
// published bundle was its active one; the migration records it as the
// org's activation (ledger seq 0).
func TestMigrationCarriesOverActivations(t *testing.T) {
	t.Parallel()
	s, schema := open(t, pgstore.Options{})
	ctx := t.Context()
	published := map[string][]string{"org_a": {"v1", "v2", "v3"}, "org_b": {"only"}, "org_c": nil}
	storetest.SeedBundles(t, s, at, published)
	s.Close()
	// Take the schema back to before 0005.
	raw(t, schema, `DROP TABLE policy_activations; DELETE FROM schema_migrations WHERE version = 5`)

	s = openIn(t, schema, pgstore.Options{})
	want := map[string]store.Activation{
		"org_a": {OrgID: "org_a", Version: "v3", ActivatedAt: at.Add(2 * time.Hour)},
		"org_b": {OrgID: "org_b", Version: "only", ActivatedAt: at},
	}
	for org := range published {
		got, err := s.Activation(ctx, org)
		w, ok := want[org]
		if !ok {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s has no bundle: Activation = %+v, %v; want ErrNotFound", org, got, err)
			}
			continue
		}
		if err != nil || got != w {
			t.Errorf("%s: Activation = %+v, %v; want %+v", org, got, err, w)
		}
	}
}

// TestMigrationGivesQueuedExportsJobs: before migrations 0007 and 0008 a
// validation pack's build was queued on its artifact; 0008 gives each pack
// still PENDING or RUNNING its job.
func TestMigrationGivesQueuedExportsJobs(t *testing.T) {
	t.Parallel()
	s, schema := open(t, pgstore.Options{})
	legacy := []storetest.LegacyExport{
		{OrgID: "org_a", ID: "exp_1", Status: "PENDING", CreatedAt: at},
		{OrgID: "org_a", ID: "exp_2", Status: "RUNNING", Attempts: 2, CreatedAt: at.Add(time.Second)},
		{OrgID: "org_b", ID: "exp_3", Status: "SUCCEEDED", Attempts: 1, CreatedAt: at},
		{OrgID: "org_b", ID: "exp_4", Status: "PENDING", Attempts: 1, CreatedAt: at.Add(time.Minute)},
		{OrgID: "org_b", ID: "exp_5", Status: "FAILED", Attempts: 5, CreatedAt: at},
	}
	want := storetest.SeedLegacyExports(t, s, legacy)
	s.Close()
	// Take the schema back to before 0007.
	raw(t, schema, `DROP TABLE jobs; DELETE FROM schema_migrations WHERE version >= 7`)

	s = openIn(t, schema, pgstore.Options{Now: func() time.Time { return at.Add(time.Hour) }})
	storetest.CheckLegacyExportJobs(t, s, want)
}
