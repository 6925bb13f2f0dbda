package approval

import (
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
)

// Status is the state of an approval request at the service.
type Status string

// The statuses of the protocol. PENDING is the only one that can change by
// a human's decision; APPROVED can still become REVOKED.
const (
	StatusPending   Status = "PENDING"
	StatusApproved  Status = "APPROVED"
	StatusDenied    Status = "DENIED"
	StatusExpired   Status = "EXPIRED" // still undecided at expires_at
	StatusCancelled Status = "CANCELLED"
	StatusRevoked   Status = "REVOKED" // an operator withdrew the approval
)

// Valid reports whether s is one of the protocol's statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusApproved, StatusDenied, StatusExpired, StatusCancelled, StatusRevoked:
		return true
	}
	return false
}

// Limits of the members the package sends and accepts.
const (
	MaxIDLength      = 128      // request ids
	MaxTextLength    = 256      // org, escalation, actor and action members, approver
	MaxReceiptLength = 16 << 10 // a compact JWS receipt
	MaxURLLength     = 2048     // approval_url
)

// Actor is who the action is for, as the intent names it.
type Actor struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// Action is what a human is asked to approve, as the intent names it.
type Action struct {
	Type        string `json:"type"`
	Amount      string `json:"amount,omitempty"` // a decimal string, e.g. "1250.00"; "" when the action has none
	Currency    string `json:"currency,omitempty"`
	Target      string `json:"target,omitempty"`
	WorkflowKey string `json:"workflow_key,omitempty"`
}

// OpenRequest asks the approval service to open a request for one
// escalation. The service is idempotent on (OrgID, EscalationID): the same
// request again answers the one opened before; another body is ErrConflict.
type OpenRequest struct {
	OrgID        string
	EscalationID string
	IntentHash   string // sha256:<64 lowercase hex> of the canonical intent
	Actor        Actor
	Action       Action
	ExpiresAt    time.Time // sent in UTC, to the second
}

// Request is an approval request as the service answered it. ApprovalURL
// is the page the human opens: Clearance keeps it to itself, and Request's
// Format never prints it.
type Request struct {
	RequestID    string
	OrgID        string
	EscalationID string
	IntentHash   string
	Status       Status
	ExpiresAt    time.Time
	CreatedAt    time.Time
	DecidedAt    time.Time // zero while undecided
	Approver     string    // "" while undecided
	Receipt      string    // compact JWS; present for APPROVED, DENIED and REVOKED
	ApprovalURL  string
}

// Format prints r under every verb without ApprovalURL.
func (r Request) Format(f fmt.State, _ rune) {
	shown := "unset"
	if r.ApprovalURL != "" {
		shown = "set"
	}
	fmt.Fprintf(f, "approval.Request{RequestID: %q, OrgID: %q, EscalationID: %q, IntentHash: %q, Status: %s, ExpiresAt: %s, CreatedAt: %s",
		r.RequestID, r.OrgID, r.EscalationID, r.IntentHash, r.Status, r.ExpiresAt.Format(time.RFC3339Nano), r.CreatedAt.Format(time.RFC3339Nano))
	if !r.DecidedAt.IsZero() {
		fmt.Fprintf(f, ", DecidedAt: %s", r.DecidedAt.Format(time.RFC3339Nano))
	}
	if r.Approver != "" {
		fmt.Fprintf(f, ", Approver: %q", r.Approver)
	}
	if r.Receipt != "" {
		fmt.Fprintf(f, ", Receipt: %d bytes", len(r.Receipt))
	}
	_, _ = io.WriteString(f, ", ApprovalURL: "+shown+"}")
}

// Binding is what an approval must be for: the escalation's org and the
// hash of its exact intent.
type Binding struct {
	OrgID      string
	IntentHash string
}

// Evidence is what a client presents as proof of an approval: the
// request's id and the receipt it was given.
type Evidence struct {
	RequestID string
	Receipt   string
}

// Verified is the outcome of Verify: either StatusPending (undecided, no
// receipt) or StatusApproved with the verified receipt. Only Approved()
// authorizes anything.
type Verified struct {
	Status     Status
	Request    Request
	Receipt    grant.ApprovalReceipt // zero unless approved
	ReceiptJWS string                // the receipt as the service answered it
	KeyID      string                // the kid the receipt was verified with
}

// Approved reports whether v is a verified approval.
func (v Verified) Approved() bool {
	return v.Status == StatusApproved && v.ReceiptJWS != "" && v.Receipt.Decision == grant.ApprovalApproved
}

// idPattern is a request id: safe as one URL path segment, never "." or "..".
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._~-]*$`)

func checkID(name, id string) error {
	if len(id) == 0 || len(id) > MaxIDLength || !idPattern.MatchString(id) {
		return fmt.Errorf("%s %q is not 1 to %d of A-Z a-z 0-9 . _ ~ - starting with a letter or digit", name, truncate(id), MaxIDLength)
	}
	return nil
}

// checkText accepts 1 to MaxTextLength bytes of UTF-8 without control
// characters (or 0 when optional).
func checkText(name, s string, required bool) error {
	if s == "" {
		if required {
			return fmt.Errorf("%s is required", name)
		}
		return nil
	}
	if len(s) > MaxTextLength || !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return fmt.Errorf("%s must be at most %d bytes of UTF-8 without control characters", name, MaxTextLength)
	}
	return nil
}

func checkDigest(name, s string) error {
	if _, err := canon.ParseDigest(s); err != nil {
		return fmt.Errorf("%s is not sha256:<64 lowercase hex>", name)
	}
	return nil
}

// amountPattern is a non-negative decimal without exponent or leading zeros.
var amountPattern = regexp.MustCompile(`^(0|[1-9][0-9]{0,30})(\.[0-9]{1,18})?$`)

func (o OpenRequest) validate() error {
	for _, c := range []struct {
		name, v  string
		required bool
	}{
		{"org_id", o.OrgID, true}, {"escalation_id", o.EscalationID, true},
		{"actor.id", o.Actor.ID, true}, {"actor.type", o.Actor.Type, true},
		{"action.type", o.Action.Type, true}, {"action.currency", o.Action.Currency, false},
		{"action.target", o.Action.Target, false}, {"action.workflow_key", o.Action.WorkflowKey, false},
	} {
		if err := checkText(c.name, c.v, c.required); err != nil {
			return err
		}
	}
	if err := checkDigest("intent_hash", o.IntentHash); err != nil {
		return err
	}
	if o.Action.Amount != "" && !amountPattern.MatchString(o.Action.Amount) {
		return fmt.Errorf("action.amount %q is not a non-negative decimal string", truncate(o.Action.Amount))
	}
	if o.ExpiresAt.IsZero() {
		return fmt.Errorf("expires_at is required")
	}
	return nil
}

func (b Binding) validate() error {
	if err := checkText("org_id", b.OrgID, true); err != nil {
		return err
	}
	return checkDigest("intent_hash", b.IntentHash)
}

// checkApprovalURL accepts an absolute http(s) URL; where it points is not
// Clearance's business (a human opens it), only that it is one.
func checkApprovalURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || len(s) > MaxURLLength || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return fmt.Errorf("approval_url is not an absolute http(s) URL of at most %d bytes", MaxURLLength)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
