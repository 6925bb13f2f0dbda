package clearance

import (
	"context"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// Route names the entry point a decision came through. It is recorded in
// the dossier and scopes Idempotency-Keys.
type Route string

// Entry points that evaluate decisions; all share one evaluation path.
const (
	RouteEvaluateDecision Route = "evaluate-decision"
	RouteActionGate       Route = "action-gate"
	RouteCRMActionGate    Route = "crm.action-gate"
	RouteWorkspaceApp     Route = "workspace-app.action-gate"
	RouteCloudAgentVerify Route = "cloud.agent.extensions.verify"
)

// EvaluateRequest is one decision to make.
type EvaluateRequest struct {
	OrgID  string
	Route  Route
	Intent policy.Intent
	// Extra carries route-specific members (visible to CEL as intent.<name>).
	Extra map[string]any
	// Raw is the request body exactly as received; the dossier keeps it.
	Raw            []byte
	IdempotencyKey string
	CorrelationID  string
	RequestID      string
	Principal      Principal
	Approval       *policy.Approval
	// ParentDecisionID names an earlier decision of the org whose chain this
	// one joins (see Chain for the rule); "" for none.
	ParentDecisionID string
	// WantEnvelope asks for a signed verification envelope of the decision
	// (the server sets it for agent-safe-pipeline/0.2.0 and later); it is
	// given when grant signing is configured.
	WantEnvelope bool
}

// Decision is the answer to an EvaluateRequest. Its JSON form is the
// evaluate-decision response body.
type Decision struct {
	DecisionID     string          `json:"decision_id"`
	EvaluationID   string          `json:"evaluation_id"`
	DossierID      string          `json:"dossier_id"`
	OrgID          string          `json:"org_id"`
	Outcome        policy.Outcome  `json:"outcome"`
	ReasonCodes    []string        `json:"reason_codes"`
	PolicySnapshot policy.Snapshot `json:"policy_snapshot"`
	Mode           policy.Mode     `json:"mode"`
	DossierURL     string          `json:"dossier_url"`
	DossierDigest  string          `json:"dossier_digest"`
	LedgerSeq      uint64          `json:"ledger_seq"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	CreatedAt      string          `json:"created_at"`
	// ChainID names the decision chain the decision joined (see Chain).
	ChainID          string `json:"chain_id,omitempty"`
	ParentDecisionID string `json:"parent_decision_id,omitempty"`
	// ActivePolicyVersion is set when the request pinned another version
	// than the org's active one (this one): the answer is then SHADOW.
	ActivePolicyVersion string `json:"active_policy_version,omitempty"`
	// VerificationEnvelope is a signed summary of the decision, minted
	// from the recorded decision for a client that asks (WantEnvelope).
	VerificationEnvelope string `json:"verification_envelope,omitempty"`
	// Replayed is true when an Idempotency-Key returned a stored decision.
	Replayed bool `json:"-"`
}

// Dossier is the stored evidence of one decision (its canonical JSON is the
// dossier body; its SHA-256 is the payload_digest of its ledger entry).
type Dossier = dossier.Body

// DossierActor records who asked: the credential, and the acting party the
// request named.
type DossierActor = dossier.Actor

// MaxKeyLength bounds Idempotency-Key and correlation ids.
const MaxKeyLength = core.MaxKeyLength

// ValidToken is the one rule of the tokens a client names things with:
// Idempotency-Key, correlation and request ids, and an intent's intent_id,
// nonce and concurrency_scope (see core.ValidToken).
func ValidToken(s string) bool { return core.ValidToken(s) }

func validText(s string) bool { return core.ValidText(s) }

// Evaluate makes one decision: it resolves the policy, evaluates the
// request, and durably records dossier, ledger entry and idempotency record
// in one atomic write before answering.
func (e *Engine) Evaluate(ctx context.Context, req EvaluateRequest) (Decision, error) {
	if req.IdempotencyKey != "" && !ValidToken(req.IdempotencyKey) {
		return Decision{}, invalid(CodeInvalidIdempotencyKey, "Idempotency-Key", "Idempotency-Key must be 1 to %d visible ASCII characters", MaxKeyLength)
	}
	if req.CorrelationID != "" && !ValidToken(req.CorrelationID) {
		return Decision{}, invalid(CodeInvalidCorrelationID, "correlation_id", "the correlation id must be 1 to %d visible ASCII characters", MaxKeyLength)
	}
	// The envelope's key is taken before anything is recorded, so that a
	// revoked active key refuses the request rather than a recorded answer.
	var envSigner grant.Key
	if req.WantEnvelope {
		if keys, err := e.signingKeys(); err == nil {
			if envSigner, err = keys.Signer(); err != nil {
				return Decision{}, err
			}
		}
	}
	now := e.now()
	in, err := req.Intent.Input(now)
	if err != nil {
		return Decision{}, core.TranslateInput(err)
	}
	in.Extra = req.Extra
	in.Approval = req.Approval
	pin, err := req.Intent.PolicyPin()
	if err != nil {
		return Decision{}, core.TranslateInput(err)
	}
	canonical, err := canon.Transform(req.Raw)
	if err != nil {
		return Decision{}, invalid(CodeInvalidRequest, "", "request body cannot be canonicalized: %v", err)
	}
	requestDigest := canon.Digest(canonical)
	parentChain, err := e.parentChain(ctx, req.OrgID, req.ParentDecisionID, "parent_decision_id", CodeInvalidParentDecision)
	if err != nil {
		return Decision{}, err
	}

	res, err := e.resolvePolicy(ctx, req.OrgID, pin)
	if err != nil {
		return Decision{}, err
	}
	c := res.Policy
	pd := c.Evaluate(&in)
	mode := res.Mode(in.RequestedMode)

	var ids [3]string
	for i := range ids {
		if ids[i], err = e.newID(); err != nil {
			return Decision{}, unavailable("id generation", err)
		}
	}
	d := Dossier{
		DossierID: ids[0], DecisionID: ids[1], EvaluationID: ids[2], OrgID: req.OrgID, Route: string(req.Route),
		Intent: canonical, IntentAsReceived: string(req.Raw), IntentDigest: requestDigest, IntentProfile: canon.Profile,
		Outcome: pd.Outcome, ReasonCodes: pd.ReasonCodes, MatchedRules: nonNil(pd.MatchedRules),
		PolicySnapshot: c.Snapshot(), Mode: mode, RequestedMode: in.RequestedMode, BundleMode: c.Mode(),
		Actor:          DossierActor{CredentialID: req.Principal.KeyID, CredentialKind: string(req.Principal.Kind), ID: in.ActorID, Type: in.ActorType},
		IdempotencyKey: req.IdempotencyKey, CorrelationID: req.CorrelationID, RequestID: req.RequestID,
		CreatedAt: now.Format(timeFormat), ParentDecisionID: req.ParentDecisionID,
	}
	d.ChainID = chainFor(req.OrgID, parentChain, in.WorkflowKey, req.CorrelationID, d.DecisionID)
	notePin(&d, pin, res)
	if pd.Err != nil {
		d.EvaluationError = pd.Err.Error()
	}
	scope := string(req.Route)
	var out Decision
	err = e.store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		out = Decision{}
		replayed, err := idempotency.Replay(ctx, tx, scope, req.IdempotencyKey, requestDigest, &out)
		if err != nil || replayed {
			out.Replayed = replayed
			return err
		}
		digest, err := dossier.Record(ctx, tx, &d, dossier.Index{WorkflowKey: in.WorkflowKey, DecisionType: in.DecisionType}, now)
		if err != nil {
			return err
		}
		out = decisionOf(d, digest)
		return idempotency.Remember(ctx, tx, scope, req.IdempotencyKey, requestDigest, out, now)
	})
	if err != nil {
		return Decision{}, asEngineError("record decision", err)
	}
	// A replay's Update wrote nothing, but the backend returns only once what
	// it read is durable, so a replayed answer is never ahead of the disk.
	if !envSigner.IsZero() {
		if out.VerificationEnvelope, err = e.envelope(envSigner, out, "", ""); err != nil {
			return Decision{}, unavailable("sign envelope", err)
		}
	}
	return out, nil
}

func decisionOf(d Dossier, digest string) Decision {
	return Decision{
		DecisionID: d.DecisionID, EvaluationID: d.EvaluationID, DossierID: d.DossierID, OrgID: d.OrgID,
		Outcome: d.Outcome, ReasonCodes: d.ReasonCodes, PolicySnapshot: d.PolicySnapshot, Mode: d.Mode,
		DossierURL: "/v1/protocol/dossiers/" + d.DossierID, DossierDigest: digest, LedgerSeq: d.LedgerSeq,
		CorrelationID: d.CorrelationID, IdempotencyKey: d.IdempotencyKey, CreatedAt: d.CreatedAt,
		ChainID: d.ChainID, ParentDecisionID: d.ParentDecisionID, ActivePolicyVersion: d.ActivePolicyVersion,
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
