package checkout

import (
	"context"
	"errors"

	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/ucp"
)

// Codes of checkout authorizations (the envelope's own are package ucp's).
const (
	// CodeRefused: the policy did not allow the checkout (403).
	CodeRefused = "UCP_CHECKOUT_REFUSED"
	// CodeAuthorityConflict: the checkout id retains authority for another
	// exact checkout (409).
	CodeAuthorityConflict = "UCP_AUTHORITY_CONFLICT"
)

// Config holds the features a checkout authorization goes through.
type Config struct {
	// Decide evaluates and records the checkout's decision and binds its
	// grant.
	Decide *decide.Service
}

// Service authorizes UCP checkouts. Create it with New.
type Service struct {
	d   core.Deps
	cfg Config
}

// New returns the checkout feature over the kernel d.
func New(d core.Deps, cfg Config) *Service { return &Service{d: d, cfg: cfg} }

// Request is one checkout authorization.
type Request struct {
	OrgID string
	// Body is the UCP checkout response envelope exactly as received.
	Body           []byte
	IdempotencyKey string
	CorrelationID  string
	RequestID      string
	Principal      core.Principal
}

// Authorize validates the checkout, verifies its terms and mandate,
// evaluates it under the org's active policy and records the decision;
// an authoritative answer carries the exact-action grant. A policy that
// does not allow it in ENFORCEMENT is a *Refused error carrying the
// answer (403); see the package contract for the rest.
func (s *Service) Authorize(ctx context.Context, req Request) (Authorization, error) {
	for name, v := range map[string]string{"Idempotency-Key": req.IdempotencyKey, "X-Correlation-Id": req.CorrelationID} {
		if v != "" && !core.ValidToken(v) {
			code := core.CodeInvalidIdempotencyKey
			if name == "X-Correlation-Id" {
				code = core.CodeInvalidCorrelationID
			}
			return Authorization{}, core.Invalid(code, name, "%s must be 1 to %d visible ASCII characters", name, core.MaxKeyLength)
		}
	}
	v, err := s.verify(ctx, req.OrgID, req.Body)
	if err != nil {
		return Authorization{}, err
	}
	// A grant issued for this checkout between the read of its retained
	// authority and the commit aborts the commit; the second round answers
	// with that authority.
	for round := 0; ; round++ {
		key, err := s.keyFor(ctx, req, v)
		if err != nil {
			return Authorization{}, err
		}
		nonce, err := s.d.IDs.New()
		if err != nil {
			return Authorization{}, core.Unavailable("id generation", err)
		}
		now := s.d.Now()
		intent := intentOf(req.OrgID, v, key, "ucp-nonce:"+nonce, req.Principal, now)
		out, err := s.cfg.Decide.BindCheckout(ctx, decide.CheckoutIntent{
			OrgID: req.OrgID, Checkout: v.c.Canonical, AsReceived: string(req.Body), Intent: intent,
			Extra: map[string]any{"checkout": v.summary()}, Evidence: v.evidence(), Principal: req.Principal,
			CorrelationID: req.CorrelationID, RequestID: req.RequestID, Conclude: s.retain(v, key),
		})
		if errors.Is(err, errRetainedMeanwhile) && round == 0 {
			continue
		}
		if err != nil {
			return Authorization{}, err
		}
		a := answerOf(v, out)
		if out.Mode == policy.ModeEnforcement && a.Authority.Grant == nil {
			return a, &Refused{Answer: a}
		}
		return a, nil
	}
}

// Refused is a checkout the policy did not allow in ENFORCEMENT: an error
// of kind forbidden (403, code UCP_CHECKOUT_REFUSED) whose Answer is the
// recorded, non-authoritative answer.
type Refused struct{ Answer Authorization }

func (r *Refused) Error() string {
	return "checkout refused by policy: " + string(r.Answer.Authority.Outcome)
}

// Unwrap makes the refusal a forbidden-kind error.
func (r *Refused) Unwrap() error { return core.ErrForbidden }

// ErrorCode is the refusal's stable code.
func (r *Refused) ErrorCode() string { return CodeRefused }

// envelopeError is a ucp refusal as the API reports it: a 400 with the
// ucp code, naming the failing JSON pointer.
func envelopeError(err error) error {
	var ue *ucp.Error
	if !errors.As(err, &ue) {
		return core.Unavailable("validate checkout", err)
	}
	return &core.Error{Kind: core.ErrInvalidRequest, Code: ue.Code, Detail: ue.Detail, Err: err,
		Fields: []core.FieldError{{Field: ue.Pointer, Message: ue.Detail}}}
}
