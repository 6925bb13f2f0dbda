package policy_test

import (
	"fmt"
	"time"

	"github.com/clearancehq/clearance/policy"
)

func ExampleLoad() {
	c, err := policy.Load([]byte(`{
	  "bundle_id": "payments", "version": "2026.1", "mode": "ENFORCEMENT",
	  "rules": [
	    {"id": "big", "decision_types": ["PAYMENT"],
	     "match": [{"field": "amount", "op": "ge", "value": 5000}],
	     "outcome": "ESCALATE", "reason_codes": ["LARGE_PAYMENT"]},
	    {"id": "new-vendor", "decision_types": ["PAYMENT"],
	     "when": "intent.context.vendor_age_days < 30",
	     "outcome": "REVIEW_REQUIRED", "reason_codes": ["NEW_VENDOR"]}
	  ],
	  "default": {"outcome": "ALLOW", "reason_codes": []}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	intent, err := policy.DecodeIntent([]byte(`{"decision_type": "PAYMENT", "amount": 7500.00,
	  "context": {"vendor_age_days": 12}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	in, err := intent.Input(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		fmt.Println(err)
		return
	}
	d := c.Evaluate(&in)
	fmt.Println(d.Outcome, d.ReasonCodes, d.MatchedRules)
	fmt.Println(c.Snapshot().BundleID, c.Snapshot().PolicyVersion, c.Snapshot().Evaluator)
	// Output:
	// REVIEW_REQUIRED [PROTOCOL_OUTCOME_REVIEW_REQUIRED POLICY_MATCHED NEW_VENDOR] [new-vendor]
	// payments 2026.1 clearance-policy/1
}

func ExampleStarter() {
	s := policy.Starter()
	for _, amount := range []string{"250", "1000", "9999.999", "10000", "null"} {
		intent, err := policy.DecodeIntent([]byte(`{"amount": ` + amount + `}`))
		if err != nil {
			fmt.Println(amount, "->", err)
			continue
		}
		in, _ := intent.Input(time.Time{})
		d := s.Evaluate(&in)
		fmt.Println(amount, "->", d.Outcome, d.ReasonCodes[2:])
	}
	approved := policy.Input{Amount: 5000, HasAmount: true, Approval: &policy.Approval{Verified: true}}
	fmt.Println("5000 approved ->", s.Evaluate(&approved).Outcome)
	none := policy.Input{}
	fmt.Println("no amount ->", s.Evaluate(&none).ReasonCodes)
	fmt.Println(s.Mode(), policy.EffectiveMode(s.Mode(), policy.ModeEnforcement))
	// Output:
	// 250 -> ALLOW [AMOUNT_BELOW_ESCALATION_THRESHOLD]
	// 1000 -> ESCALATE [AMOUNT_IN_ESCALATION_BAND]
	// 9999.999 -> ESCALATE [AMOUNT_IN_ESCALATION_BAND]
	// 10000 -> BLOCK [AMOUNT_AT_OR_ABOVE_BLOCK_THRESHOLD]
	// null -> policy: INVALID_AMOUNT: amount: amount must be a JSON number, not null
	// 5000 approved -> ALLOW
	// no amount -> [PROTOCOL_OUTCOME_ESCALATE POLICY_MATCHED AMOUNT_MISSING]
	// SHADOW SHADOW
}
