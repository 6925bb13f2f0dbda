package peers

import (
	"fmt"
	"strings"

	"github.com/clearancehq/clearance/policy"
)

// The generated bundle has n rules (n a multiple of 10) over n/10 decision
// types and 5 workflow keys. Rule i selects decision type "DT_<i mod n/10>"
// and workflow key "wk-<j mod 5>" where j = i div (n/10) ∈ 0..9, requires
// amount ≥ 100·j and has outcome ALLOW, ESCALATE, REVIEW_REQUIRED, BLOCK by
// j mod 4. An input therefore selects exactly 2 candidate rules (j = k and
// k+5 for its workflow key wk-k); the default is ALLOW.
var ruleOutcomes = [4]policy.Outcome{policy.OutcomeAllow, policy.OutcomeEscalate, policy.OutcomeReviewRequired, policy.OutcomeBlock}

type genRule struct {
	id, dt, wk string
	min        int
	outcome    policy.Outcome
}

func genRules(n int) []genRule {
	if n < 10 || n%10 != 0 {
		panic("peers: rule count must be a positive multiple of 10")
	}
	d := n / 10
	out := make([]genRule, n)
	for i := range n {
		j := i / d
		out[i] = genRule{id: fmt.Sprintf("rule-%d", i), dt: fmt.Sprintf("DT_%d", i%d), wk: fmt.Sprintf("wk-%d", j%5),
			min: 100 * j, outcome: ruleOutcomes[j%4]}
	}
	return out
}

// RulesBundle is the generated bundle for Clearance (selectors are indexed).
func RulesBundle(n int) policy.Bundle {
	b := policy.Bundle{BundleID: "peers-rules", Version: fmt.Sprint(n), Mode: policy.ModeEnforcement,
		Default: policy.Default{Outcome: policy.OutcomeAllow, ReasonCodes: []string{}}}
	for _, r := range genRules(n) {
		b.Rules = append(b.Rules, policy.Rule{ID: r.id, DecisionTypes: []string{r.dt}, WorkflowKeys: []string{r.wk},
			Match:   []policy.Predicate{{Field: "amount", Op: "ge", Value: r.min}},
			Outcome: r.outcome, ReasonCodes: []string{"CODE_" + strings.TrimPrefix(r.id, "rule-")}})
	}
	return b
}

// RulesRego is the generated bundle in Rego (package clearance.rules), with
// the same combining rule as starter.rego.
func RulesRego(n int) string {
	var sb strings.Builder
	sb.WriteString("package clearance.rules\n\n")
	rules := genRules(n)
	for _, r := range rules {
		fmt.Fprintf(&sb, "matched contains %q if {\n\tinput.decision_type == %q\n\tinput.workflow_key == %q\n\tinput.amount >= %d\n}\n\n", r.id, r.dt, r.wk, r.min)
	}
	sb.WriteString("outcomes := {\n")
	for _, r := range rules {
		fmt.Fprintf(&sb, "\t%q: %q,\n", r.id, r.outcome)
	}
	sb.WriteString(`}

rank := {"ALLOW": 0, "ESCALATE": 1, "REVIEW_REQUIRED": 2, "BLOCK": 3}

by_rank := ["ALLOW", "ESCALATE", "REVIEW_REQUIRED", "BLOCK"]

default outcome := "ALLOW"

outcome := by_rank[max({rank[outcomes[id]] | some id in matched})] if count(matched) > 0

decision := {
	"outcome": outcome,
	"rules": sort([id | some id in matched; outcomes[id] == outcome]),
}
`)
	return sb.String()
}

// RulesCedar is the generated bundle in Cedar (see starter.cedar for the
// mapping); use it with NewCedar(doc, "ALLOW").
func RulesCedar(n int) string {
	var sb strings.Builder
	for _, r := range genRules(n) {
		effect := "permit"
		if r.outcome == policy.OutcomeBlock {
			effect = "forbid"
		}
		fmt.Fprintf(&sb, "@id(%q) @outcome(%q)\n%s (principal, action, resource)\nwhen { context.decision_type == %q && context.workflow_key == %q && context has amount && context.amount.greaterThanOrEqual(decimal(\"%d.0\")) };\n\n",
			r.id, r.outcome, effect, r.dt, r.wk, r.min)
	}
	return sb.String()
}
