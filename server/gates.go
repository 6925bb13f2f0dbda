package server

import (
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/clearancehq/clearance/internal/strictjson"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/policy"
)

// Verdicts a workflow tool branches on.
const (
	VerdictContinue = "continue"
	VerdictStop     = "stop"
	VerdictHandOff  = "hand_off"
	VerdictReview   = "review"
)

// verdictOf maps an outcome to the hook verdict.
func verdictOf(o policy.Outcome) string {
	switch o {
	case policy.OutcomeAllow:
		return VerdictContinue
	case policy.OutcomeEscalate:
		return VerdictHandOff
	case policy.OutcomeReviewRequired:
		return VerdictReview
	default:
		return VerdictStop // BLOCK and anything unknown fail closed
	}
}

// gateEnvelope is the action-gate answer: the verdict the flow branches on,
// the decision, and links to verify its evidence.
type gateEnvelope struct {
	Verdict string `json:"verdict"`
	// Enforced is false in SHADOW mode: the flow continues, and
	// EnforcedVerdict says what enforcement would have answered.
	Enforced        bool               `json:"enforced"`
	EnforcedVerdict string             `json:"enforced_verdict"`
	Outcome         policy.Outcome     `json:"outcome"`
	Decision        clearance.Decision `json:"decision"`
	Links           gateLinks          `json:"links"`
}

type gateLinks struct {
	Dossier           string `json:"dossier"`
	DossierByDecision string `json:"dossier_by_decision"`
	LedgerVerify      string `json:"ledger_verify"`
}

func envelopeOf(d clearance.Decision) gateEnvelope {
	v := verdictOf(d.Outcome)
	env := gateEnvelope{Verdict: v, Enforced: true, EnforcedVerdict: v, Outcome: d.Outcome, Decision: d,
		Links: gateLinks{
			Dossier:           d.DossierURL,
			DossierByDecision: "/v1/dossiers/" + d.DecisionID,
			LedgerVerify:      "/v1/protocol/audit/ledger/verify",
		}}
	if d.Mode == policy.ModeShadow {
		env.Verdict, env.Enforced = VerdictContinue, false
	}
	return env
}

// gateRequest is the hook-style body shared by the action-gate routes.
type gateRequest struct {
	OrgID string `json:"org_id,omitempty"`
	// IdempotencyKey and CorrelationID are pointers so that a member sent
	// empty is refused, not taken for absent.
	IdempotencyKey *string `json:"idempotency_key,omitempty"`
	CorrelationID  *string `json:"correlation_id,omitempty"`
	policy.Intent  `json:",inline"`
}

// gate evaluates a hook request; defaultSurface fills an absent surface.
func (s *Server) gate(c *call, rt clearance.Route, pathOrg, defaultSurface string) error {
	var req gateRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	explicit := req.OrgID
	if pathOrg != "" {
		if explicit != "" && explicit != pathOrg {
			return &clearance.Error{Kind: clearance.ErrInvalidRequest, Code: codePathBodyMismatch, Detail: "org_id in the body differs from the path",
				Fields: []clearance.FieldError{{Field: "org_id", Message: "differs from the path"}}}
		}
		explicit = pathOrg
	}
	if req.Surface == "" {
		req.Surface = defaultSurface
	}
	key, err := bodyToken(req.IdempotencyKey, "idempotency_key", clearance.CodeInvalidIdempotencyKey)
	if err != nil {
		return err
	}
	corr, err := bodyToken(req.CorrelationID, "correlation_id", clearance.CodeInvalidCorrelationID)
	if err != nil {
		return err
	}
	d, err := s.evaluate(c, explicit, rt, req.Intent, nil, key, corr)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, envelopeOf(d))
}

func (s *Server) actionGate(c *call) error { return s.gate(c, clearance.RouteActionGate, "", "http") }

func (s *Server) crmActionGate(c *call) error {
	return s.gate(c, clearance.RouteCRMActionGate, c.r.PathValue("orgId"), "crm")
}

func (s *Server) workspaceActionGate(c *call) error {
	return s.gate(c, clearance.RouteWorkspaceApp, "", "workspace_app")
}

// agentVerifyRequest is the cloud agent extension's body.
type agentVerifyRequest struct {
	OrgID          string         `json:"org_id,omitempty"`
	DecisionType   string         `json:"decision_type,omitempty"`
	WorkflowKey    string         `json:"workflow_key,omitempty"`
	SystemOfRecord string         `json:"system_of_record,omitempty"`
	Mode           policy.Mode    `json:"mode,omitempty"`
	Context        map[string]any `json:"context,omitempty"`
	Intent         jsontext.Value `json:"intent"`
}

// agentIntent is the agent's proposed action; members beyond the known ones
// are kept and shown to CEL as intent.intent.
type agentIntent struct {
	ActionType string         `json:"action_type"`
	Amount     policy.Amount  `json:"amount,omitzero"`
	Currency   string         `json:"currency,omitempty"`
	Target     string         `json:"target,omitempty"`
	Actor      *policy.Actor  `json:"actor,omitempty"`
	Rest       map[string]any `json:",embed"`
}

// cloudAgentVerify normalizes the agent's intent into the one input shape.
func (s *Server) cloudAgentVerify(c *call) error {
	var req agentVerifyRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	// The agent's intent is open: known members are typed, the rest kept.
	var ai agentIntent
	if len(req.Intent) == 0 {
		req.Intent = jsontext.Value("{}")
	}
	open := c.json
	open.RejectUnknown = false
	if err := strictjson.Decode(req.Intent, &ai, open); err != nil {
		return err
	}
	if err := checkName("system_of_record", req.SystemOfRecord); err != nil {
		return err
	}
	if ai.ActionType == "" {
		return &clearance.Error{Kind: clearance.ErrInvalidRequest, Code: codeMissingField, Detail: "intent.action_type is required",
			Fields: []clearance.FieldError{{Field: "intent.action_type", Message: "required"}}}
	}
	in := policy.Intent{
		DecisionType: req.DecisionType, WorkflowKey: req.WorkflowKey, Mode: req.Mode, Context: req.Context,
		Surface: "cloud_agent", Actor: ai.Actor,
		Action: &policy.Action{Type: ai.ActionType, Amount: ai.Amount, Currency: ai.Currency, Target: ai.Target},
	}
	extra := map[string]any{"system_of_record": req.SystemOfRecord}
	if len(ai.Rest) > 0 {
		extra["intent"] = ai.Rest
	}
	d, err := s.evaluate(c, req.OrgID, clearance.RouteCloudAgentVerify, in, extra, "", "")
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, envelopeOf(d))
}

// checkName refuses what no name may hold, for the members that only this
// route reads (the members of policy.Intent are checked by the policy
// package): control characters and more than policy.MaxIdentifierLen bytes.
func checkName(field, v string) error {
	if len(v) <= policy.MaxIdentifierLen && !strings.ContainsFunc(v, unicode.IsControl) {
		return nil
	}
	msg := field + " must be at most " + strconv.Itoa(policy.MaxIdentifierLen) + " bytes without control characters"
	return &clearance.Error{Kind: clearance.ErrInvalidRequest, Code: policy.CodeInvalidIdentifier, Detail: msg,
		Fields: []clearance.FieldError{{Field: field, Message: msg}}}
}
