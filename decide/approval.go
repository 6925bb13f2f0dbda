package decide

import (
	"context"
	"encoding/json"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// VerifiedApproval is approval evidence verified directly with the org's
// approval service: the service recorded the approval for this org and
// this exact intent, and its sealed receipt verified against the service's
// published keys. It is evidence for a fresh evaluation, never authority by
// itself.
type VerifiedApproval struct {
	Issuer    string // the approval service (the receipt's iss)
	RequestID string
	ReceiptID string // the receipt's jti
	Receipt   string // the compact JWS
	Approver  string
	Presence  string
	DecidedAt time.Time
	// EscalationID is the managed escalation the approval concludes; empty
	// for evidence presented with an intent.
	EscalationID string
}

// Input is v as the policy sees it (approval.verified and the rest).
func (v VerifiedApproval) Input() *policy.Approval {
	return &policy.Approval{Verified: true, ApproverID: v.Approver, Method: v.Presence}
}

// Dossier is v as a dossier records it.
func (v VerifiedApproval) Dossier() *dossier.Approval {
	return &dossier.Approval{Issuer: v.Issuer, RequestID: v.RequestID, ReceiptID: v.ReceiptID, Receipt: v.Receipt,
		Approver: v.Approver, Presence: v.Presence, DecidedAt: v.DecidedAt.UTC().Format(time.RFC3339)}
}

// Grant is v as the grant issued on it names it.
func (v VerifiedApproval) Grant() *claim.Approval {
	return &claim.Approval{Issuer: v.Issuer, RequestID: v.RequestID, ReceiptID: v.ReceiptID, Approver: v.Approver,
		Presence: v.Presence, EscalationID: v.EscalationID}
}

// ManagedEscalation is the managed escalation an ESCALATE in ENFORCEMENT
// of an intent with escalation.mode MANAGED starts: the original exact
// intent, kept for the fresh evaluation its approval leads to.
type ManagedEscalation struct {
	EscalationID string
	OrgID        string
	IntentID     string
	IntentHash   string
	Intent       ExecutionIntent
	// Payload is the canonical intent; SignedIntent the JWS as received.
	Payload       json.RawMessage
	SignedIntent  string
	RequestedMode policy.Mode
	Principal     core.Principal
	CorrelationID string
	// DecisionID and DossierID are the ESCALATE decision's.
	DecisionID string
	DossierID  string
	CreatedAt  time.Time
	// Set by Approvals.OpenEscalation: the approval request, its page (kept
	// private: never answered to a caller) and the deadline.
	RequestID   string
	ApprovalURL string
	Deadline    time.Time
	// PersonalData is set when the ESCALATE decision was sealed (the org's
	// data-protection setting): Payload and SignedIntent are then sealed in
	// it, under the data subject's key, and Intent is empty until
	// Service.OpenManaged restores them.
	PersonalData *dossier.Sealed
}

// EscalationRef is the managed escalation status locator of an
// enforce-and-bind answer.
type EscalationRef struct {
	EscalationID string `json:"escalation_id"`
	Status       string `json:"status"`
	StatusURL    string `json:"status_url"`
	ExpiresAt    string `json:"expires_at"`
}

// Approvals is how enforce-and-bind reaches approvals (the escalation
// feature implements it). Its errors are core errors: evidence that fails
// verification is a conflict (409), an approval service that cannot be
// reached unavailable (503); none of them authorizes.
type Approvals interface {
	// VerifyEvidence verifies approval evidence presented with the intent
	// whose hash is intentHash, directly with the org's approval service.
	VerifyEvidence(ctx context.Context, orgID string, evidence json.RawMessage, intentHash string) (VerifiedApproval, error)
	// OpenEscalation opens the approval request of m at the org's approval
	// service, idempotently by m.EscalationID, before the ESCALATE decision
	// is recorded, and returns m with RequestID, ApprovalURL and Deadline.
	OpenEscalation(ctx context.Context, m ManagedEscalation) (ManagedEscalation, error)
	// RecordEscalation writes m in the ESCALATE decision's transaction and
	// returns its status locator.
	RecordEscalation(ctx context.Context, tx store.Tx, m ManagedEscalation) (EscalationRef, error)
	// UseReceipt binds v's receipt, in the transaction that issues a grant
	// on it, to the one intent (and escalation) it is evidence for: the
	// same receipt for anything else is a conflict.
	UseReceipt(ctx context.Context, tx store.Tx, v VerifiedApproval, intentHash string) error
}

// Codes of approvals.
const (
	// CodeApprovalServiceUnavailable: the approval service could not be
	// reached or answered nothing usable; nothing was granted.
	CodeApprovalServiceUnavailable = "APPROVAL_SERVICE_UNAVAILABLE"
	// CodeApprovalServiceNotConfigured: the org has no approval service,
	// so a managed escalation cannot start and evidence cannot be verified.
	CodeApprovalServiceNotConfigured = "APPROVAL_SERVICE_NOT_CONFIGURED"
)
