// Package store declares the storage contract that every Clearance backend
// implements: store/pebblestore (embedded, one server) and store/pgstore
// (PostgreSQL, shared by any number of servers). It composes the small
// interfaces the record packages declare (ledger.Tx, dossier.Tx, claim.Tx,
// artifact.Tx, registry.Tx, tenant.Tx, idempotency.Tx, jobs.Tx, …) and adds
// the records no record package owns yet (policy bundles and activations,
// grant-key revocations).
//
// Backends hold no business rules: hash linking, the idempotency rule, the
// claim state machine, the dossier record path, job leases and policy
// resolution live in their packages and run inside Update, whose function
// may run more than once (see Backend.Update). Every backend passes the conformance suites that
// store/storetest.All runs. Both backends are Observable: they report each
// commit (Commit: its time and group-commit batch) for metrics and traces.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/outbox"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/tenant"
)

// ErrNotFound is returned (possibly wrapped) by every lookup that finds nothing.
var ErrNotFound = errors.New("store: not found")

// ErrCorrupt is returned (wrapped) by every read of a record that exists
// but does not decode. It is ledger.ErrCorrupt, so that ledger verification
// reports such an entry as tampering rather than as an unavailable store.
var ErrCorrupt = ledger.ErrCorrupt

// ErrClosed is returned after Close.
var ErrClosed = errors.New("store: closed")

// BundleRecord is a published, immutable policy bundle version.
type BundleRecord struct {
	OrgID       string    `json:"org_id"`
	BundleID    string    `json:"bundle_id"`
	Version     string    `json:"version"`
	Seq         uint64    `json:"seq"` // publish order within the org, from 1
	Digest      string    `json:"digest"`
	Mode        string    `json:"mode"`
	RuleCount   int       `json:"rule_count"`
	PublishedAt time.Time `json:"published_at"`
	Body        []byte    `json:"body"` // canonical JSON of the bundle
}

// Activation names the org's active policy bundle version: the only one
// that authorizes. An org without one has no active version (the starter
// policy applies).
type Activation struct {
	OrgID       string    `json:"org_id"`
	Version     string    `json:"version"` // a published bundle version of the org
	ActivatedAt time.Time `json:"activated_at"`
	// LedgerSeq is the seq of the activation's ledger entry; 0 for an
	// activation carried over from data written before activations were
	// recorded (the newest published version was then the active one).
	LedgerSeq uint64 `json:"ledger_seq"`
}

// IdempotencyRecord remembers the answer given to one Idempotency-Key.
type IdempotencyRecord = idempotency.Record

// KeyRevocation records that the grant-signing key KID was revoked at
// RevokedAt. It is platform-wide (no org) and permanent: every server on the
// database refuses the kid, whatever its own key file says.
type KeyRevocation struct {
	KID       string    `json:"kid"`
	RevokedAt time.Time `json:"revoked_at"`
}

// DataProtectionKind and DataProtectionID name the artifact holding an
// org's data-protection setting (which members of its dossiers are
// personal data, sealed under per-subject keys): the one artifact every
// decision must see, kept at hand by Tx.DataProtectionInTx.
const (
	DataProtectionKind = "data_protection"
	DataProtectionID   = "setting"
)

// Tx is one org's atomic unit of work. Reads see the transaction's own writes.
type Tx interface {
	OrgID() string
	ledger.Tx
	// ledger.SealTx: the org's Merkle tree hashes and signed checkpoints,
	// written only by ledger.Seal (never on the append path).
	ledger.SealTx
	dossier.Tx
	artifact.Tx
	tenant.Tx
	claim.Tx
	registry.Tx
	jobs.Tx
	// outbox.SubscriberTx: whether the org's events are owed to anyone,
	// at hand without a read (decisions emit through it).
	outbox.SubscriberTx
	// DataProtectionInTx returns the body of the org's artifact
	// (DataProtectionKind, DataProtectionID) as of this transaction, nil
	// when there is none. Backends keep it at hand with the org's lock
	// (PostgreSQL reads it in the lock's round trip, Pebble keeps it in
	// memory), so a decision of an org without one pays no read for it.
	DataProtectionInTx(ctx context.Context) ([]byte, error)
	PutBundle(ctx context.Context, b BundleRecord) error
	// LatestBundleInTx returns the org's newest bundle as of this transaction.
	LatestBundleInTx(ctx context.Context) (BundleRecord, error)
	BundleInTx(ctx context.Context, version string) (BundleRecord, error)
	// PutActivation replaces the org's activation; a.Version must be a
	// bundle version published in the org.
	PutActivation(ctx context.Context, a Activation) error
	// ActivationInTx returns the org's activation as of this transaction.
	ActivationInTx(ctx context.Context) (Activation, error)
	Idempotency(ctx context.Context, scope, key string) (IdempotencyRecord, error)
	PutIdempotency(ctx context.Context, r IdempotencyRecord) error
}

// Reader is every non-transactional read.
type Reader interface {
	ledger.Reader
	// ledger.TreeReader: tree hashes and checkpoints, for proofs and
	// ledger.VerifyWith.
	ledger.TreeReader
	dossier.Reader
	artifact.Reader
	tenant.Reader
	claim.Reader
	registry.Reader
	jobs.Reader
	Bundle(ctx context.Context, orgID, version string) (BundleRecord, error)
	LatestBundle(ctx context.Context, orgID string) (BundleRecord, error)
	// Bundles lists the org's bundles in publish order.
	Bundles(ctx context.Context, orgID string) ([]BundleRecord, error)
	// Activation returns the org's activation (ErrNotFound when none).
	Activation(ctx context.Context, orgID string) (Activation, error)
}

// Backend is a complete storage backend.
type Backend interface {
	Reader
	// Update runs fn in a transaction scoped to orgID. Updates of one org are
	// serialized. When fn returns nil, every write made through tx is committed
	// atomically and durably (synced) before Update returns nil; when fn or the
	// commit fails, nothing is written. An Update that writes nothing returns
	// only once everything it read is durable.
	//
	// fn may run more than once: a backend may roll an attempt back and run
	// fn again from the start in a new transaction (store/pgstore does on a
	// serialization failure, a deadlock or a commit that did not happen).
	// So fn must write only through tx, and change outer state only by
	// assigning results that the final run overwrites (out = v, never
	// appending to an outer slice, counting or sending); nothing of an
	// abandoned run may matter after Update returns.
	//
	// A write's refusal may be reported late: store/pgstore sends most
	// writes with the next read or after fn returns, and a refusal then
	// fails the Update although fn returned nil. A Put whose refusal fn acts
	// on (PutBundle, PutActivation, PutCheckpoint, PutLedgerHashes) reports
	// it at once.
	Update(ctx context.Context, orgID string, fn func(tx Tx) error) error
	// Sync returns once everything already visible to readers is durable.
	Sync(ctx context.Context) error
	// Ping reports whether the backend can serve requests.
	Ping(ctx context.Context) error
	// RevokeGrantKey records, durably before it returns, that the
	// grant-signing key kid is revoked. It is idempotent: revoking a revoked
	// kid again keeps the first RevokedAt. There is no un-revoke.
	RevokeGrantKey(ctx context.Context, kid string, at time.Time) error
	// RevokedGrantKeys lists every revoked grant-signing key, in kid order.
	RevokedGrantKeys(ctx context.Context) ([]KeyRevocation, error)
	Close() error
}
