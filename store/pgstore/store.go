package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// Options configures Open. The zero value is a good default.
type Options struct {
	// MaxConns caps the connection pool; 0 means pgxpool's default
	// (the larger of 4 and the number of CPUs) or the URL's pool_max_conns.
	MaxConns int32
	// Now is the store's clock, which Tx.Now returns and claim leases are
	// judged by. nil (the production setting) means the DATABASE clock:
	// SELECT clock_timestamp() inside the transaction. Tests pass a clock
	// they move. Either way Tx.Now is truncated to whole microseconds, the
	// precision of timestamptz.
	Now func() time.Time
	// Schema, when set, is the only schema on the connections' search_path:
	// the store's tables live there. It must exist. Tests use it to give
	// each test its own fresh tables.
	Schema string
	// MaxAttempts bounds how many times Update runs a transaction that
	// fails with a serialization failure (40001) or a deadlock (40P01), or
	// whose ambiguous commit turned out not to have happened; 0 means 10.
	MaxAttempts int
	// Timeout bounds every database call, so that a request never waits
	// on an unresponsive network for longer: an Update, from its call to
	// its COMMIT's answer (its wait for a turn, the pool, the org's lock,
	// the statements, retries included); each read statement (a listing's
	// each page), and Ping; and each connection attempt, when the URL sets
	// no connect_timeout. A COMMIT it cuts off is settled by its commit
	// marker within min(Timeout, 2 s) more. A caller may allow one Update
	// more (store.WithLongCall); it then runs alone. 0 means DefaultTimeout;
	// negative means no bound (only the caller's context).
	Timeout time.Duration
}

// DefaultTimeout is Options.Timeout's default.
const DefaultTimeout = 5 * time.Second

// ErrCommitUnknown is returned (wrapped) by an Update whose COMMIT was sent
// but not acknowledged, and whose outcome could not be settled by reading
// its commit marker within the settlement's deadline. The transaction may or may not
// have committed; Clearance answers such a request as unavailable, and a
// retry with the same Idempotency-Key finds out which.
var ErrCommitUnknown = errors.New("pgstore: commit outcome unknown")

// Store is the PostgreSQL backend. It is safe for concurrent use, and any
// number of Stores (in any number of processes) may share one database.
type Store struct {
	pool        *pgxpool.Pool
	rd          boundedPool      // the pool for reads, each statement bounded
	now         func() time.Time // nil: the database clock
	maxAttempts int
	timeout     time.Duration // Options.Timeout resolved; <= 0: none

	closed  atomic.Bool
	commits atomic.Uint64 // write commits, to pace the commit-marker sweep

	// queues holds one *queue per org: the org's Updates waiting in this
	// process, run in groups that share a transaction (group.go), so one
	// connection per org waits on the org's row lock and a busy org
	// cannot tie up the whole pool.
	queues sync.Map

	observer atomic.Pointer[store.CommitObserver] // ObserveCommits

	// Test hooks (export_test.go): beforeCommit runs before a write
	// COMMIT is sent; afterCommit sees the outcome of its round trip and
	// may replace it (to fake a lost answer).
	beforeCommit func(orgID string, conn *pgx.Conn)
	afterCommit  func(orgID string, err error) error
}

var _ store.Backend = (*Store)(nil)

const (
	defaultMaxAttempts = 10
	minBackoff         = 2 * time.Millisecond
	maxBackoff         = 200 * time.Millisecond

	// sweepEvery write commits, the committing transaction also deletes
	// its org's commit markers older than markerTTL.
	sweepEvery = 64
	markerTTL  = "1 hour"
)

// Open connects to the database at url (a postgres:// URL or a key=value
// DSN, as pgx parses it), applies the embedded migrations and returns the
// store. Open fails if the database cannot be reached.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: parse url: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if cfg.ConnConfig.ConnectTimeout == 0 && timeout > 0 {
		// The pool dials on a context of its own that Acquire's deadline
		// does not end: without this a dial into a network that drops
		// packets waits for the kernel's TCP timeouts.
		cfg.ConnConfig.ConnectTimeout = timeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	s := &Store{pool: pool, rd: boundedPool{pool, timeout}, now: opts.Now, maxAttempts: opts.MaxAttempts, timeout: timeout}
	if s.maxAttempts <= 0 {
		s.maxAttempts = defaultMaxAttempts
	}
	if err := s.Migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// ObserveCommits implements store.Observable. A commit is one COMMIT of a
// group of the org's Updates (group.go), timed from sending it to its
// acknowledgement; its Batch is the Updates it carried, whose functions
// succeeded.
func (s *Store) ObserveCommits(o store.CommitObserver) {
	if o == nil {
		s.observer.Store(nil)
		return
	}
	s.observer.Store(&o)
}

// Update implements store.Backend.
//
// Each attempt is one READ COMMITTED transaction that first locks the org's
// org_locks row (SELECT … FOR UPDATE), so Updates of one org run one at a
// time across every server, then runs fn, then commits together with a
// fresh commit marker. An attempt that fails with 40001 or 40P01 — returned
// by a statement, by the COMMIT, or by fn itself — is rolled back and fn
// runs again in a new transaction, at most Options.MaxAttempts times with
// capped, jittered backoff. A COMMIT whose answer is lost is settled by
// reading its marker (see doc.go), never guessed. The whole Update is
// bounded by Options.Timeout, plus the settlement of a lost COMMIT.
func (s *Store) Update(ctx context.Context, orgID string, fn func(tx store.Tx) error) error {
	if orgID == "" {
		return errors.New("pgstore: update needs an org id")
	}
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	caller := ctx
	ctx, cancel := s.bound(ctx)
	defer cancel()
	backoff := minBackoff
	for attempt := 1; ; attempt++ {
		err := s.attempt(ctx, orgID, fn)
		if err != nil && caller.Err() == nil && ctx.Err() != nil {
			err = fmt.Errorf("pgstore: update of org %q: no answer within %v: %w", orgID, s.timeout, err)
		}
		if err == nil || !retryable(err) {
			return err
		}
		if attempt >= s.maxAttempts {
			return fmt.Errorf("pgstore: transaction of org %q failed %d times: %w", orgID, attempt, err)
		}
		if serr := sleep(ctx, backoff); serr != nil {
			return fmt.Errorf("pgstore: retry of org %q: %w (last attempt: %w)", orgID, serr, err)
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// orgState is what a transaction reads of its org when it takes the lock.
type orgState struct {
	head      ledger.Head
	active    store.Activation
	hasActive bool
	// subscribed: the org has outbox subscribers (outbox.Subscribe).
	subscribed bool
	// protection is the org's data-protection setting (nil: none).
	protection []byte
}

// lockOrg begins the transaction, takes the org's row lock and reads the
// org's ledger head, policy activation, whether it has outbox
// subscribers and its data-protection setting, in one round trip. The INSERT
// creates the row the first time an org is seen. Both are read after the
// lock is granted (each statement its own snapshot), so they are the latest
// committed, and every decision needs them.
func lockOrg(ctx context.Context, conn *pgx.Conn, orgID string) (orgState, error) {
	var st orgState
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue("INSERT INTO org_locks (org_id) VALUES ($1) ON CONFLICT (org_id) DO NOTHING", orgID)
	b.Queue("SELECT org_id FROM org_locks WHERE org_id = $1 FOR UPDATE", orgID)
	b.Queue(selectHead, orgID).QueryRow(func(row pgx.Row) error {
		var err error
		st.head, err = scanHead(row, orgID)
		return err
	})
	b.Queue(selectActivation, orgID).QueryRow(func(row pgx.Row) error {
		var err error
		st.active, err = scanActivation(row, orgID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		st.hasActive = err == nil
		return err
	})
	b.Queue(selectSubscribed, orgID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.subscribed)
	})
	b.Queue(selectProtection, orgID).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&st.protection)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return orgState{}, fmt.Errorf("pgstore: lock org %q: %w", orgID, err)
	}
	return st, nil
}

// rollback ends a transaction that must not commit. When that fails (or ctx
// is done) the connection is closed instead: the server rolls back, and the
// pool discards the connection on release.
func rollback(ctx context.Context, conn *pgx.Conn) {
	if ctx.Err() == nil && conn.PgConn().TxStatus() != 'I' {
		if _, err := conn.Exec(ctx, "ROLLBACK"); err == nil {
			return
		}
	}
	if conn.PgConn().TxStatus() != 'I' {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}
}

// commit inserts the transaction's commit marker and commits, in one round
// trip. A lost answer is settled by resolve.
func (s *Store) commit(ctx context.Context, conn *pgx.Conn, orgID string) error {
	marker, err := uuid.NewRandom()
	if err != nil {
		rollback(ctx, conn)
		return fmt.Errorf("pgstore: commit marker: %w", err)
	}
	b := &pgx.Batch{}
	b.Queue("INSERT INTO commit_markers (org_id, id) VALUES ($1, $2)", orgID, marker.String())
	if s.commits.Add(1)%sweepEvery == 0 {
		b.Queue("DELETE FROM commit_markers WHERE org_id = $1 AND created_at < clock_timestamp() - $2::interval", orgID, markerTTL)
	}
	b.Queue("COMMIT")
	if s.beforeCommit != nil {
		s.beforeCommit(orgID, conn)
	}
	br := conn.SendBatch(ctx, b)
	var tag pgconn.CommandTag
	for range b.Len() {
		if tag, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if s.afterCommit != nil {
		err = s.afterCommit(orgID, err)
	}
	switch {
	case err == nil && tag.String() == "COMMIT":
		return nil
	case err == nil:
		// The server rolled the transaction back instead (it was aborted).
		rollback(ctx, conn)
		return fmt.Errorf("pgstore: commit of org %q answered %q", orgID, tag)
	case pgconn.SafeToRetry(err):
		// Nothing was sent: the transaction cannot have committed.
		rollback(ctx, conn)
		return &notCommittedError{fmt.Errorf("pgstore: commit of org %q not sent: %w", orgID, err)}
	case !ambiguous(err):
		// The server answered: the transaction did not commit.
		rollback(ctx, conn)
		return fmt.Errorf("pgstore: commit of org %q: %w", orgID, err)
	}
	rollback(ctx, conn)
	return &lostCommitError{marker: marker, cause: err}
}

// lostCommitError is a COMMIT sent without an answer: attempt settles it
// with resolve once the connection is back in the pool.
type lostCommitError struct {
	marker uuid.UUID
	cause  error
}

func (e *lostCommitError) Error() string {
	return fmt.Sprintf("pgstore: commit answer lost: %v", e.cause)
}
func (e *lostCommitError) Unwrap() error { return e.cause }

// ambiguous reports whether a COMMIT that failed with err may nevertheless
// have committed: no answer from the server (a connection error, a context
// that ended mid-flight), the server going away, or CockroachDB's
// "result is ambiguous" (40003).
func ambiguous(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	switch {
	case pgErr.Code == "40003",
		len(pgErr.Code) == 5 && (pgErr.Code[:2] == "08" || pgErr.Code[:2] == "57" || pgErr.Code[:2] == "58"):
		return true
	}
	return false
}

// resolve settles a COMMIT whose answer was lost: it takes the org's row
// lock on another connection — which waits until the in-doubt transaction,
// if it still runs on the server, has committed or rolled back — and then
// looks for the transaction's commit marker. Present: it committed. Absent:
// it did not, and Update may run fn again. If that cannot be read before
// ctx ends (settleContext), the outcome is ErrCommitUnknown; nothing is
// guessed.
func (s *Store) resolve(ctx context.Context, orgID string, marker uuid.UUID, cause error) error {
	backoff := minBackoff
	for attempt := 1; ; attempt++ {
		found, err := s.markerCommitted(ctx, orgID, marker)
		if err == nil {
			if found {
				return nil
			}
			return &notCommittedError{fmt.Errorf("pgstore: commit of org %q did not happen: %w", orgID, cause)}
		}
		if ctx.Err() != nil || attempt >= s.maxAttempts {
			return fmt.Errorf("%w: org %q: %w (settling it: %w)", ErrCommitUnknown, orgID, cause, err)
		}
		if sleep(ctx, backoff) != nil {
			return fmt.Errorf("%w: org %q: %w (settling it: %w)", ErrCommitUnknown, orgID, cause, ctx.Err())
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (s *Store) markerCommitted(ctx context.Context, orgID string, marker uuid.UUID) (bool, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer pc.Release()
	conn := pc.Conn()
	var found bool
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue("SELECT org_id FROM org_locks WHERE org_id = $1 FOR UPDATE", orgID)
	b.Queue("SELECT EXISTS (SELECT 1 FROM commit_markers WHERE org_id = $1 AND id = $2)", orgID, marker.String()).
		QueryRow(func(r pgx.Row) error { return r.Scan(&found) })
	// COMMIT, not ROLLBACK: the row lock gave this transaction an id, so
	// its COMMIT waits for a synchronous standby as a write's does, and a
	// marker found is answered committed only once the standby has it too.
	// After a crash, the restarted primary may hold a COMMIT its standby
	// never received; a failover then would lose what was acknowledged.
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		rollback(ctx, conn)
		return false, err
	}
	return found, nil
}

// notCommittedError is an attempt that certainly did not commit and may be
// run again: a lost COMMIT answer whose marker is absent.
type notCommittedError struct{ err error }

func (e *notCommittedError) Error() string { return e.err.Error() }
func (e *notCommittedError) Unwrap() error { return e.err }

// retryable reports whether Update may run fn again after err.
func retryable(err error) bool {
	var nc *notCommittedError
	if errors.As(err, &nc) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// sleep waits about d (jittered to between d/2 and d) or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	d = d/2 + rand.N(d/2+1)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// Sync implements store.Backend. PostgreSQL acknowledges a COMMIT only once
// it is durable (with synchronous_commit on, the default), so everything
// visible is already durable: Sync only checks that the database answers.
func (s *Store) Sync(ctx context.Context) error { return s.Ping(ctx) }

// Ping implements store.Backend, within Options.Timeout.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pgstore: ping: %w", err)
	}
	return nil
}

// Close closes the pool, waiting for connections in use to be released.
// Later calls return store.ErrClosed; closing again returns nil. Close must
// not be called from inside an Update's fn.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.pool.Close()
	return nil
}

// enter fails once the store is closed or when ctx is done.
func (s *Store) enter(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}
