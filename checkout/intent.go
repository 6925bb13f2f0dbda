package checkout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/ucp"
)

// The names a checkout's decision is filed under, for policies to select.
const (
	DecisionType = decide.CheckoutDecisionType
	WorkflowKey  = "ucp.checkout"
	Surface      = decide.CheckoutSurface
	ActionType   = decide.CheckoutActionType
	// ActorType is the actor of a checkout: the credential that asked.
	ActorType = "api_key"
)

// intentOf is the exact action the policy evaluates for v: see the package
// contract for the mapping.
func intentOf(orgID string, v verified, key, nonce string, p core.Principal, now time.Time) decide.ExecutionIntent {
	amount, _ := amountOf(v.c.Total, v.c.Currency) // verify checked it
	actor := p.KeyID
	if actor == "" { // an embedded caller that named no principal
		actor = orgID
	}
	return decide.ExecutionIntent{
		IntentID: key, OrgID: orgID,
		Actor:       policy.Actor{ID: actor, Type: ActorType},
		Action:      policy.Action{Type: ActionType, Amount: amount, Currency: v.c.Currency, Target: v.c.ID},
		WorkflowKey: WorkflowKey, DecisionType: DecisionType, Surface: Surface,
		Context: v.facts(), Nonce: nonce, ConcurrencyScope: scopeOf(v.c.ID),
		Escalation: decide.Escalation{Mode: decide.EscalationNone}, IssuedAt: now.UTC().Format(time.RFC3339),
	}
}

// facts are the checkout's flat context members, for structured
// predicates (context.<key>).
func (v verified) facts() map[string]any {
	return map[string]any{
		"ucp_release": string(v.c.Release), "ucp_status": v.c.Status, "ucp_terms": v.terms,
		"ucp_merchant_kid": v.kid, "ucp_mandate": v.mandate, "ucp_line_items": len(v.c.LineItems),
		"ucp_total_minor": v.c.Total,
	}
}

// scopeOf is the concurrency scope of a checkout's grants: one live claim
// per checkout. The id is hashed, as it may be any string.
func scopeOf(checkoutID string) string {
	sum := sha256.Sum256([]byte(checkoutID))
	return decide.CheckoutScopePrefix + hex.EncodeToString(sum[:])
}

// amountOf is a total in minor units as the policy's amount: major units
// of the currency's ISO 4217 minor unit (5400 USD is 54.00, 5400 JPY is
// 5400, 5400 KWD is 5.400).
func amountOf(minor int64, code string) (policy.Amount, error) {
	bad := func(ptr, format string, args ...any) (policy.Amount, error) {
		e := core.Invalid(ucp.CodeInvalidEnvelope, ptr, format, args...)
		return policy.Amount{}, e
	}
	scale, ok := minorUnits[code]
	if !ok {
		return bad("/currency", "currency %q is not a current ISO 4217 currency with minor units", code)
	}
	if minor < 0 {
		return bad("/totals", "the total must not be negative")
	}
	digits := strconv.FormatInt(minor, 10)
	lit := digits
	if scale > 0 {
		if len(digits) <= scale {
			digits = strings.Repeat("0", scale-len(digits)+1) + digits
		}
		lit = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	f, err := policy.ParseAmount([]byte(lit))
	if err != nil {
		return bad("/totals", "the total %s %s is not an amount the policy can take: %v", lit, code, err)
	}
	return policy.Amount{Value: f, Set: true, Raw: lit}, nil
}

// ClaimInput is the policy input of a checkout grant's bound intent at
// claim time: the checkout verified again (its terms against the org's
// merchant keys as they are now), the intent's facts rebuilt from it.
func (s *Service) ClaimInput(ctx context.Context, orgID string, b decide.BoundIntent, now time.Time) (policy.Input, error) {
	v, err := s.verify(ctx, orgID, b.UCPCheckout)
	if err != nil {
		return policy.Input{}, err
	}
	intent := b.ExecutionIntent
	intent.Context = v.facts()
	in, err := decide.IntentInput(intent, "", now)
	if err != nil {
		return in, err
	}
	in.Extra = map[string]any{"checkout": v.summary()}
	return in, nil
}
