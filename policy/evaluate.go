package policy

import (
	"errors"
	"math"
	"time"
)

// Input is the one input shape every route feeds to Evaluate. Build it
// from the wire with Intent.Input, or directly in Go.
type Input struct {
	DecisionType, WorkflowKey, Surface, VerticalPack, ObjectiveProfile string

	Amount    float64
	HasAmount bool

	RiskScore    float64
	HasRiskScore bool

	ActorID, ActorType                 string
	ActionType, ActionTarget, Currency string
	ActionParameters                   map[string]any

	RequestedMode Mode

	// Context is the free-form business context from the request.
	Context map[string]any
	// Extra holds route-specific members (e.g. system_of_record), visible to
	// CEL as intent.<name>; the standard members win on a name clash.
	Extra map[string]any
	// Approval is nil when no approval evidence accompanied the request.
	Approval *Approval
	// Signals are the org's current inbound signals (may be nil).
	Signals map[string]any
	// Federation are the federated decisions presented with the request
	// and verified by the caller (nil: none). They are evidence a rule may
	// use; without such a rule they change nothing.
	Federation []FederatedDecision
	// Now is the evaluation time, visible to CEL as `now`.
	Now time.Time
	// Spend is how much of each applicable spend gate's budget is used,
	// by gate id (see SpendGate); nil when the bundle has none.
	Spend map[string]SpendStatus
}

// Approval is approval evidence the caller has already verified.
type Approval struct {
	Verified   bool
	ApproverID string
	Method     string
}

// Decision is the result of Evaluate.
type Decision struct {
	Outcome Outcome
	// ReasonCodes: PROTOCOL_OUTCOME_<outcome>, then POLICY_MATCHED or
	// NO_RULE_MATCHED, then the codes of the winning rules (or the default)
	// in rule order, deduplicated. Shared and read-only: do not modify.
	ReasonCodes []string
	// MatchedRules are the ids of the rules whose outcome won, in rule
	// order; nil when the default decided. Shared and read-only.
	MatchedRules []string
	// Err is non-nil (an *EvalError) when evaluation failed; the decision
	// is then BLOCK with codes [PROTOCOL_OUTCOME_BLOCK, EVALUATION_ERROR].
	Err error
}

var failedCodes = []string{ReasonOutcomeBlock, ReasonEvaluationError}

func failClosed(err error) Decision {
	return Decision{Outcome: OutcomeBlock, ReasonCodes: failedCodes[:2:2], Err: err}
}

var errNilInput = errors.New("nil input")

// Evaluate decides in. Every candidate rule (selected through the index,
// then re-checked against all of its selectors) whose predicates hold and
// whose `when` is true matches; the most restrictive outcome among matches
// wins and its rules supply the reason codes; no match gives the default.
// Any error fails closed. The bundle's spend gates then turn an ALLOW
// whose amount does not fit in a gate's budget into the gate's outcome
// (see SpendGate). The common paths (no CEL, one winning rule or the
// default) allocate nothing.
func (c *Compiled) Evaluate(in *Input) Decision {
	if len(c.gates) == 0 || in == nil {
		return c.evaluateRules(in)
	}
	return c.applyGates(in, c.evaluateRules(in))
}

// evaluateRules is Evaluate without the spend gates.
func (c *Compiled) evaluateRules(in *Input) Decision {
	if in == nil {
		return failClosed(&EvalError{Err: errNilInput})
	}
	if in.HasAmount {
		if msg := amountProblem(in.Amount); msg != "" {
			return failClosed(&EvalError{Err: &InputError{Code: CodeInvalidAmount, Field: "amount", Message: msg}})
		}
	}
	if in.HasRiskScore && (math.IsNaN(in.RiskScore) || math.IsInf(in.RiskScore, 0)) {
		return failClosed(&EvalError{Err: &InputError{Code: CodeInvalidRiskScore, Field: "risk_score", Message: "risk_score must be finite"}})
	}

	// Candidate lists, each ascending and non-empty; a rule is in exactly
	// one of them.
	var (
		lists [4][]int32
		n     int
	)
	for _, l := range [4][]int32{c.unindexed, c.byDecisionType[in.DecisionType], c.byWorkflowKey[in.WorkflowKey], c.bySurface[in.Surface]} {
		if len(l) > 0 {
			lists[n] = l
			n++
		}
	}

	var (
		stack    [8]int32
		winners  = stack[:0]
		bestRank = -1
		act      *activation
		celCost  uint64
	)
	for n > 0 {
		// Merge: take the smallest head, so rules run in bundle order.
		k := 0
		for j := 1; j < n; j++ {
			if lists[j][0] < lists[k][0] {
				k = j
			}
		}
		i := lists[k][0]
		if lists[k] = lists[k][1:]; len(lists[k]) == 0 {
			n--
			lists[k] = lists[n]
		}
		r := &c.rules[i]
		if !r.selects(in) {
			continue
		}
		if r.when != nil {
			if act == nil {
				act = newActivation(in)
			}
			ok, cost, err := evalWhen(r.when, act)
			celCost += cost
			if err == nil && celCost > MaxEvaluationCost {
				err = errCostBudget
			}
			if err != nil {
				return failClosed(&EvalError{RuleID: r.id, Err: err})
			}
			if !ok {
				continue
			}
		}
		switch {
		case r.rank > bestRank:
			bestRank = r.rank
			winners = append(winners[:0], i)
		case r.rank == bestRank:
			winners = append(winners, i)
		}
	}
	switch len(winners) {
	case 0:
		return c.fallback
	case 1:
		return c.rules[winners[0]].decision
	}
	return c.combine(winners)
}

// selects reports whether the rule's selectors and predicates hold.
func (r *rule) selects(in *Input) bool {
	if len(r.decisionTypes.list) > 0 && !r.decisionTypes.contains(in.DecisionType) {
		return false
	}
	if len(r.workflowKeys.list) > 0 && !r.workflowKeys.contains(in.WorkflowKey) {
		return false
	}
	if len(r.surfaces.list) > 0 && !r.surfaces.contains(in.Surface) {
		return false
	}
	for p := range r.preds {
		if !r.preds[p].holds(in) {
			return false
		}
	}
	return true
}

// combine builds the decision of several rules sharing the winning outcome.
func (c *Compiled) combine(winners []int32) Decision {
	first := &c.rules[winners[0]]
	n := 2
	for _, w := range winners {
		n += len(c.rules[w].own)
	}
	codes := make([]string, 0, n)
	codes = append(codes, first.decision.ReasonCodes[:2]...)
	var seen map[string]struct{}
	if n > 64 {
		seen = make(map[string]struct{}, n)
	}
	ids := make([]string, len(winners))
	for k, w := range winners {
		r := &c.rules[w]
		ids[k] = r.id
		for _, code := range r.own {
			if seen != nil {
				if _, dup := seen[code]; dup {
					continue
				}
				seen[code] = struct{}{}
			} else if containsString(codes[2:], code) {
				continue
			}
			codes = append(codes, code)
		}
	}
	return Decision{Outcome: first.outcome, ReasonCodes: codes, MatchedRules: ids}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
