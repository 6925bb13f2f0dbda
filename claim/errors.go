package claim

import (
	"errors"

	"github.com/clearancehq/clearance/internal/coded"
)

// Sentinel errors of the lifecycle. Every refusal the lifecycle returns is a
// *Error wrapping exactly one of them; compare with errors.Is and read the
// stable machine code with (*Error).Code. Any other error (a storage
// failure) carries no code and must be treated as unavailable: it never
// authorizes anything.
var (
	// ErrGrantNotFound: no grant with that id in the org.
	ErrGrantNotFound = errors.New("claim: grant not found")
	// ErrGrantExists: Issue was given a grant id that is already stored.
	ErrGrantExists = errors.New("claim: grant already issued")
	// ErrGrantExpired: the grant's exp passed before it was claimed.
	ErrGrantExpired = errors.New("claim: grant expired")
	// ErrReplay: the grant was already claimed (or finalized).
	ErrReplay = errors.New("claim: grant already claimed")
	// ErrNonceUsed: another grant already claimed the nonce.
	ErrNonceUsed = errors.New("claim: nonce already used")
	// ErrScopeBusy: another grant holds a live claim of the concurrency scope.
	ErrScopeBusy = errors.New("claim: concurrency scope busy")
	// ErrScopeUnreconciled: the concurrency scope is held by an execution
	// whose outcome is unknown (INDETERMINATE, or CLAIMED with its lease
	// passed) until that execution is reconciled: an unknown effect is
	// never retried automatically.
	ErrScopeUnreconciled = errors.New("claim: concurrency scope held by an unreconciled execution")
	// ErrBindingMismatch: the presented intent hash is not the grant's.
	ErrBindingMismatch = errors.New("claim: binding mismatch")
	// ErrNotClaimed: finalization of a grant that was never claimed.
	ErrNotClaimed = errors.New("claim: grant not claimed")
	// ErrClaimTokenMismatch: the claim token is not the one the claim issued.
	ErrClaimTokenMismatch = errors.New("claim: claim token mismatch")
	// ErrAlreadyFinalized: the grant is already COMMITTED, FAILED or
	// INDETERMINATE (a replayed finalization).
	ErrAlreadyFinalized = errors.New("claim: already finalized")
	// ErrLeaseExpired: finalization at or after the claim lease boundary
	// (recorded as INDETERMINATE; see Finalization).
	ErrLeaseExpired = errors.New("claim: claim lease expired")
	// ErrScopeInvariant: the claimed scope record is missing or names
	// another grant (recorded as INDETERMINATE; see Finalization).
	ErrScopeInvariant = errors.New("claim: claimed scope missing")
	// ErrNotIndeterminate: reconciliation of a grant that is not (or no
	// longer) INDETERMINATE.
	ErrNotIndeterminate = errors.New("claim: grant not indeterminate")
	// ErrInvalidFinalization: an outcome or resolution outside its values.
	ErrInvalidFinalization = errors.New("claim: invalid finalization")
)

// Stable machine codes of the sentinels, as (*Error).Code reports them.
const (
	CodeGrantNotFound       = "GRANT_NOT_FOUND"
	CodeGrantExists         = "GRANT_ALREADY_ISSUED"
	CodeGrantExpired        = "GRANT_EXPIRED"
	CodeReplay              = "CLAIM_REPLAY"
	CodeNonceUsed           = "NONCE_ALREADY_USED"
	CodeScopeBusy           = "CONCURRENCY_SCOPE_BUSY"
	CodeScopeUnreconciled   = "CLAIM_SCOPE_UNRECONCILED"
	CodeBindingMismatch     = "BINDING_MISMATCH"
	CodeNotClaimed          = "GRANT_NOT_CLAIMED"
	CodeClaimTokenMismatch  = "CLAIM_TOKEN_MISMATCH"
	CodeAlreadyFinalized    = "ALREADY_FINALIZED"
	CodeLeaseExpired        = "CLAIM_LEASE_EXPIRED"
	CodeScopeInvariant      = "CLAIM_SCOPE_INVARIANT_VIOLATION"
	CodeNotIndeterminate    = "NOT_INDETERMINATE"
	CodeInvalidFinalization = "INVALID_FINALIZATION"
)

var codes = map[error]string{
	ErrGrantNotFound:       CodeGrantNotFound,
	ErrGrantExists:         CodeGrantExists,
	ErrGrantExpired:        CodeGrantExpired,
	ErrReplay:              CodeReplay,
	ErrNonceUsed:           CodeNonceUsed,
	ErrScopeBusy:           CodeScopeBusy,
	ErrScopeUnreconciled:   CodeScopeUnreconciled,
	ErrBindingMismatch:     CodeBindingMismatch,
	ErrNotClaimed:          CodeNotClaimed,
	ErrClaimTokenMismatch:  CodeClaimTokenMismatch,
	ErrAlreadyFinalized:    CodeAlreadyFinalized,
	ErrLeaseExpired:        CodeLeaseExpired,
	ErrScopeInvariant:      CodeScopeInvariant,
	ErrNotIndeterminate:    CodeNotIndeterminate,
	ErrInvalidFinalization: CodeInvalidFinalization,
}

// ErrNotFound is what a backend's Tx lookups wrap, besides store.ErrNotFound,
// when they find nothing. (This package cannot name store.ErrNotFound:
// package store imports it.) It is a storage signal, not a lifecycle
// refusal, and has no code.
var ErrNotFound = errors.New("claim: record not found")

// Error is a refusal: Err wraps one sentinel with detail; Code() is its
// stable machine code.
type Error = coded.Error

// refuse wraps sentinel with detail formatted from format and args (which may
// contain more %w verbs for causes).
func refuse(sentinel error, format string, args ...any) *Error {
	return coded.New(codes[sentinel], sentinel, format, args...)
}

// isNotFound reports whether a Tx lookup found nothing.
func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
