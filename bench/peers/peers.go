package peers

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"

	"github.com/cedar-policy/cedar-go"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/clearancehq/clearance/policy"
)

// StarterRego and StarterCedar are the starter policy in each peer's language.
var (
	//go:embed starter.rego
	StarterRego string
	//go:embed starter.cedar
	StarterCedar string
)

// Query is the Rego query of both Rego policies, relative to their package.
const (
	StarterQuery = "data.clearance.starter.decision"
	RulesQuery   = "data.clearance.rules.decision"
)

// Case is one decision input in engine-neutral form.
type Case struct {
	Name         string
	DecisionType string
	WorkflowKey  string
	Amount       float64
	HasAmount    bool
	Approved     bool // verified approval evidence present
}

// Result is an engine's answer: the outcome and the ids of the rules whose
// outcome won, sorted (nil when the default decided).
type Result struct {
	Outcome string
	Rules   []string
}

func (r Result) String() string { return fmt.Sprintf("%s %v", r.Outcome, r.Rules) }

// Equal compares outcome and winning rules.
func (r Result) Equal(o Result) bool {
	return r.Outcome == o.Outcome && slices.Equal(r.Rules, o.Rules)
}

// --- Clearance ---

// ClearanceInput maps c to a policy.Input.
func ClearanceInput(c Case) policy.Input {
	in := policy.Input{DecisionType: c.DecisionType, WorkflowKey: c.WorkflowKey, Amount: c.Amount, HasAmount: c.HasAmount}
	if c.Approved {
		in.Approval = &policy.Approval{Verified: true}
	}
	return in
}

// ClearanceResult converts a decision to a Result.
func ClearanceResult(d policy.Decision) Result {
	if d.Err != nil {
		return Result{Outcome: "BLOCK"}
	}
	r := Result{Outcome: string(d.Outcome)}
	if len(d.MatchedRules) > 0 {
		r.Rules = slices.Sorted(slices.Values(d.MatchedRules))
	}
	return r
}

// --- OPA ---

// OPA is a prepared Rego query.
type OPA struct{ pq rego.PreparedEvalQuery }

// NewOPA parses and prepares module once; Eval then evaluates query per input.
func NewOPA(module, query string) (*OPA, error) {
	pq, err := rego.New(rego.Query(query), rego.Module("policy.rego", module)).PrepareForEval(context.Background())
	if err != nil {
		return nil, err
	}
	return &OPA{pq: pq}, nil
}

// OPAInput maps c to the JSON-shaped input document the Rego policies read.
func OPAInput(c Case) map[string]any {
	in := map[string]any{"decision_type": c.DecisionType, "workflow_key": c.WorkflowKey}
	if c.HasAmount {
		in["amount"] = c.Amount
	}
	if c.Approved {
		in["approval"] = map[string]any{"verified": true}
	}
	return in
}

// Eval evaluates the prepared query against input.
func (o *OPA) Eval(ctx context.Context, input any) (Result, error) {
	rs, err := o.pq.Eval(ctx, rego.EvalInput(input))
	if err != nil {
		return Result{Outcome: "BLOCK"}, err
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return Result{Outcome: "BLOCK"}, errors.New("opa: undefined decision")
	}
	m, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return Result{Outcome: "BLOCK"}, fmt.Errorf("opa: decision is %T", rs[0].Expressions[0].Value)
	}
	r := Result{}
	r.Outcome, _ = m["outcome"].(string)
	ids, _ := m["rules"].([]any)
	for _, id := range ids {
		s, _ := id.(string)
		r.Rules = append(r.Rules, s)
	}
	return r, nil
}

// --- Cedar ---

// rank orders outcomes by restrictiveness, as Clearance's combining rule does.
var rank = map[string]int{"ALLOW": 0, "ESCALATE": 1, "REVIEW_REQUIRED": 2, "BLOCK": 3}

// Cedar is a policy set whose policies are Clearance rules: @id names the
// rule (and is its PolicyID), @outcome its outcome; BLOCK rules are forbid
// policies, the others permit policies.
type Cedar struct {
	ps       *cedar.PolicySet
	outcome  map[cedar.PolicyID]string
	rank     map[cedar.PolicyID]int
	fallback string
}

// NewCedar parses doc; fallback is the outcome when no policy is satisfied.
func NewCedar(doc, fallback string) (*Cedar, error) {
	list, err := cedar.NewPolicyListFromBytes("policy.cedar", []byte(doc))
	if err != nil {
		return nil, err
	}
	c := &Cedar{ps: cedar.NewPolicySet(), outcome: map[cedar.PolicyID]string{}, rank: map[cedar.PolicyID]int{}, fallback: fallback}
	for i, p := range list {
		a := p.Annotations()
		id, out := cedar.PolicyID(a["id"]), string(a["outcome"])
		r, ok := rank[out]
		switch {
		case id == "":
			return nil, fmt.Errorf("cedar: policy %d has no @id", i)
		case !ok:
			return nil, fmt.Errorf("cedar: policy %s: bad @outcome %q", id, out)
		case (out == "BLOCK") != (p.Effect() == cedar.Forbid):
			return nil, fmt.Errorf("cedar: policy %s: BLOCK must be forbid, other outcomes permit", id)
		case !c.ps.Add(id, p):
			return nil, fmt.Errorf("cedar: duplicate @id %s", id)
		}
		c.outcome[id], c.rank[id] = out, r
	}
	return c, nil
}

// CedarRequest maps c to a request; the decision input is the context.
func CedarRequest(c Case) cedar.Request {
	ctx := cedar.RecordMap{
		"decision_type": cedar.String(c.DecisionType),
		"workflow_key":  cedar.String(c.WorkflowKey),
	}
	if c.HasAmount {
		d, err := cedar.NewDecimalFromFloat(c.Amount)
		if err != nil {
			panic(err)
		}
		ctx["amount"] = d
	}
	if c.Approved {
		ctx["approval"] = cedar.NewRecord(cedar.RecordMap{"verified": cedar.True})
	}
	return cedar.Request{
		Principal: cedar.NewEntityUID("Agent", "agent"),
		Action:    cedar.NewEntityUID("Action", "decide"),
		Resource:  cedar.NewEntityUID("Decision", "decision"),
		Context:   cedar.NewRecord(ctx),
	}
}

// Eval authorizes req and derives Clearance's outcome from the satisfied
// policies: the most restrictive @outcome wins; none gives the fallback;
// an evaluation error fails closed.
func (c *Cedar) Eval(req cedar.Request) (Result, error) {
	_, diag := cedar.Authorize(c.ps, nil, req)
	if len(diag.Errors) > 0 {
		return Result{Outcome: "BLOCK"}, fmt.Errorf("cedar: %s: %s", diag.Errors[0].PolicyID, diag.Errors[0].Message)
	}
	if len(diag.Reasons) == 0 {
		return Result{Outcome: c.fallback}, nil
	}
	best := -1
	for _, r := range diag.Reasons {
		best = max(best, c.rank[r.PolicyID])
	}
	res := Result{}
	for _, r := range diag.Reasons {
		if c.rank[r.PolicyID] == best {
			res.Outcome = c.outcome[r.PolicyID]
			res.Rules = append(res.Rules, string(r.PolicyID))
		}
	}
	slices.Sort(res.Rules)
	return res, nil
}
