package approver

import "time"

// Status is where an approval request stands.
type Status string

// The statuses of an approval request. EXPIRED is never stored: a request
// still undecided at its expires_at is EXPIRED from then on, judged when it
// is read with the service's clock.
const (
	StatusPending   Status = "PENDING"
	StatusApproved  Status = "APPROVED"
	StatusDenied    Status = "DENIED"
	StatusExpired   Status = "EXPIRED"
	StatusCancelled Status = "CANCELLED"
	StatusRevoked   Status = "REVOKED"
)

// Actor is who asks to act: the agent or workflow named in the intent.
type Actor struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// Action is what the actor asks to do, as the approval page shows it.
type Action struct {
	Type        string `json:"type"`
	Amount      string `json:"amount,omitempty"` // a decimal string, e.g. "1250.00"
	Currency    string `json:"currency,omitempty"`
	Target      string `json:"target,omitempty"`
	WorkflowKey string `json:"workflow_key,omitempty"`
}

// OpenRequest is the body of POST /v1/approval-requests: Clearance opens
// one request per escalation. Opening the same (org_id, escalation_id)
// again with the same body answers the request as it stands (200); with
// another body it is refused (409 ESCALATION_CONFLICT).
type OpenRequest struct {
	OrgID        string `json:"org_id"`
	EscalationID string `json:"escalation_id"`
	IntentHash   string `json:"intent_hash"` // sha256:<64 lowercase hex>
	Actor        Actor  `json:"actor"`
	Action       Action `json:"action"`
	ExpiresAt    string `json:"expires_at"` // RFC 3339
}

// ApprovalRequest is an approval request as the API answers it.
//
// Receipt is set once a human decided (APPROVED or DENIED) and stays on a
// REVOKED request (it is then the receipt of the approval that was
// revoked). ApprovalURL is the page a human opens to decide; it is an
// unguessable locator that Clearance keeps to itself.
type ApprovalRequest struct {
	RequestID    string     `json:"request_id"`
	OrgID        string     `json:"org_id"`
	EscalationID string     `json:"escalation_id"`
	IntentHash   string     `json:"intent_hash"`
	Status       Status     `json:"status"`
	ExpiresAt    time.Time  `json:"expires_at"`
	CreatedAt    time.Time  `json:"created_at"`
	DecidedAt    *time.Time `json:"decided_at,omitempty"`
	Approver     string     `json:"approver,omitempty"` // the approver_id whose passkey decided
	Receipt      string     `json:"receipt,omitempty"`  // compact JWS, grant.VerifyApprovalReceipt
	ApprovalURL  string     `json:"approval_url"`
}

// EnrollApprover is the body of POST /v1/approvers.
type EnrollApprover struct {
	ApproverID  string `json:"approver_id"`  // e.g. an e-mail address, 1 to 200 characters
	DisplayName string `json:"display_name"` // shown by the authenticator; defaults to approver_id
}

// Enrollment answers POST /v1/approvers: the one-time link at which the
// approver registers a passkey. It expires after Options.EnrollmentTTL.
type Enrollment struct {
	ApproverID    string `json:"approver_id"`
	EnrollmentURL string `json:"enrollment_url"`
}

// CompletionHint is the body the completion notifier posts to Clearance's
// /v1/authority/presence-completions after a decision. It carries no
// authority: Clearance verifies the decision by asking the service.
type CompletionHint struct {
	EscalationID string `json:"escalation_id"`
	RequestID    string `json:"request_id"`
	OrgID        string `json:"org_id"`
}
