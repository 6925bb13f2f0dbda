package decide

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
)

// decoded is a decision request body in the one input shape.
type decoded struct {
	org    string // the org_id the body (or the route's path) names; "" for none
	intent policy.Intent
	extra  map[string]any // route-specific members, visible to CEL as intent.<name>
	parent string         // parent_decision_id
	// federated are the federated decision envelopes presented (JWS).
	federated []string
	key       string // the body's idempotency_key (hooks)
	corr      string // the body's correlation_id (hooks)
	hasToken  bool   // the route's body may carry key and corr
	// canonical is the body's RFC 8785 form when decoding wrote it (see
	// readEvaluateBody); nil otherwise.
	canonical []byte
}

// canonicalIntent returns the RFC 8785 form of body, the bytes d was
// decoded from: the one decoding wrote, else canon.Transform's.
func (d *decoded) canonicalIntent(body []byte) ([]byte, error) {
	if d.canonical != nil {
		return d.canonical, nil
	}
	return canon.Transform(body)
}

// decisionBody is the evaluate-decision body.
type decisionBody struct {
	OrgID string `json:"org_id,omitempty"`
	// ParentDecisionID (extension) names the decision whose chain this one
	// joins.
	ParentDecisionID string `json:"parent_decision_id,omitempty"`
	// FederatedDecisions (extension) are federated decision envelopes of
	// trusted deployments, evidence the policy may read.
	FederatedDecisions []string `json:"federated_decisions,omitempty"`
	policy.Intent               // embedded: its members are the body's
}

// gateBody is the hook-style body shared by the action-gate routes.
type gateBody struct {
	OrgID string `json:"org_id,omitempty"`
	// IdempotencyKey and CorrelationID are pointers so that a member sent
	// empty is refused, not taken for absent.
	IdempotencyKey *string `json:"idempotency_key,omitempty"`
	CorrelationID  *string `json:"correlation_id,omitempty"`
	policy.Intent  `json:",inline"`
}

// agentVerifyBody is the cloud agent extension's body.
type agentVerifyBody struct {
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

// decode reads body as route's request, strictly (opts), and normalizes it
// into the one input shape. pathOrg is the org the route's path names.
func decode(route Route, body []byte, pathOrg string, opts strictjson.Options) (decoded, error) {
	switch route {
	case RouteEvaluateDecision:
		if b, canonical, ok := readEvaluateBody(body, opts); ok {
			return decoded{org: b.OrgID, intent: b.Intent, parent: b.ParentDecisionID, canonical: canonical}, nil
		}
		return decodeEvaluateDecision(body, opts)
	case RouteActionGate, RouteCRMActionGate, RouteWorkspaceApp:
		return decodeGate(route, body, pathOrg, opts)
	case RouteCloudAgentVerify:
		return decodeAgentVerify(body, opts)
	}
	return decoded{}, core.Invalid(core.CodeInvalidRequest, "", "route %q does not evaluate decisions", route)
}

// decodeEvaluateDecision decodes an evaluate-decision body with strictjson:
// the path of the bodies readEvaluateBody leaves, and the reference it is
// held to.
func decodeEvaluateDecision(body []byte, opts strictjson.Options) (decoded, error) {
	var b decisionBody
	if err := strictjson.Decode(body, &b, opts); err != nil {
		return decoded{}, err
	}
	return decoded{org: b.OrgID, intent: b.Intent, parent: b.ParentDecisionID, federated: b.FederatedDecisions}, nil
}

func decodeGate(route Route, body []byte, pathOrg string, opts strictjson.Options) (decoded, error) {
	var b gateBody
	if err := strictjson.Decode(body, &b, opts); err != nil {
		return decoded{}, err
	}
	out := decoded{org: b.OrgID, intent: b.Intent, hasToken: true}
	if pathOrg != "" {
		if out.org != "" && out.org != pathOrg {
			return decoded{}, &core.Error{Kind: core.ErrInvalidRequest, Code: core.CodePathBodyMismatch, Detail: "org_id in the body differs from the path",
				Fields: []core.FieldError{{Field: "org_id", Message: "differs from the path"}}}
		}
		out.org = pathOrg
	}
	if out.intent.Surface == "" {
		out.intent.Surface = route.defaultSurface()
	}
	var err error
	if out.key, err = bodyToken(b.IdempotencyKey, "idempotency_key", core.CodeInvalidIdempotencyKey); err != nil {
		return decoded{}, err
	}
	if out.corr, err = bodyToken(b.CorrelationID, "correlation_id", core.CodeInvalidCorrelationID); err != nil {
		return decoded{}, err
	}
	return out, nil
}

// decodeAgentVerify normalizes the agent's open intent: known members are
// typed, the rest kept.
func decodeAgentVerify(body []byte, opts strictjson.Options) (decoded, error) {
	var b agentVerifyBody
	if err := strictjson.Decode(body, &b, opts); err != nil {
		return decoded{}, err
	}
	var ai agentIntent
	if len(b.Intent) == 0 {
		b.Intent = jsontext.Value("{}")
	}
	open := opts
	open.RejectUnknown = false
	if err := strictjson.Decode(b.Intent, &ai, open); err != nil {
		return decoded{}, err
	}
	if err := checkName("system_of_record", b.SystemOfRecord); err != nil {
		return decoded{}, err
	}
	if ai.ActionType == "" {
		return decoded{}, &core.Error{Kind: core.ErrInvalidRequest, Code: core.CodeMissingField, Detail: "intent.action_type is required",
			Fields: []core.FieldError{{Field: "intent.action_type", Message: "required"}}}
	}
	in := policy.Intent{
		DecisionType: b.DecisionType, WorkflowKey: b.WorkflowKey, Mode: b.Mode, Context: b.Context,
		Surface: "cloud_agent", Actor: ai.Actor,
		Action: &policy.Action{Type: ai.ActionType, Amount: ai.Amount, Currency: ai.Currency, Target: ai.Target},
	}
	extra := map[string]any{"system_of_record": b.SystemOfRecord}
	if len(ai.Rest) > 0 {
		extra["intent"] = ai.Rest
	}
	return decoded{org: b.OrgID, intent: in, extra: extra}, nil
}

// checkName refuses what no name may hold, for the members that only the
// agent route reads (the members of policy.Intent are checked by the policy
// package): control characters and more than policy.MaxIdentifierLen bytes.
func checkName(field, v string) error {
	if len(v) <= policy.MaxIdentifierLen && !strings.ContainsFunc(v, unicode.IsControl) {
		return nil
	}
	msg := field + " must be at most " + strconv.Itoa(policy.MaxIdentifierLen) + " bytes without control characters"
	return &core.Error{Kind: core.ErrInvalidRequest, Code: policy.CodeInvalidIdentifier, Detail: msg,
		Fields: []core.FieldError{{Field: field, Message: msg}}}
}

// bodyToken checks a body member that carries a client token: absent is "",
// present it must be a core.ValidToken, like its header.
func bodyToken(v *string, field, code string) (string, error) {
	if v == nil {
		return "", nil
	}
	if !core.ValidToken(*v) {
		msg := field + " must be 1 to " + strconv.Itoa(core.MaxKeyLength) + " visible ASCII characters"
		return "", &core.Error{Kind: core.ErrInvalidRequest, Code: code, Detail: msg, Fields: []core.FieldError{{Field: field, Message: msg}}}
	}
	return *v, nil
}

// pick reconciles a token given both as a header and in the body.
func pick(header, body, field string) (string, error) {
	if header != "" && body != "" && header != body {
		return "", &core.Error{Kind: core.ErrInvalidRequest, Code: core.CodeHeaderBodyMismatch,
			Detail: field + " in the body differs from its header", Fields: []core.FieldError{{Field: field, Message: "differs from the header"}}}
	}
	if header != "" {
		return header, nil
	}
	return body, nil
}
