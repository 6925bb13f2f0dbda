// Package claim is the execution lifecycle of a grant, written once over a
// small storage interface: ISSUED → CLAIMED → COMMITTED, FAILED or
// INDETERMINATE.
//
// Invariants (every backend, every process count):
//   - a grant is claimed at most once: one claim per grant, per nonce, and at
//     most one live claim per concurrency scope;
//   - a concurrency scope stays held while its holder's outcome is unknown:
//     a grant INDETERMINATE (finalized so, refused into it, or recorded by
//     Expire) or CLAIMED past its lease holds its scope until Reconcile
//     releases it (CLAIM_SCOPE_UNRECONCILED), so an unknown effect is never
//     retried automatically; COMMITTED and FAILED release it;
//   - leases are judged by the STORE's clock (Tx.Now), never the caller's,
//     and end on a whole second (a JWT NumericDate, the claim attestation's
//     exp);
//   - finalization at or after the lease boundary records INDETERMINATE with
//     CLAIM_LEASE_EXPIRED, and a claim whose scope record is missing records
//     INDETERMINATE with CLAIM_SCOPE_INVARIANT_VIOLATION; both are refusals
//     the caller must still commit (they change state) and report as 409;
//   - nothing here ever authorizes on an error.
package claim

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// State of a grant's lifecycle.
type State string

// States.
const (
	StateIssued        State = "ISSUED"
	StateClaimed       State = "CLAIMED"
	StateCommitted     State = "COMMITTED"
	StateFailed        State = "FAILED"
	StateIndeterminate State = "INDETERMINATE"
)

// Outcome is what the executor reports at finalization.
type Outcome string

// Finalization outcomes.
const (
	OutcomeCommitted     Outcome = "COMMITTED"
	OutcomeFailed        Outcome = "FAILED"
	OutcomeIndeterminate Outcome = "INDETERMINATE"
)

// Grant is the stored lifecycle record of one execution grant.
type Grant struct {
	OrgID                string          `json:"org_id"`
	GrantID              string          `json:"grant_id"` // the token's jti
	DecisionID           string          `json:"decision_id"`
	DossierID            string          `json:"dossier_id"`
	DossierDigest        string          `json:"dossier_digest"`
	IntentID             string          `json:"intent_id"`
	IntentHash           string          `json:"intent_hash"`
	PayloadDigest        string          `json:"payload_digest"`
	ExpectedEffectDigest string          `json:"expected_effect_digest,omitempty"`
	Nonce                string          `json:"nonce"`
	Scope                string          `json:"scope"`
	Correlation          string          `json:"correlation,omitempty"`
	ActorID              string          `json:"actor_id"`
	ActionType           string          `json:"action_type"`
	PolicyVersion        string          `json:"policy_version"`
	BundleDigest         string          `json:"bundle_digest"`
	Intent               json.RawMessage `json:"intent"` // canonical intent JSON, for re-evaluation at claim time
	// PersonalData is set for a grant of an org whose data-protection
	// setting sealed its decision: ActorID and Intent then hold the string
	// "[sealed]", and PersonalData seals their values under the data
	// subject's key (package privacy). Once the subject is erased they are
	// gone, and the grant cannot be claimed.
	PersonalData *Sealed `json:"personal_data,omitempty"`
	// TokenDigest is the digest of the signed grant token as issued; the
	// issuer recognizes its own token by it (grant.VerifyOptions.Recognize).
	TokenDigest string    `json:"token_digest,omitempty"`
	IssuedAt    time.Time `json:"issued_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	// Approval names the verified approval the grant was issued on; its
	// claim re-resolves that approval with the approval service.
	Approval *Approval `json:"approval,omitempty"`
	// Federation are the federated decision envelopes the grant was issued
	// on; its claim verifies them again, as evidence for the re-evaluation.
	Federation []string `json:"federation,omitempty"`

	State State `json:"state"`

	ClaimTokenDigest string    `json:"claim_token_digest,omitempty"`
	ClaimCorrelation string    `json:"claim_correlation,omitempty"`
	ClaimedAt        time.Time `json:"claimed_at,omitzero"`
	LeaseExpiresAt   time.Time `json:"lease_expires_at,omitzero"`

	FinalizedAt time.Time `json:"finalized_at,omitzero"`
	// FinalCode is set when finalization was refused but recorded
	// (CLAIM_LEASE_EXPIRED, CLAIM_SCOPE_INVARIANT_VIOLATION).
	FinalCode string `json:"final_code,omitempty"`
	// Lapsed marks an INDETERMINATE recorded by Expire: the lease passed
	// with no finalization. The executor's late finalize is still answered
	// CLAIM_LEASE_EXPIRED (once) and its evidence recorded as presented.
	Lapsed          bool            `json:"lapsed,omitempty"`
	Evidence        *Evidence       `json:"evidence,omitempty"`
	Receipt         *Receipt        `json:"receipt,omitempty"`
	EffectConfirmed bool            `json:"effect_confirmed"`
	Reconciliation  *Reconciliation `json:"reconciliation,omitempty"`
}

// Sealed is personal data sealed under a data subject's key: the key's id
// and the ciphertext, opened by package privacy.
type Sealed struct {
	KeyID      string `json:"key_id"`
	Ciphertext string `json:"ciphertext"`
}

// Approval is the approval a grant was issued on, as verified with the
// approval service that recorded it.
type Approval struct {
	Issuer    string `json:"issuer"`
	RequestID string `json:"request_id"`
	ReceiptID string `json:"receipt_id"`
	Approver  string `json:"approver"`
	Presence  string `json:"presence"`
	// EscalationID is the managed escalation the grant concluded; empty
	// for approval evidence presented with the intent.
	EscalationID string `json:"escalation_id,omitempty"`
}

// Evidence kinds with a fixed meaning.
const (
	EvidenceSignedReceipt = "SIGNED_RECEIPT"
	EvidenceConfirmed     = "CONFIRMED"
)

// Evidence is digest-bound proof of the effect.
type Evidence struct {
	Kind         string `json:"kind"`
	Status       string `json:"status"` // CONFIRMED confirms; other values are recorded
	EffectDigest string `json:"effect_digest"`
	// Source says where it came from: "effect_evidence" (explicit) or
	// "effect_receipt" (derived from a verified provider receipt).
	Source string `json:"source"`
}

// Receipt is a provider's signed effect receipt, recorded as presented.
type Receipt struct {
	Profile      string `json:"profile"` // as presented; only VP-3 verifies
	Token        string `json:"receipt"`
	KID          string `json:"kid,omitempty"`
	Issuer       string `json:"iss,omitempty"`
	EffectDigest string `json:"effect_digest,omitempty"`
	Outcome      string `json:"outcome,omitempty"` // what the provider says happened, if it says
	Verified     bool   `json:"verified"`
	Reason       string `json:"reason,omitempty"` // why it did not verify
}

// Reconciliation settles an INDETERMINATE finalization with late evidence.
// It never re-authorizes execution.
type Reconciliation struct {
	Resolution      Outcome   `json:"resolution"` // COMMITTED or FAILED
	Evidence        *Evidence `json:"evidence,omitempty"`
	Receipt         *Receipt  `json:"receipt,omitempty"`
	EffectConfirmed bool      `json:"effect_confirmed"`
	Note            string    `json:"note,omitempty"`
	ReconciledAt    time.Time `json:"reconciled_at"`
}

// ScopeClaim marks the one live claim of a concurrency scope.
type ScopeClaim struct {
	OrgID          string    `json:"org_id"`
	Scope          string    `json:"scope"`
	GrantID        string    `json:"grant_id"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

// Tx is what the lifecycle needs from a backend transaction scoped to one
// org. Lookups that find nothing return an error wrapping store.ErrNotFound.
type Tx interface {
	// Now is the store's clock: leases are judged by it.
	Now() time.Time
	Grant(ctx context.Context, grantID string) (Grant, error)
	PutGrant(ctx context.Context, g Grant) error
	// NonceGrant returns the grant that used nonce.
	NonceGrant(ctx context.Context, nonce string) (string, error)
	PutNonce(ctx context.Context, nonce, grantID string) error
	ScopeClaim(ctx context.Context, scope string) (ScopeClaim, error)
	PutScopeClaim(ctx context.Context, c ScopeClaim) error
	DeleteScopeClaim(ctx context.Context, scope string) error
}

// Reader lists lifecycle records outside a transaction.
type Reader interface {
	GrantOf(ctx context.Context, orgID, grantID string) (Grant, error)
	// GrantsInState calls fn for the org's grants in state in IssueOrder,
	// until fn returns false.
	GrantsInState(ctx context.Context, orgID string, state State, fn func(Grant) bool) error
}

// IssueOrder compares grants the way GrantsInState lists them: oldest
// IssuedAt first, grants issued at the same instant by grant id, bytewise.
// It lets a caller merge listings of two states into one.
func IssueOrder(a, b Grant) int {
	if c := a.IssuedAt.Compare(b.IssuedAt); c != 0 {
		return c
	}
	return strings.Compare(a.GrantID, b.GrantID)
}
