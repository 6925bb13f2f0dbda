// Package pebblestore is the embedded store.Backend: one Pebble database
// holds every org's records, ledgers and indexes.
//
// # Transactions
//
// Pebble has no transactions. Update provides one per org instead: each org
// has a mutex that serializes its Updates (the read-check-write of a ledger
// append needs that), and fn's writes go to an indexed batch, so reads made
// through the Tx see the Tx's own writes on top of the committed database.
// When fn returns nil the batch is applied atomically with pebble.Sync;
// otherwise it is discarded and nothing is written. Updates of different
// orgs run in parallel. Writes made through a Tx are checked to belong to
// the Tx's org (API keys excepted: they are indexed globally by hash).
//
// This per-org serialization is also what makes claims exactly-once: the
// claim package's read-check-write (grant ISSUED, nonce unused, scope free,
// then write all three) runs inside one Update, so of N concurrent claims of
// one grant, nonce or scope exactly one commits and the others read its
// result.
//
// # Clock
//
// Options.Now is the store's clock (time.Now when nil). Tx.Now returns it,
// and claim leases are judged by it: for Pebble the "database-clock lease
// boundary" is this injected clock, read once per lifecycle call inside the
// org's serialized Update. Tests move it instead of sleeping.
//
// # Durability and group commit
//
// Update returns nil only once its batch is in the synced write-ahead log:
// an acknowledged Update survives a crash or power loss. The batch is
// applied (made visible) inside the org mutex without waiting for the fsync,
// and the fsync is awaited after the mutex is released, so the next Update
// of the same org, and Updates of other orgs, proceed meanwhile and many
// commits share one fsync. Consequently a reader can briefly see a commit
// that is not yet durable; Sync waits until everything visible is durable,
// and an Update that writes nothing still waits for any commit it may have
// read.
//
// # Storage faults
//
// Pebble cannot go on writing after its write-ahead log or manifest failed
// a write or a sync: the failed sync's batches stay visible although they
// may not be on disk (fsync failures lose dirty pages: retrying the sync
// proves nothing), the next commits panic inside Pebble's commit pipeline
// and leave it locked, and a failed manifest write calls the logger's
// Fatalf, which by default ends the process. So the store watches its
// storage and stops writing at the first sign of failure. Every file
// operation goes through a wrapper of Options.FS that sees a failed
// write, sync or read in the goroutine that met it, before Pebble hands the
// error to the commits waiting on the sync; Pebble's checksum failures
// arrive through its event listener. From the first fault on, every
// write (an Update that would write, RevokeGrantKey) returns an error
// wrapping store.ErrWritesRefused without handing anything to Pebble, and
// so does Sync when something visible may not be durable; Fault
// (store.FaultReporter) says why; reads go on wherever the disk still
// serves them. An Update whose sync failed returns that error: it is never
// acknowledged, and after a restart it may or may not be there. Once a
// commit has failed after being applied, nothing visible is known to be
// durable, so Sync (and the ledger reads that wait for it) refuses until
// the restart. A fatal error the store can explain by a fault is logged
// (Errorf) instead of reaching the logger's Fatalf; one it cannot is a
// fault in Pebble, which reaches Fatalf as before. One failure ends the
// process all the same: when the write-ahead log first fails while Pebble
// closes the log of a memtable that just filled, Pebble panics with its
// mutex released and Go cannot recover; the restart then recovers as after
// a crash (the failed sync was not acknowledged).
//
// A failed write, sync or read, and corrupted data, need a restart (after
// the disk is repaired or the data restored): as PostgreSQL after a failed
// fsync, the restart recovers from what the disk holds. A full disk ends by
// itself. The store keeps a reserve on its filesystem (Options.DiskReserve,
// a preallocated file named BALLAST in its directory); the first write that
// meets ENOSPC removes it, through Pebble's vfs.OnDiskFull, and is retried
// once, so the writes in progress (the write-ahead log's above all) still
// complete, and writes are refused from then on. At most once a second, a
// write or a look at Fault checks the filesystem's free space: once there
// is room for the reserve and as much again, the reserve is put back and
// writes resume. ENOSPC that reaches the write-ahead log or the manifest
// all the same (no reserve, or space taken again at once) needs a restart;
// on a table, whose flush or compaction Pebble retries with another file,
// it does not. While the store fails, Pebble's retries of a failed flush or
// compaction (it retries at once, without end) are slowed to at most four a
// second.
//
// # Records and constraints
//
// Backends hold no business rules, but the store keeps its indexes
// consistent: PutLedgerEntry accepts only the entry with seq head+1 and
// moves the head with it; a dossier id or decision id, and a bundle version,
// can be stored once; bundle seqs follow each other from 1; ledger tree
// hashes are only appended (PutLedgerHashes must start at the number
// stored) and a checkpoint is never older than the latest; a nonce names
// one grant for good; PutGrant moves the grant's state index entry with its
// state. PutOrg, PutAPIKey, PutIdempotency, PutGrant, PutScopeClaim and
// PutRegisteredKey replace existing records. Lookups of claim records that
// find nothing wrap claim.ErrNotFound as well as store.ErrNotFound, and of
// registered keys registry.ErrKeyNotFound: those packages cannot import
// store.
//
// # Key layout
//
// Keys start with a one-byte table tag. Org-scoped keys continue with the
// org id, length-prefixed as a uvarint (so no org id is a prefix of
// another's keys), and a one-byte sub-table tag; all of an org's data is one
// contiguous key range. Integers are big-endian so keys sort numerically;
// times are int64 Unix nanoseconds with the sign bit flipped (clamped to the
// years 1678..2262). Values are JSON unless noted.
//
//	m "format"                          layout version ("3")
//	k <hash>                            tenant.APIKey (global lookup by key hash)
//	g <kid>                             store.KeyRevocation: a revoked grant-signing key (platform-wide)
//	o <org> o                           tenant.Org
//	o <org> h                           ledger.Head
//	o <org> l <seq u64>                 ledger.Entry
//	o <org> b <seq u64>                 store.BundleRecord, in publish order
//	o <org> v <version>                 <seq u64> of that bundle version
//	o <org> u                           store.Activation, the org's active bundle version
//	o <org> d <dossier id>              uvarint(len(meta)) meta-JSON body-bytes
//	o <org> x <decision id>             <dossier id>
//	o <org> s <created_at> <dossier id> dossier summary, for time-range reports
//	o <org> i <scope (uvarint-prefixed)> <key>  store.IdempotencyRecord
//	o <org> g <grant id>                claim.Grant
//	o <org> q <state (uvarint-prefixed)> <issued_at> <grant id>
//	                                    empty: the grant state index
//	o <org> n <nonce>                   <grant id> that claimed the nonce
//	o <org> c <scope>                   claim.ScopeClaim, the scope's live claim
//	o <org> r <kind (uvarint-prefixed)> <kid>   registry.Key
//	o <org> t <index u64>               32-byte ledger tree hash at that tlog stored-hash index
//	o <org> p <size u64>                ledger checkpoint: root(32) uvarint(len(origin)) origin signed-note
//	o <org> j <kind (uvarint-prefixed)> <id>    jobs.Job (binary, see jobcodec.go; JSON before)
//	o <org> w <name>                    empty: an outbox subscriber of the org
//	j <kind (uvarint-prefixed)> <due µs> <org> 0x00 <id>
//	                                    empty: the due index of every org (jobs.go)
//
// (<org> stands for uvarint(len(org id)) followed by the org id.)
// LatestBundle is a reverse seek over "o <org> b"; DossierSummaries scans
// "o <org> s" from <from> to <to>, so dossiers created at the same instant
// come in dossier id order. GrantsInState scans "o <org> q <state>" (issue
// order, then grant id) and reads each grant from the same snapshot;
// RegisteredKeys scans "o <org> r <kind>" in kid order. LatestCheckpoint
// is a reverse seek over "o <org> p"; the tree hashes a proof needs are
// point reads of "o <org> t". Databases written before the tree existed
// simply have no "t" and "p" keys (sealed size 0), and databases written
// before grant key revocations were stored no "g" keys (none revoked), and databases
// written before outbox subscribers no "w" keys (none subscribed). Layout "1" had no
// activations ("u"): the newest bundle was active. Open upgrades such a
// database in one synced batch, giving each org with bundles its newest one
// as activation and stamping "2", so a build that would ignore activations
// refuses it. Layout "2" queued validation-pack builds on their artifacts
// (kind "export", ref the status) through an all-orgs artifact index under
// "a"; Open upgrades it in one synced batch, giving each pack still PENDING
// or RUNNING its job and deleting that index, and stamps "3"
// (upgrade.go). A dossier's body
// is stored as the exact bytes given.
package pebblestore
