// Package pgstore is the PostgreSQL store.Backend: every org's records,
// ledgers and indexes in one database that any number of Clearance servers
// share. It is written for PostgreSQL (pgx v5; tested on PostgreSQL 15),
// with SQL chosen to run on CockroachDB as well (see CockroachDB below).
//
// The contract is store.Backend's, and the behaviour is store/pebblestore's:
// both pass the same conformance suites (storetest.All: storetest,
// ledgertest, dossiertest, claimtest, artifacttest, jobstest). Backends
// hold no business rules; hash linking, idempotency, the claim state
// machine and job leases run in their packages inside Update.
//
// # Schema
//
// Open applies the embedded, versioned migrations (migrations/NNNN_name.sql)
// the database lacks; Migrate does the same on demand. schema_migrations
// records each applied version; its row 0 is a lock row that concurrent
// starters take with SELECT … FOR UPDATE, and each pending migration runs in
// that lock's transaction with its version row, so two processes starting
// at once apply it exactly once. A database carrying a version this build
// does not know is refused. Options.Schema puts the tables in one schema
// (the connections' search_path), which the tests use for isolation.
//
// One table per record kind, org_id leading every primary key (api_keys is
// keyed by the key hash alone: keys are looked up globally):
//
//	org_locks(org_id)                        the per-org lock row
//	commit_markers(org_id, id uuid)          one per committed write transaction
//	orgs(org_id)                             tenant.Org
//	api_keys(hash)                           tenant.APIKey
//	bundles(org_id, version), UNIQUE(org_id, seq)
//	policy_activations(org_id)               store.Activation, referencing bundles (0005)
//	dossiers(org_id, dossier_id), UNIQUE(org_id, decision_id),
//	                                         INDEX(org_id, created_at, dossier_id)
//	ledger_entries(org_id, seq), ledger_heads(org_id)
//	ledger_hashes(org_id, idx)               tree hashes by tlog stored-hash index (0002)
//	ledger_checkpoints(org_id, tree_size)    signed checkpoints (0002)
//	idempotency(org_id, scope, idem_key)
//	grants(org_id, grant_id), INDEX(org_id, state, issued_at, grant_id)
//	nonces(org_id, nonce)                    a nonce names one grant for good
//	scope_claims(org_id, scope)              a scope's one live claim
//	registered_keys(org_id, kind, kid)
//	jobs(org_id, kind, id), INDEX(kind, due_at, org_id, id) WHERE due_at IS NOT NULL (0007)
//
// Dossier and bundle bodies and idempotent responses are bytea, stored and
// returned byte for byte. Grants and registered keys are JSON in a bytea
// column (record) beside the columns that are queried (state, issued_at);
// jsonb is avoided because it would rewrite the canonical JSON inside.
// Ledger tree hashes, checkpoint roots, origins and signed notes are bytea
// too, byte for byte. Times are timestamptz, whole microseconds. The ledger entry's recorded_at
// is the hashed RFC 3339 string, kept as text. Identifiers that are listed
// in order are COLLATE "C", so ties and kid listings come in byte order as
// in Pebble.
//
// # Records and constraints
//
// The store keeps its indexes consistent without business rules, in single
// statements that never abort the transaction on an expected refusal:
// PutLedgerEntry inserts the entry and moves the head only when the entry's
// seq is the head's + 1 (and refuses another org's entry); PutLedgerHashes
// inserts a batch of tree hashes (one statement, unnest) only when it starts
// at the number stored, and PutCheckpoint only when no larger checkpoint
// is stored (replacing one of the same size); a dossier id or
// decision id, and a bundle version, are stored once (INSERT … ON CONFLICT DO
// NOTHING, then an error); bundle seqs follow each other from 1;
// PutActivation names only a version the org published (INSERT … SELECT …
// WHERE EXISTS, then an error); PutNonce
// refuses a nonce that names another grant; PutOrg requires o.ID to be the
// transaction's org; PutAPIKey is allowed in any org's transaction (the
// platform key is written in tenant.PlatformOrgID's). PutOrg, PutAPIKey,
// PutIdempotency, PutGrant, PutScopeClaim and PutRegisteredKey replace.
// Lookups that find nothing wrap store.ErrNotFound, and for claim records
// claim.ErrNotFound and for registered keys registry.ErrKeyNotFound as well.
//
// # Transactions and per-org serialization
//
// Update(ctx, org, fn) runs fn in one READ COMMITTED transaction that starts
// (in the same round trip as BEGIN) with
//
//	INSERT INTO org_locks (org_id) VALUES ($1) ON CONFLICT (org_id) DO NOTHING;
//	SELECT org_id FROM org_locks WHERE org_id = $1 FOR UPDATE;
//
// The row lock serializes the org's Updates across every connection and
// every server: the next holder's statements (each its own READ COMMITTED
// snapshot, taken after the lock was granted) see everything the previous
// holder committed. That is what keeps an org's ledger one gap-free chain
// when several servers append at once, and what makes a claim exactly-once:
// claim's read-check-write (grant ISSUED, nonce unused, scope free, then
// write all three) runs under the lock, and the nonces and scope_claims
// primary keys back it up. Reads through the Tx run on the transaction's
// connection and see its own writes. When fn or any statement fails,
// nothing of that Update is written (a statement error that fn ignores
// still fails the Update).
//
// # Group commit and deferred writes
//
// The org's lock is held until COMMIT returns, so one transaction per
// Update would bound an org to one Update per (round trips + WAL flush).
// Instead, the Updates of an org waiting in one process share a
// transaction: the org's runner goroutine takes the lock (BEGIN, the lock,
// the ledger head and the activation in one round trip), runs the waiting
// functions one after another — at most 32 — and commits them together
// (group.go has the rules). Each
// keeps its own outcome: a member that fails is rolled back to a savepoint
// taken lazily before its first writes reach the server, later members see
// the earlier ones' writes, and no outcome (failures included) is reported
// before the COMMIT is acknowledged. A member that aborts the transaction
// where no savepoint can repair it runs again alone, and the others after
// it. Only the runner holds a connection, so a busy org never ties up the
// pool.
//
// Writes are not sent when they are made but batched: they go to the
// server with the member's next read, or in one round trip after its
// function returns, each checked for its expected row count then (a
// refusal then fails the Update). The Puts whose refusal callers act on
// (PutBundle, PutActivation, PutCheckpoint, PutLedgerHashes) and the
// tenant and registry writes are sent at once. A decision thus costs one
// round trip inside a group, plus the group's lock and COMMIT.
//
// # Retries
//
// An attempt that fails with a serialization failure (40001) or a deadlock
// (40P01) — from a statement, from COMMIT, or returned by fn — is rolled
// back and fn runs again from the start in a new transaction, with jittered
// backoff from 2 ms doubling to 200 ms, at most Options.MaxAttempts times
// (default 10). fn closures must therefore be re-runnable, as they are in
// Clearance: everything they write goes through the Tx. Nothing of a
// rolled-back attempt survives, so a retried claim stores one claim.
//
// # Ambiguous commits
//
// Every write transaction inserts a commit_markers row with a fresh UUID in
// the COMMIT's round trip. When that round trip fails without an answer (a
// connection error, the context ending mid-flight, the server going away,
// CockroachDB's 40003), the outcome is unknown, and it is settled, never
// guessed: on a new connection Update takes the org's row lock — which
// waits until the in-doubt transaction, if the server still runs it, has
// committed or rolled back — and reads the marker. Present: the Update
// succeeded. Absent: nothing was written, and fn runs again. The reading
// transaction ends with COMMIT, which, as it holds a row lock, waits for a
// synchronous standby like any write: a marker a crashed primary kept but
// its standby never received is acknowledged only once the standby has it
// (PostgreSQL restart in docs/reliability.md). The
// settlement has a deadline of its own, min(Options.Timeout, 2 s) (with no
// Timeout, ctx's): if the marker cannot be read by then, Update returns
// ErrCommitUnknown. Every
// 64th commit of a Store also deletes its org's markers older than an hour.
// (A server that cannot see the client is gone keeps the in-doubt
// transaction, and its lock, until TCP keepalives or
// idle_in_transaction_session_timeout end it; set the latter.)
//
// # Deadlines
//
// Options.Timeout (default 5 s) bounds every database call, since nothing
// else does: a connection whose packets are dropped waits until TCP gives
// up, about 15 minutes. An Update is bounded from its call (its wait in
// the org's queue, the pool, the lock, its statements and COMMIT, its
// retries); a group's I/O ends at its members' earliest deadline, so that
// no member waits past its own bound (plus a settlement) for a later one.
// A caller that asks for more (store.WithLongCall: an org-wide erasure)
// gets it, in a transaction of its own, never grouped. Each read
// statement (each page of a listing) and Ping are bounded alike, and so is
// each connection attempt when the URL sets no connect_timeout (the pool
// dials on a context Acquire's deadline does not end). pgx closes a
// connection whose I/O a context interrupted, and the pool discards it.
//
// # Clock
//
// Options.Now nil (production) makes Tx.Now the DATABASE clock: SELECT
// clock_timestamp() in the transaction, at each call — clock_timestamp(),
// not now(), which is the transaction's start. Claim leases and grant
// expiry are thus judged by one clock for every server, whatever their own
// clocks say ("database-clock lease boundary"). Tests set Options.Now to a
// clock they move. Tx.Now is whole microseconds either way.
//
// # Durability
//
// A COMMIT is acknowledged once durable (synchronous_commit on, the
// default), and readers only see committed data, so Sync is a Ping and an
// Update that writes nothing just ends its transaction.
//
// # Listings
//
// DossierSummaries and GrantsInState read their index in pages of 256 rows
// (keyset pagination on (time, id)), releasing the connection before calling
// fn for a page's rows; each grant passed is in the requested state.
// LedgerEntries, Bundles and RegisteredKeys are single ordered statements.
//
// # CockroachDB
//
// The SQL is chosen to run on CockroachDB as well: no advisory locks, no
// LISTEN/NOTIFY, no sequences or triggers. It uses row locks (SELECT … FOR
// UPDATE), INSERT … ON CONFLICT (DO NOTHING and DO UPDATE … WHERE), data
// modifying CTEs (WITH … INSERT … RETURNING), row-value comparisons,
// clock_timestamp(), bytea, bytea[] and bigint[] parameters (unnest …
// WITH ORDINALITY, = ANY), text[], uuid and timestamptz. CockroachDB runs
// transactions SERIALIZABLE unless READ COMMITTED is enabled (then BEGIN
// ISOLATION LEVEL READ COMMITTED is honoured); under SERIALIZABLE the row
// lock still orders an org's Updates, and the restarts CockroachDB asks for
// (40001, also at COMMIT) are the retries above; 40003 "result is
// ambiguous" is settled by the commit marker. Migrations run DDL inside a
// transaction, which CockroachDB supports for creating tables and indexes;
// the runner drops COLLATE "C" there (CockroachDB strings already compare
// bytewise and it refuses that collation on a column). This package is
// tested on PostgreSQL only.
package pgstore
