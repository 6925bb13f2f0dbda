package decide

import (
	"context"
	"errors"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/outbox"
	"github.com/clearancehq/clearance/store"
)

// EvaluateRequest is one decision to make: the request body exactly as
// received on Route, decoded and validated here, so that what is evaluated
// is what the dossier records.
type EvaluateRequest struct {
	// OrgID is the org the caller acts on. "" resolves it from the body's
	// org_id (or PathOrg) with Principal, as the server does; when set, a
	// body naming another org_id is refused (ORG_MISMATCH).
	OrgID string
	Route Route
	// Body is the request body as received. Its members are those of the
	// route's request (evaluate-decision: policy input plus org_id and
	// parent_decision_id; the gates: plus idempotency_key and
	// correlation_id; the cloud agent route: its own shape).
	Body []byte
	// PathOrg is the org the route's path names (crm.action-gate); it must
	// agree with the body's org_id.
	PathOrg string
	// IdempotencyKey and CorrelationID are the caller's (headers); a body
	// member with the same role must agree with them.
	IdempotencyKey string
	CorrelationID  string
	RequestID      string
	Principal      core.Principal
	// WantEnvelope asks for a signed verification envelope of the decision
	// (the server sets it for agent-safe-pipeline/0.2.0 and later); it is
	// given when grant signing is configured.
	WantEnvelope bool
}

// Evaluate makes one decision: it decodes the body, resolves the org and
// its policy, evaluates, and durably records dossier, ledger entry, chain
// member and idempotency record in one atomic write before answering.
func (s *Service) Evaluate(ctx context.Context, req EvaluateRequest) (Decision, error) {
	if !req.Route.known() {
		return Decision{}, core.Invalid(core.CodeInvalidRequest, "", "route %q does not evaluate decisions", req.Route)
	}
	body, err := decode(req.Route, req.Body, req.PathOrg, s.d.JSON)
	if err != nil {
		return Decision{}, core.TranslateInput(err)
	}
	org, err := s.resolveOrg(ctx, req.OrgID, body.org, req.Principal)
	if err != nil {
		return Decision{}, err
	}
	key, err := pick(req.IdempotencyKey, body.key, "idempotency_key")
	if err != nil {
		return Decision{}, err
	}
	corr, err := pick(req.CorrelationID, body.corr, "correlation_id")
	if err != nil {
		return Decision{}, err
	}
	caller := core.Caller{OrgID: org, Principal: req.Principal, RequestID: req.RequestID, IdempotencyKey: key, CorrelationID: corr}
	if err := caller.Validate(); err != nil {
		return Decision{}, err
	}
	// The envelope's key is taken before anything is recorded, so that a
	// revoked active key refuses the request rather than a recorded answer.
	var envSigner grant.Key
	if req.WantEnvelope {
		if keys, err := s.d.Keys.Current(); err == nil {
			if envSigner, err = keys.Signer(); err != nil {
				return Decision{}, err
			}
		}
	}
	dr := draft{route: req.Route, org: org, principal: req.Principal, key: key, corr: corr, requestID: req.RequestID,
		parent: body.parent, now: s.d.Now(), asReceived: string(req.Body)}
	if dr.in, err = body.intent.Input(dr.now); err != nil {
		return Decision{}, core.TranslateInput(err)
	}
	dr.in.Extra = body.extra
	if err := refuseCheckoutNames(&dr.in, ""); err != nil {
		return Decision{}, err
	}
	if dr.pin, err = body.intent.PolicyPin(); err != nil {
		return Decision{}, core.TranslateInput(err)
	}
	if err := s.verifyFederation(ctx, &dr, body.federated); err != nil {
		return Decision{}, err
	}
	if dr.intent, err = body.canonicalIntent(req.Body); err != nil {
		return Decision{}, core.Invalid(core.CodeInvalidRequest, "", "request body cannot be canonicalized: %v", err)
	}
	dr.intentDigest = canon.Digest(dr.intent)
	if dr.parentChain, err = s.parentChain(ctx, org, dr.parent, "parent_decision_id", CodeInvalidParentDecision); err != nil {
		return Decision{}, err
	}
	// The active version this process saw last, confirmed inside the
	// transaction: a decision is recorded under the version active when it
	// commits, and the store is not read for it on every decision.
	if dr.res, err = s.cfg.Policies.ResolveSeen(ctx, org, dr.pin); err != nil {
		return Decision{}, err
	}
	dr.seen = true
	ids, err := s.newIDs(3)
	if err != nil {
		return Decision{}, err
	}
	var resolved outbox.Prepared
	if dr.route == RouteEvaluateDecision {
		// ids: dossier, decision, evaluation (draft.evaluate).
		if resolved, err = prepareResolved(org, ids[2], ids[0], dr.now); err != nil {
			return Decision{}, core.Translate("prepare decision.resolved", err)
		}
	}
	var out Decision
	var replayed, emitted bool
	for tries := 1; ; tries++ {
		d, evalErr := s.evaluateTraced(ctx, &dr, ids)
		if evalErr != nil {
			return Decision{}, evalErr
		}
		replayed, err = record(ctx, s, &dr, &d, &out, func(tx store.Tx, digest string, _ dossier.Sealer) (Decision, error) {
			dec := decisionOf(&d, digest)
			emitted = false
			if dr.route != RouteEvaluateDecision {
				return dec, nil
			}
			var err error
			emitted, err = resolved.Emit(ctx, tx)
			return dec, err
		})
		if !errors.Is(err, errPolicyMoved) {
			break
		}
		if tries == maxPolicyMoves {
			return Decision{}, core.New(core.ErrConflict, core.CodeStaleAuthorization,
				"the org's active policy changed %d times while this request was decided; send it again", tries)
		}
		if dr.res, err = s.cfg.Policies.ResolveSeen(ctx, org, dr.pin); err != nil {
			return Decision{}, err
		}
	}
	if err != nil {
		return Decision{}, core.Translate("record decision", err)
	}
	out.Replayed = replayed
	if !replayed && emitted {
		s.emitted()
	}
	// A replay's Update wrote nothing, but the backend returns only once what
	// it read is durable, so a replayed answer is never ahead of the disk.
	if !envSigner.IsZero() {
		if out.VerificationEnvelope, err = s.envelope(ctx, envSigner, out, "", ""); err != nil {
			return Decision{}, core.Unavailable("sign envelope", err)
		}
	}
	return out, nil
}

// maxPolicyMoves bounds how many times a decision is evaluated again
// because the org's active version moved under it.
const maxPolicyMoves = 3

// resolveOrg is the org a request acts on: explicit (a library caller's),
// which the body's org_id must not contradict, or else the one the body
// names, resolved with the credential; an org that does not exist is
// ORG_NOT_FOUND.
func (s *Service) resolveOrg(ctx context.Context, explicit, named string, p core.Principal) (string, error) {
	org := explicit
	if org == "" {
		var err error
		if org, err = p.ResolveOrg(named); err != nil {
			return "", err
		}
	} else if named != "" && named != org {
		return "", core.New(core.ErrForbidden, core.CodeOrgMismatch, "org_id does not match the credential's organization")
	}
	if err := s.d.Store.RequireOrg(ctx, org); err != nil {
		return "", err
	}
	return org, nil
}
