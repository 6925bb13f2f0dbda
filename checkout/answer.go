package checkout

import (
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/policy"
)

// Authorization is the UCP-shaped answer of a checkout authorization: the
// release it was negotiated at, the checkout it is bound to, the decision
// and, when authoritative, its exact-action grant, and UCP messages saying
// the same for a UCP platform.
type Authorization struct {
	UCP            Negotiated `json:"ucp"`
	CheckoutID     string     `json:"checkout_id"`
	CheckoutDigest string     `json:"checkout_digest"`
	Authority      Authority  `json:"authority"`
	Terms          Terms      `json:"terms"`
	Mandate        string     `json:"mandate"`
	Messages       []Message  `json:"messages"`
	// Replayed: the answer was recorded before (same Idempotency-Key, or
	// the authority the checkout retains).
	Replayed bool `json:"-"`
}

// Negotiated is the UCP release the envelope was validated against.
type Negotiated struct {
	Version string `json:"version"`
}

// Authority is the recorded decision on the checkout.
type Authority struct {
	// Authoritative is true only for ALLOW in ENFORCEMENT with a grant.
	Authoritative  bool            `json:"authoritative"`
	Outcome        policy.Outcome  `json:"outcome"`
	Mode           policy.Mode     `json:"mode"`
	ReasonCodes    []string        `json:"reason_codes"`
	DecisionID     string          `json:"decision_id"`
	DossierID      string          `json:"dossier_id"`
	DossierURL     string          `json:"dossier_url"`
	DossierDigest  string          `json:"dossier_digest"`
	PolicySnapshot policy.Snapshot `json:"policy_snapshot"`
	Grant          *Grant          `json:"grant,omitempty"`
}

// Grant is the exact-action grant of an authoritative answer: claim it with
// claim-token (execution_token, intent_hash) right before the merchant
// commits, then finalize it.
type Grant struct {
	ExecutionToken string `json:"execution_token"`
	GrantID        string `json:"grant_id"`
	ExpiresAt      string `json:"expires_at"`
	// IntentHash is the checkout's digest: the grant is bound to it.
	IntentHash string `json:"intent_hash"`
}

// Terms is what the merchant's terms signature proved.
type Terms struct {
	Status string `json:"status"` // VERIFIED, UNKNOWN_KEY or ABSENT
	KID    string `json:"kid,omitempty"`
}

// Message is a UCP message (common/types/message.json): type info or
// error; errors carry a severity.
type Message struct {
	Type     string `json:"type"`
	Code     string `json:"code"`
	Content  string `json:"content"`
	Severity string `json:"severity,omitempty"`
}

func answerOf(v verified, d decide.AuthorityDecision) Authorization {
	a := Authorization{
		UCP: Negotiated{Version: string(v.c.Release)}, CheckoutID: v.c.ID, CheckoutDigest: v.c.Digest,
		Authority: Authority{Outcome: d.Outcome, Mode: d.Mode, ReasonCodes: d.ReasonCodes, DecisionID: d.DecisionID,
			DossierID: d.DossierID, DossierURL: d.DossierURL, DossierDigest: d.DossierDigest, PolicySnapshot: d.PolicySnapshot},
		Terms: Terms{Status: v.terms, KID: v.kid}, Mandate: v.mandate, Replayed: d.Replayed,
	}
	if d.ExecutionToken != "" {
		a.Authority.Authoritative = true
		a.Authority.Grant = &Grant{ExecutionToken: d.ExecutionToken, GrantID: d.GrantID, ExpiresAt: d.ExpiresAt, IntentHash: d.IntentHash}
	}
	a.Messages = []Message{messageOf(a.Authority)}
	return a
}

// messageOf says the decision as a UCP message. Its codes are UCP message
// codes (snake case, documented with the answer), not problem codes.
func messageOf(a Authority) Message {
	switch {
	case a.Authoritative:
		return Message{"info", "authority_granted",
			"Clearance allowed this checkout: claim the grant right before completing it, then finalize it.", ""}
	case a.Mode == policy.ModeShadow:
		return Message{"info", "authority_not_enforced",
			"Clearance evaluated this checkout in SHADOW mode (" + string(a.Outcome) + "); no grant is issued.", ""}
	case a.Outcome == policy.OutcomeEscalate || a.Outcome == policy.OutcomeReviewRequired:
		return Message{"error", "authority_review_required",
			"Clearance's policy requires review before this checkout may complete (" + string(a.Outcome) + ").", "requires_buyer_review"}
	}
	return Message{"error", "authority_refused", "Clearance's policy refused this checkout (" + string(a.Outcome) + ").", "unrecoverable"}
}
