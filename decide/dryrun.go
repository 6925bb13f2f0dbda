package decide

import (
	"context"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
)

// DryRunRequest is an evaluation that records nothing: the body of one of
// Evaluate's routes, decoded and resolved as Evaluate does.
type DryRunRequest struct {
	EvaluateRequest
	// Policy, when set, gives the policy evaluated instead of what the
	// org's resolution picks (a draft or another version), once the org is
	// known; the answer is then SHADOW whatever the bundle's mode.
	Policy func(ctx context.Context, orgID string) (*policy.Compiled, error)
	// Explain adds the evaluation's explanation (policy.Compiled.Explain).
	Explain bool
}

// DryRun is the answer of a dry run. It is marked as one in every way a
// client could read it: no decision, dossier or ledger entry exists for it,
// nothing is idempotent about it, and it never authorizes anything.
type DryRun struct {
	DryRun bool `json:"dry_run"` // always true
	// Authorizes and ShouldExecute are always false: a dry run is never
	// authority for anything, whatever its outcome.
	Authorizes      bool            `json:"authorizes"`
	ShouldExecute   bool            `json:"should_execute"`
	OrgID           string          `json:"org_id"`
	Outcome         policy.Outcome  `json:"outcome"`
	ReasonCodes     []string        `json:"reason_codes"`
	MatchedRules    []string        `json:"matched_rules"`
	EvaluationError string          `json:"evaluation_error,omitempty"`
	PolicySnapshot  policy.Snapshot `json:"policy_snapshot"`
	// Mode is the mode a recorded decision would have had (SHADOW for a
	// pin, a draft or another version than the active one).
	Mode        policy.Mode          `json:"mode"`
	Signals     []dossier.Signal     `json:"signals,omitempty"`
	Spend       []dossier.SpendCheck `json:"spend,omitempty"`
	Federation  []dossier.Federated  `json:"federation,omitempty"`
	EvaluatedAt string               `json:"evaluated_at"`
	Explanation *policy.Explanation  `json:"explanation,omitempty"`
}

// DryRun evaluates like Evaluate and records nothing: no dossier, ledger
// entry, chain member, idempotency record or event. The request is
// validated as strictly as Evaluate validates it (a body Evaluate refuses
// is refused here with the same code).
func (s *Service) DryRun(ctx context.Context, req DryRunRequest) (DryRun, error) {
	if !req.Route.known() {
		return DryRun{}, core.Invalid(core.CodeInvalidRequest, "", "route %q does not evaluate decisions", req.Route)
	}
	body, err := decode(req.Route, req.Body, req.PathOrg, s.d.JSON)
	if err != nil {
		return DryRun{}, core.TranslateInput(err)
	}
	org, err := s.resolveOrg(ctx, req.OrgID, body.org, req.Principal)
	if err != nil {
		return DryRun{}, err
	}
	key, err := pick(req.IdempotencyKey, body.key, "idempotency_key")
	if err != nil {
		return DryRun{}, err
	}
	corr, err := pick(req.CorrelationID, body.corr, "correlation_id")
	if err != nil {
		return DryRun{}, err
	}
	caller := core.Caller{OrgID: org, Principal: req.Principal, RequestID: req.RequestID, IdempotencyKey: key, CorrelationID: corr}
	if err := caller.Validate(); err != nil {
		return DryRun{}, err
	}
	dr := draft{route: req.Route, org: org, now: s.d.Now()}
	if dr.in, err = body.intent.Input(dr.now); err != nil {
		return DryRun{}, core.TranslateInput(err)
	}
	dr.in.Extra = body.extra
	if err := refuseCheckoutNames(&dr.in, ""); err != nil {
		return DryRun{}, err
	}
	if dr.pin, err = body.intent.PolicyPin(); err != nil {
		return DryRun{}, core.TranslateInput(err)
	}
	if err := s.verifyFederation(ctx, &dr, body.federated); err != nil {
		return DryRun{}, err
	}
	mode := policy.ModeShadow
	if req.Policy != nil {
		if dr.pin != "" {
			// A pin Evaluate would refuse is refused here too.
			if _, err := s.cfg.Policies.Resolve(ctx, org, dr.pin); err != nil {
				return DryRun{}, err
			}
		}
		c, err := req.Policy(ctx, org)
		if err != nil {
			return DryRun{}, err
		}
		dr.res = policy.Resolution{Policy: c}
	} else {
		if dr.res, err = s.cfg.Policies.Resolve(ctx, org, dr.pin); err != nil {
			return DryRun{}, err
		}
		mode = dr.res.Mode(dr.in.RequestedMode)
	}
	used, err := s.signalsFor(ctx, &dr)
	if err != nil {
		return DryRun{}, err
	}
	spent, err := s.spendFor(ctx, &dr)
	if err != nil {
		return DryRun{}, err
	}
	c := dr.res.Policy
	out := DryRun{DryRun: true, OrgID: org, PolicySnapshot: c.Snapshot(), Mode: mode, Signals: used, Spend: spent, Federation: dr.federation,
		EvaluatedAt: dr.now.Format(core.TimeFormat)}
	if req.Explain {
		x := c.Explain(&dr.in)
		out.Outcome, out.ReasonCodes, out.MatchedRules = x.Outcome, x.ReasonCodes, x.MatchedRules
		out.EvaluationError = x.EvaluationError
		out.Explanation = &x
	} else {
		d := c.Evaluate(&dr.in)
		out.Outcome, out.ReasonCodes, out.MatchedRules = d.Outcome, d.ReasonCodes, nonNil(d.MatchedRules)
		if d.Err != nil {
			out.EvaluationError = d.Err.Error()
		}
	}
	return out, nil
}
