package policy_test

import (
	"fmt"

	"github.com/clearancehq/clearance/policy"
)

func ExampleCompiled_Explain() {
	c, err := policy.Load([]byte(`{
	  "bundle_id": "payments", "version": "2026.1", "mode": "ENFORCEMENT",
	  "rules": [
	    {"id": "big", "decision_types": ["PAYMENT"],
	     "match": [{"field": "amount", "op": "ge", "value": 1000}],
	     "outcome": "ESCALATE", "reason_codes": ["LARGE_PAYMENT"]},
	    {"id": "payroll", "workflow_keys": ["payroll"],
	     "outcome": "REVIEW_REQUIRED", "reason_codes": ["PAYROLL"]},
	    {"id": "usd", "match": [{"field": "currency", "op": "eq", "value": "USD"}],
	     "outcome": "ALLOW", "reason_codes": ["DOMESTIC"]}
	  ],
	  "default": {"outcome": "ALLOW", "reason_codes": []}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	in := policy.Input{DecisionType: "PAYMENT", WorkflowKey: "ap", Currency: "USD", Amount: 5000, HasAmount: true}
	x := c.Explain(&in)
	fmt.Println(x.Outcome, x.ReasonCodes, x.MatchedRules)
	for _, r := range x.Rules {
		switch {
		case r.Decisive:
			fmt.Printf("%s: matched, decisive\n", r.RuleID)
		case r.Matched:
			fmt.Printf("%s: matched\n", r.RuleID)
		default:
			fmt.Printf("%s: %s failed: %s\n", r.RuleID, r.Failed.Condition, r.Failed.Message)
		}
	}
	for _, f := range x.Flips {
		fmt.Println(f.Message)
	}
	// Output:
	// ESCALATE [PROTOCOL_OUTCOME_ESCALATE POLICY_MATCHED LARGE_PAYMENT] [big]
	// big: matched, decisive
	// payroll: workflow_keys failed: workflow_key "ap" is not one of [payroll]
	// usd: matched
	// amount below 1000 would ALLOW
	// decision_type absent would ALLOW
	// workflow_key payroll would REVIEW_REQUIRED
}

func ExampleDiff() {
	from := policy.Bundle{BundleID: "payments", Version: "1", Mode: policy.ModeShadow,
		Rules: []policy.Rule{
			{ID: "big", Match: []policy.Predicate{{Field: "amount", Op: "ge", Value: 1000}},
				Outcome: policy.OutcomeEscalate, ReasonCodes: []string{"LARGE_PAYMENT"}},
			{ID: "night", When: "now.getHours() < 6", Outcome: policy.OutcomeReviewRequired, ReasonCodes: []string{"OFF_HOURS"}},
		},
		Default: policy.Default{Outcome: policy.OutcomeAllow}}
	to := policy.Bundle{BundleID: "payments", Version: "2", Mode: policy.ModeEnforcement,
		Rules: []policy.Rule{
			{ID: "big", Match: []policy.Predicate{{Field: "amount", Op: "ge", Value: 5000}},
				Outcome: policy.OutcomeBlock, ReasonCodes: []string{"LARGE_PAYMENT"}},
			{ID: "sanctioned", Match: []policy.Predicate{{Field: "currency", Op: "in", Value: []string{"KPW", "IRR"}}},
				Outcome: policy.OutcomeBlock, ReasonCodes: []string{"SANCTIONED"}},
		},
		Default: policy.Default{Outcome: policy.OutcomeAllow}}
	d := policy.Diff(from, to)
	fmt.Println("identical:", d.Identical)
	fmt.Printf("mode: %s -> %s\n", d.Mode.From, d.Mode.To)
	fmt.Println("added:", d.RulesAdded, "removed:", d.RulesRemoved)
	for _, rc := range d.RulesChanged {
		fmt.Println("changed:", rc.RuleID, rc.Fields, rc.From.Match[0].Value, "->", rc.To.Match[0].Value)
	}
	// Version alone is not content.
	same := from
	same.Version = "3"
	fmt.Println("identical:", policy.Diff(from, same).Identical)
	// Output:
	// identical: false
	// mode: SHADOW -> ENFORCEMENT
	// added: [sanctioned] removed: [night]
	// changed: big [match outcome] 1000 -> 5000
	// identical: true
}
