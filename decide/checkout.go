package decide

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// BoundIntent is what a grant keeps of the intent it was issued for, to
// evaluate it again at claim time: the execution intent and, for a UCP
// checkout, the checkout envelope it was derived from (canonical JSON),
// whose verification the checkout feature repeats.
type BoundIntent struct {
	ExecutionIntent `json:",inline"`
	UCPCheckout     json.RawMessage `json:"ucp_checkout,omitempty"`
}

// CheckoutIntent is a validated UCP checkout on its way to a recorded
// decision. The checkout feature validated the envelope and verified its
// terms; it derived Intent, the exact action the policy sees, whose
// IntentID scopes the decision's idempotency.
type CheckoutIntent struct {
	OrgID string
	// Checkout is the envelope's RFC 8785 form: the dossier's intent. Its
	// digest is the intent_hash the grant is bound to.
	Checkout   json.RawMessage
	AsReceived string
	Intent     ExecutionIntent
	// Extra is what CEL sees beside the standard members (intent.checkout).
	Extra map[string]any
	// Evidence is the verification the dossier records.
	Evidence      dossier.Checkout
	Principal     core.Principal
	CorrelationID string
	RequestID     string
	// Conclude runs last in the transaction that records the decision,
	// with its answer; its error aborts the whole unit.
	Conclude func(ctx context.Context, tx store.Tx, a AuthorityDecision) error
}

// BindCheckout evaluates a UCP checkout under the org's active policy and
// records the decision (route ucp.checkout.authorize) like EnforceAndBind:
// ALLOW in ENFORCEMENT binds a single-use grant to the checkout's digest;
// anything else binds nothing. The same IntentID and checkout again return
// the recorded answer (Replayed); another checkout under a recorded
// IntentID is core.ErrConflict.
func (s *Service) BindCheckout(ctx context.Context, c CheckoutIntent) (AuthorityDecision, error) {
	signer, err := s.signer()
	if err != nil {
		return AuthorityDecision{}, err
	}
	bound, err := canon.Marshal(BoundIntent{ExecutionIntent: c.Intent, UCPCheckout: c.Checkout})
	if err != nil {
		return AuthorityDecision{}, core.Invalid(core.CodeInvalidRequest, "", "the checkout cannot be canonicalized")
	}
	evaluated, err := canon.Marshal(c.Intent)
	if err != nil {
		return AuthorityDecision{}, core.Invalid(core.CodeInvalidRequest, "", "the checkout cannot be canonicalized")
	}
	dr := draft{route: RouteUCPCheckout, org: c.OrgID, intent: c.Checkout, bound: bound, asReceived: c.AsReceived,
		intentDigest: canon.Digest(c.Checkout), principal: c.Principal, key: c.Intent.IntentID, corr: c.CorrelationID,
		requestID: c.RequestID, now: s.d.Now()}
	if dr.in, err = IntentInput(c.Intent, "", dr.now); err != nil {
		return AuthorityDecision{}, err
	}
	dr.in.Extra = c.Extra
	b := binding{dr: &dr, intent: c.Intent, signer: signer}
	if err := s.resolveAndEvaluate(ctx, &b); err != nil {
		return AuthorityDecision{}, err
	}
	ev := c.Evidence
	ev.EvaluatedIntent = evaluated
	b.d.Checkout = &ev
	var conclude func(ctx context.Context, tx store.Tx, a AuthorityDecision, seal dossier.Sealer) error
	if c.Conclude != nil {
		// What it keeps (the checkout's authority) names no personal data.
		conclude = func(ctx context.Context, tx store.Tx, a AuthorityDecision, _ dossier.Sealer) error {
			return c.Conclude(ctx, tx, a)
		}
	}
	out, err := s.bind(ctx, &b, conclude)
	if errors.Is(err, idempotency.ErrKeyReused) {
		return AuthorityDecision{}, core.New(core.ErrConflict, core.CodeIdempotencyKeyReused, "Idempotency-Key %q was used for another checkout", c.Intent.IntentID)
	}
	return out, err
}

// Names only a checkout's decisions carry: every other route refuses them,
// so that no caller can present its own request as a verified checkout to
// a policy that trusts these names, or squat a checkout's concurrency
// scope.
const (
	CheckoutDecisionType  = "UCP_CHECKOUT"
	CheckoutActionType    = "ucp.checkout.complete"
	CheckoutSurface       = "ucp"
	CheckoutContextPrefix = "ucp_" // of every context key
	CheckoutScopePrefix   = "ucp-checkout:"
)

// refuseCheckoutNames refuses an input (and the concurrency scope of a
// signed intent, "" for none) of a route other than the checkout's that
// carries a name reserved for checkouts.
func refuseCheckoutNames(in *policy.Input, scope string) error {
	reserved := func(field, v string) error {
		return core.Invalid(policy.CodeInvalidIdentifier, field, "%s %q is reserved for UCP checkout authorizations (POST /v1/ucp/checkout/authorize)", field, v)
	}
	switch {
	case in.DecisionType == CheckoutDecisionType:
		return reserved("decision_type", in.DecisionType)
	case in.ActionType == CheckoutActionType:
		return reserved("action.type", in.ActionType)
	case in.Surface == CheckoutSurface:
		return reserved("surface", in.Surface)
	case strings.HasPrefix(scope, CheckoutScopePrefix):
		return reserved("concurrency_scope", scope)
	}
	for k := range in.Context {
		if strings.HasPrefix(k, CheckoutContextPrefix) {
			return reserved("context."+k, k)
		}
	}
	return nil
}
