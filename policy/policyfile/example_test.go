package policyfile_test

import (
	"errors"
	"fmt"
	"testing/fstest"

	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/policy/policyfile"
)

func ExampleReadBundle() {
	c, err := policyfile.ReadBundle("payments.yaml", []byte(`
bundle_id: payments
version: "2026.1"
mode: ENFORCEMENT
rules:
  - id: big
    decision_types: [PAYMENT]
    match:
      - {field: amount, op: ge, value: 5000.50}
    outcome: ESCALATE
    reason_codes: [LARGE_PAYMENT]
default: {outcome: ALLOW, reason_codes: []}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	b := c.Bundle()
	fmt.Println(b.BundleID, b.Version, len(b.Rules), "rule")

	// Every problem, not only the first.
	_, err = policyfile.ReadBundle("broken.yaml", []byte(`
bundle_id: broken
version: "1"
mode: LOUD
rules:
  - {id: r1, outcome: MAYBE, reason_codes: [X]}
default: {outcome: ALLOW, reason_codes: []}
`))
	var ve *policy.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(policyfile.FormatProblem(p))
		}
	}
	// Output:
	// payments 2026.1 1 rule
	// mode: mode must be ENFORCEMENT or SHADOW
	// rules[0].outcome (rule "r1"): outcome must be ALLOW, ESCALATE, REVIEW_REQUIRED or BLOCK
}

func ExampleRunDir() {
	fsys := fstest.MapFS{
		"payments.yaml": {Data: []byte(`
bundle_id: payments
version: "1"
mode: ENFORCEMENT
rules:
  - {id: big, match: [{field: amount, op: ge, value: 5000}], outcome: ESCALATE, reason_codes: [LARGE_PAYMENT]}
default: {outcome: ALLOW, reason_codes: []}
`)},
		"tests/payments.yaml": {Data: []byte(`
bundle_file: ../payments.yaml
cases:
  - name: small payments pass
    input: '{"amount": 4999.99}'
    expect: {outcome: ALLOW, reason_codes: [PROTOCOL_OUTCOME_ALLOW, NO_RULE_MATCHED]}
  - name: large payments escalate
    input: '{"amount": 5000}'
    expect: {outcome: BLOCK, matched_rules: [big], reason_codes: [PROTOCOL_OUTCOME_BLOCK, POLICY_MATCHED, LARGE_PAYMENT]}
`)},
	}
	report, err := policyfile.RunDir(fsys, "tests", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(report)
	// Output:
	// FAIL tests/payments.yaml: large payments escalate
	//     --- want
	//     +++ got
	//     - outcome: BLOCK
	//     + outcome: ESCALATE
	//     - reason_codes: [PROTOCOL_OUTCOME_BLOCK, POLICY_MATCHED, LARGE_PAYMENT]
	//     + reason_codes: [PROTOCOL_OUTCOME_ESCALATE, POLICY_MATCHED, LARGE_PAYMENT]
	//       matched_rules: [big]
	// 1 passed, 1 failed
}

func ExampleBundleJSON() {
	js, err := policyfile.BundleJSON("limits.yml", []byte(`
limits: {amount: 1000000000000000.25, risk: 0.1}
codes: [A, "B"]
`))
	fmt.Println(string(js), err)
	// Output:
	// {"limits":{"amount":1000000000000000.25,"risk":0.1},"codes":["A","B"]} <nil>
}
