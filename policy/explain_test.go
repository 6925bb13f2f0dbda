package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestExplainThresholdFlip(t *testing.T) {
	c := mustCompile(t, bundleWith(Rule{ID: "big", Match: []Predicate{{Field: "amount", Op: "ge", Value: 1000}},
		Outcome: OutcomeEscalate, ReasonCodes: []string{"BIG"}}))
	in := Input{Amount: 5000, HasAmount: true}
	x := c.Explain(&in)
	checkExplainMatchesEvaluate(t, c, &in, x)
	want := Explanation{
		Outcome:      OutcomeEscalate,
		ReasonCodes:  []string{ReasonOutcomeEscalate, ReasonPolicyMatched, "BIG"},
		MatchedRules: []string{"big"},
		Rules:        []RuleTrace{{RuleID: "big", Outcome: OutcomeEscalate, Matched: true, Decisive: true}},
		Flips:        []Flip{{Field: "amount", Op: "lt", Value: 1000.0, Outcome: OutcomeAllow, Message: "amount below 1000 would ALLOW"}},
	}
	if diff := cmp.Diff(want, x); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}

	// Below the threshold: the rule's failure, and the flip upwards.
	in = Input{Amount: 250.5, HasAmount: true}
	x = c.Explain(&in)
	want = Explanation{
		Outcome:      OutcomeAllow,
		ReasonCodes:  []string{ReasonOutcomeAllow, ReasonNoRuleMatched},
		MatchedRules: []string{},
		Rules: []RuleTrace{{RuleID: "big", Outcome: OutcomeEscalate, Failed: &Failure{
			Condition: "match[0]", Field: "amount", Op: "ge", Value: 1000.0, Actual: 250.5, Message: "amount 250.5 is not ge 1000"}}},
		Flips: []Flip{{Field: "amount", Op: "ge", Value: 1000.0, Outcome: OutcomeEscalate, Message: "amount at or above 1000 would ESCALATE"}},
	}
	if diff := cmp.Diff(want, x); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}

	// Absent: the absence is the failure; supplying an amount flips.
	in = Input{}
	x = c.Explain(&in)
	if f := x.Rules[0].Failed; f == nil || f.Message != "amount is absent" || f.Actual != nil {
		t.Errorf("failure %+v", f)
	}
	if len(x.Flips) != 1 || x.Flips[0].Message != "amount at or above 1000 would ESCALATE" {
		t.Errorf("flips %+v", x.Flips)
	}
}

func TestExplainStarter(t *testing.T) {
	c := Starter()
	in := Input{Amount: 5000, HasAmount: true}
	x := c.Explain(&in)
	checkExplainMatchesEvaluate(t, c, &in, x)
	want := []Flip{
		{Field: "amount", Op: "lt", Value: 1000.0, Outcome: OutcomeAllow, Message: "amount below 1000 would ALLOW"},
		{Field: "amount", Op: "ge", Value: 10000.0, Outcome: OutcomeBlock, Message: "amount at or above 10000 would BLOCK"},
		{Field: "approval.verified", Op: "eq", Value: true, Outcome: OutcomeAllow, Message: "approval.verified true would ALLOW"},
	}
	if diff := cmp.Diff(want, x.Flips); diff != "" {
		t.Fatalf("flips (-want +got):\n%s", diff)
	}
	var traced []string
	for _, r := range x.Rules {
		traced = append(traced, r.RuleID)
		if r.Decisive != (r.RuleID == "amount-escalation-band") || r.Matched != r.Decisive {
			t.Errorf("%+v", r)
		}
	}
	if len(traced) != 5 {
		t.Errorf("traced %v", traced)
	}
	band := x.Rules[3] // amount-escalation-band-approved
	if f := band.Failed; f == nil || f.Condition != "match[2]" || f.Message != "approval.verified false is not eq true" || f.Actual != false {
		t.Errorf("failure %+v", f)
	}
	missing := x.Rules[0]
	if f := missing.Failed; f == nil || f.Message != "amount 5000 is present" || f.Op != "not_exists" || f.Value != nil {
		t.Errorf("failure %+v", f)
	}

	// No amount: the starter's missing-amount rule; supplying one flips.
	in = Input{}
	x = c.Explain(&in)
	want = []Flip{
		{Field: "amount", Op: "lt", Value: 1000.0, Outcome: OutcomeAllow, Message: "amount below 1000 would ALLOW"},
		{Field: "amount", Op: "ge", Value: 10000.0, Outcome: OutcomeBlock, Message: "amount at or above 10000 would BLOCK"},
	}
	if diff := cmp.Diff(want, x.Flips); diff != "" {
		t.Fatalf("flips (-want +got):\n%s", diff)
	}
}

func TestExplainSelectorFailure(t *testing.T) {
	c := mustCompile(t, bundleWith(
		Rule{ID: "payroll", DecisionTypes: []string{"PAYMENT"}, WorkflowKeys: []string{"payroll"}, Outcome: OutcomeReviewRequired, ReasonCodes: []string{"PAYROLL"}},
		Rule{ID: "refunds", DecisionTypes: []string{"REFUND"}, Outcome: OutcomeBlock, ReasonCodes: []string{"REFUND"}},
		Rule{ID: "web", Surfaces: []string{"web"}, Outcome: OutcomeEscalate, ReasonCodes: []string{"WEB"}},
	))
	in := Input{DecisionType: "PAYMENT", WorkflowKey: "ap"}
	x := c.Explain(&in)
	checkExplainMatchesEvaluate(t, c, &in, x)
	wantRules := []RuleTrace{
		{RuleID: "payroll", Outcome: OutcomeReviewRequired, Failed: &Failure{Condition: "workflow_keys", Field: "workflow_key", Op: "in",
			Value: []string{"payroll"}, Actual: "ap", Message: `workflow_key "ap" is not one of [payroll]`}},
		{RuleID: "refunds", Outcome: OutcomeBlock, Failed: &Failure{Condition: "decision_types", Field: "decision_type", Op: "in",
			Value: []string{"REFUND"}, Actual: "PAYMENT", Message: `decision_type "PAYMENT" is not one of [REFUND]`}},
		{RuleID: "web", Outcome: OutcomeEscalate, Failed: &Failure{Condition: "surfaces", Field: "surface", Op: "in",
			Value: []string{"web"}, Message: `surface is absent, not one of [web]`}},
	}
	if diff := cmp.Diff(wantRules, x.Rules); diff != "" {
		t.Fatalf("rules (-want +got):\n%s", diff)
	}
	wantFlips := []Flip{
		{Field: "decision_type", Op: "eq", Value: "REFUND", Outcome: OutcomeBlock, Message: "decision_type REFUND would BLOCK"},
		{Field: "surface", Op: "eq", Value: "web", Outcome: OutcomeEscalate, Message: "surface web would ESCALATE"},
		{Field: "workflow_key", Op: "eq", Value: "payroll", Outcome: OutcomeReviewRequired, Message: "workflow_key payroll would REVIEW_REQUIRED"},
	}
	if diff := cmp.Diff(wantFlips, x.Flips); diff != "" {
		t.Fatalf("flips (-want +got):\n%s", diff)
	}
}

func TestExplainWhenFailure(t *testing.T) {
	c := mustCompile(t, bundleWith(Rule{ID: "email", DecisionTypes: []string{"REFUND"},
		Match: []Predicate{{Field: "context.channel", Op: "in", Value: []string{"email", "fax"}}},
		When:  "intent.amount > 200", Outcome: OutcomeEscalate, ReasonCodes: []string{"EMAIL_REFUND"}}))
	in := Input{DecisionType: "REFUND", Amount: 150, HasAmount: true, Context: map[string]any{"channel": "email"}}
	x := c.Explain(&in)
	checkExplainMatchesEvaluate(t, c, &in, x)
	want := &Failure{Condition: "when", Message: "when evaluated to false"}
	if diff := cmp.Diff(want, x.Rules[0].Failed); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// Only structured operands are searched: the CEL threshold is not, so
	// changing the channel cannot flip and no flip is claimed.
	if len(x.Flips) != 0 {
		t.Errorf("flips %+v", x.Flips)
	}
	in.Amount = 250
	x = c.Explain(&in)
	checkExplainMatchesEvaluate(t, c, &in, x)
	wantFlips := []Flip{
		{Field: "context.channel", Op: "absent", Outcome: OutcomeAllow, Message: "context.channel absent would ALLOW"},
		{Field: "decision_type", Op: "absent", Outcome: OutcomeAllow, Message: "decision_type absent would ALLOW"},
	}
	if diff := cmp.Diff(wantFlips, x.Flips); diff != "" {
		t.Fatalf("flips (-want +got):\n%s", diff)
	}
	in.Context = map[string]any{"channel": 7}
	x = c.Explain(&in)
	if f := x.Rules[0].Failed; f == nil || f.Message != `context.channel 7 is not in ["email", "fax"]` || f.Actual != 7.0 {
		t.Errorf("failure %+v", f)
	}
	if len(x.Flips) != 1 || x.Flips[0].Message != "context.channel email would ESCALATE" {
		t.Errorf("flips %+v", x.Flips)
	}
}

func TestExplainMultipleMatches(t *testing.T) {
	c := mustCompile(t, bundleWith(
		Rule{ID: "vendor-new", Match: []Predicate{{Field: "context.vendor_age_days", Op: "lt", Value: 30}}, Outcome: OutcomeReviewRequired, ReasonCodes: []string{"VENDOR_NEW"}},
		Rule{ID: "small", Match: []Predicate{{Field: "amount", Op: "lt", Value: 100}}, Outcome: OutcomeAllow, ReasonCodes: []string{"SMALL"}},
		Rule{ID: "risky", Match: []Predicate{{Field: "risk_score", Op: "gt", Value: 0.8}}, Outcome: OutcomeReviewRequired, ReasonCodes: []string{"RISKY", "VENDOR_NEW"}},
		Rule{ID: "bot", Match: []Predicate{{Field: "actor.type", Op: "eq", Value: "bot"}}, Outcome: OutcomeBlock, ReasonCodes: []string{"BOT"}},
	))
	in := Input{Amount: 50, HasAmount: true, RiskScore: 0.9, HasRiskScore: true, Context: map[string]any{"vendor_age_days": 3}}
	x := c.Explain(&in)
	checkExplainMatchesEvaluate(t, c, &in, x)
	if diff := cmp.Diff([]string{"vendor-new", "risky"}, x.MatchedRules); diff != "" {
		t.Fatal(diff)
	}
	got := map[string][2]bool{}
	for _, r := range x.Rules {
		got[r.RuleID] = [2]bool{r.Matched, r.Decisive}
	}
	want := map[string][2]bool{"vendor-new": {true, true}, "small": {true, false}, "risky": {true, true}, "bot": {false, false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatal(diff)
	}
	// Each review rule alone keeps REVIEW_REQUIRED: no single change of
	// vendor age or risk flips; the bot does.
	wantFlips := []Flip{{Field: "actor.type", Op: "eq", Value: "bot", Outcome: OutcomeBlock, Message: "actor.type bot would BLOCK"}}
	if diff := cmp.Diff(wantFlips, x.Flips); diff != "" {
		t.Fatalf("flips (-want +got):\n%s", diff)
	}
	// Without the vendor rule, the risk score decides: gt 0.8 means at 0.8
	// the rule fails, and "at or below" holds below it too.
	in.Context = nil
	x = c.Explain(&in)
	wantFlips = []Flip{
		{Field: "actor.type", Op: "eq", Value: "bot", Outcome: OutcomeBlock, Message: "actor.type bot would BLOCK"},
		{Field: "risk_score", Op: "le", Value: 0.8, Outcome: OutcomeAllow, Message: "risk_score at or below 0.8 would ALLOW"},
	}
	if diff := cmp.Diff(wantFlips, x.Flips); diff != "" {
		t.Fatalf("flips (-want +got):\n%s", diff)
	}
}

func TestExplainDefaultDecided(t *testing.T) {
	b := bundleWith(Rule{ID: "usd", Match: []Predicate{{Field: "currency", Op: "eq", Value: "USD"}}, Outcome: OutcomeEscalate, ReasonCodes: []string{"USD"}})
	b.Default = Default{Outcome: OutcomeReviewRequired, ReasonCodes: []string{"UNCLASSIFIED"}}
	c := mustCompile(t, b)
	in := Input{Currency: "EUR"}
	x := c.Explain(&in)
	checkExplainMatchesEvaluate(t, c, &in, x)
	raw, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"outcome":"REVIEW_REQUIRED","reason_codes":["PROTOCOL_OUTCOME_REVIEW_REQUIRED","NO_RULE_MATCHED","UNCLASSIFIED"],"matched_rules":[],` +
		`"rules":[{"rule_id":"usd","outcome":"ESCALATE","matched":false,"decisive":false,"failed":{"condition":"match[0]","field":"currency","op":"eq","value":"USD","actual":"EUR","message":"currency \"EUR\" is not eq \"USD\""}}],` +
		`"flips":[{"field":"currency","op":"eq","value":"USD","outcome":"ESCALATE","message":"currency USD would ESCALATE"}]}`
	if string(raw) != want {
		t.Fatalf("got  %s\nwant %s", raw, want)
	}
	// Nothing to flip: "flips": [], "actual": null.
	c = mustCompile(t, bundleWith(Rule{ID: "never", When: "false", Outcome: OutcomeBlock, ReasonCodes: []string{"NEVER"}}))
	raw, _ = json.Marshal(c.Explain(&Input{}))
	want = `{"outcome":"ALLOW","reason_codes":["PROTOCOL_OUTCOME_ALLOW","NO_RULE_MATCHED"],"matched_rules":[],` +
		`"rules":[{"rule_id":"never","outcome":"BLOCK","matched":false,"decisive":false,"failed":{"condition":"when","actual":null,"message":"when evaluated to false"}}],"flips":[]}`
	if string(raw) != want {
		t.Fatalf("got  %s\nwant %s", raw, want)
	}
}

func TestExplainEvaluationError(t *testing.T) {
	c := mustCompile(t, bundleWith(
		Rule{ID: "first", Match: []Predicate{{Field: "amount", Op: "ge", Value: 0}}, Outcome: OutcomeEscalate, ReasonCodes: []string{"ANY"}},
		Rule{ID: "divide", Match: []Predicate{{Field: "context.parts", Op: "exists"}},
			When: "int(intent.context.total) / int(intent.context.parts) > 1", Outcome: OutcomeReviewRequired, ReasonCodes: []string{"DIVIDED"}},
		Rule{ID: "later", When: "true", Outcome: OutcomeAllow, ReasonCodes: []string{"LATER"}},
	))
	in := Input{Amount: 10, HasAmount: true, Context: map[string]any{"total": 10, "parts": 0}}
	x := c.Explain(&in)
	checkExplainMatchesEvaluate(t, c, &in, x)
	if x.Outcome != OutcomeBlock || !strings.Contains(x.EvaluationError, `rule "divide"`) || len(x.MatchedRules) != 0 {
		t.Fatalf("%+v", x)
	}
	if r := x.Rules[0]; !r.Matched || r.Decisive {
		t.Errorf("first: %+v", r)
	}
	if f := x.Rules[1].Failed; f == nil || f.Condition != "when" || !strings.HasPrefix(f.Message, "when failed: ") || !strings.Contains(f.Message, "division by zero") {
		t.Errorf("divide: %+v", f)
	}
	if f := x.Rules[2].Failed; f == nil || f.Message != `when not evaluated: evaluation stopped at rule "divide"` {
		t.Errorf("later: %+v", f)
	}
	// Removing parts avoids the error; no change of amount does, and a
	// change that fails evaluation is no flip.
	wantFlips := []Flip{
		{Field: "context.parts", Op: "absent", Outcome: OutcomeEscalate, Message: "context.parts absent would ESCALATE"},
	}
	if diff := cmp.Diff(wantFlips, x.Flips); diff != "" {
		t.Fatalf("flips (-want +got):\n%s", diff)
	}

	// A refused input is explained by its error alone.
	for _, in := range []*Input{nil, {Amount: math.NaN(), HasAmount: true}, {RiskScore: math.Inf(1), HasRiskScore: true}} {
		x := c.Explain(in)
		checkExplainMatchesEvaluate(t, c, in, x)
		if x.Outcome != OutcomeBlock || x.EvaluationError == "" || len(x.Rules) != 0 || len(x.Flips) != 0 || x.Rules == nil || x.Flips == nil || x.MatchedRules == nil {
			t.Errorf("%+v", x)
		}
	}
}

func TestExplainApprovalFlips(t *testing.T) {
	c := mustCompile(t, bundleWith(
		Rule{ID: "needs-evidence", Match: []Predicate{{Field: "approval.verified", Op: "not_exists"}}, Outcome: OutcomeEscalate, ReasonCodes: []string{"NO_EVIDENCE"}},
		Rule{ID: "unverified", Match: []Predicate{{Field: "approval.verified", Op: "exists"}, {Field: "approval.verified", Op: "eq", Value: false}},
			Outcome: OutcomeReviewRequired, ReasonCodes: []string{"UNVERIFIED"}},
	))
	in := Input{}
	x := c.Explain(&in)
	checkExplainMatchesEvaluate(t, c, &in, x)
	want := []Flip{
		{Field: "approval.verified", Op: "eq", Value: true, Outcome: OutcomeAllow, Message: "approval.verified true would ALLOW"},
		{Field: "approval.verified", Op: "present", Outcome: OutcomeReviewRequired, Message: "approval.verified present would REVIEW_REQUIRED"},
	}
	if diff := cmp.Diff(want, x.Flips); diff != "" {
		t.Fatalf("flips (-want +got):\n%s", diff)
	}
	if f := x.Rules[1].Failed; f == nil || f.Message != "approval.verified is absent (no approval evidence)" {
		t.Errorf("%+v", f)
	}
	approval := &Approval{Verified: true, ApproverID: "m-1", Method: "manager"}
	in = Input{Approval: approval}
	x = c.Explain(&in)
	want = []Flip{
		{Field: "approval.verified", Op: "absent", Outcome: OutcomeEscalate, Message: "approval.verified absent would ESCALATE"},
		{Field: "approval.verified", Op: "eq", Value: false, Outcome: OutcomeReviewRequired, Message: "approval.verified false would REVIEW_REQUIRED"},
	}
	if diff := cmp.Diff(want, x.Flips); diff != "" {
		t.Fatalf("flips (-want +got):\n%s", diff)
	}
	if *approval != (Approval{Verified: true, ApproverID: "m-1", Method: "manager"}) || in.Approval != approval {
		t.Error("the caller's approval changed")
	}
}

func TestExplainStringPresence(t *testing.T) {
	c := mustCompile(t, bundleWith(
		Rule{ID: "anonymous", Match: []Predicate{{Field: "actor.id", Op: "not_exists"}}, Outcome: OutcomeBlock, ReasonCodes: []string{"ANONYMOUS"}},
		Rule{ID: "tier", Match: []Predicate{{Field: "context.tier", Op: "eq", Value: "gold"}}, Outcome: OutcomeEscalate, ReasonCodes: []string{"GOLD"}},
		Rule{ID: "flag", Match: []Predicate{{Field: "context.flagged", Op: "eq", Value: true}}, Outcome: OutcomeReviewRequired, ReasonCodes: []string{"FLAGGED"}},
	))
	in := Input{ActorID: "a-1", Context: map[string]any{"tier": "silver", "flagged": false}}
	x := c.Explain(&in)
	checkExplainMatchesEvaluate(t, c, &in, x)
	want := []Flip{
		{Field: "actor.id", Op: "absent", Outcome: OutcomeBlock, Message: "actor.id absent would BLOCK"},
		{Field: "context.flagged", Op: "eq", Value: true, Outcome: OutcomeReviewRequired, Message: "context.flagged true would REVIEW_REQUIRED"},
		{Field: "context.tier", Op: "eq", Value: "gold", Outcome: OutcomeEscalate, Message: "context.tier gold would ESCALATE"},
	}
	if diff := cmp.Diff(want, x.Flips); diff != "" {
		t.Fatalf("flips (-want +got):\n%s", diff)
	}
	in = Input{}
	x = c.Explain(&in)
	if len(x.Flips) != 1 || x.Flips[0] != (Flip{Field: "actor.id", Op: "present", Outcome: OutcomeAllow, Message: "actor.id present would ALLOW"}) {
		// tier and flagged cannot lift a BLOCK: only supplying the actor does.
		t.Errorf("flips %+v", x.Flips)
	}
}

func TestExplainBounds(t *testing.T) {
	b := bundleWith()
	for i := range 2500 {
		b.Rules = append(b.Rules, Rule{ID: fmt.Sprintf("r%d", i), Match: []Predicate{{Field: "currency", Op: "eq", Value: fmt.Sprintf("C%d", i)}},
			Outcome: OutcomeEscalate, ReasonCodes: []string{"C"}})
	}
	b.Rules = append(b.Rules, Rule{ID: "last", Outcome: OutcomeAllow, ReasonCodes: []string{"ANY"}},
		Rule{ID: "amount", Match: []Predicate{{Field: "amount", Op: "gt", Value: 5}}, Outcome: OutcomeBlock, ReasonCodes: []string{"AMOUNT"}})
	c := mustCompile(t, b)
	in := Input{Currency: "C1400", Amount: 1, HasAmount: true}
	x := c.Explain(&in)
	checkExplainMatchesEvaluate(t, c, &in, x)
	if len(x.Rules) != MaxExplainedRules || x.RulesOmitted != len(b.Rules)-MaxExplainedRules {
		t.Fatalf("%d rules listed, %d omitted", len(x.Rules), x.RulesOmitted)
	}
	// The matches are listed though they come after the bound; the listing
	// stays in bundle order.
	var matched []string
	for k, r := range x.Rules {
		if r.Matched {
			matched = append(matched, r.RuleID)
		}
		if k > 0 && ruleIndex(c, r.RuleID) <= ruleIndex(c, x.Rules[k-1].RuleID) {
			t.Fatalf("listing out of order at %d", k)
		}
	}
	if diff := cmp.Diff([]string{"r1400", "last"}, matched); diff != "" {
		t.Fatal(diff)
	}
	// The flip search is bounded, shared in turns between the fields.
	flips, n := c.flips(&in, x.Outcome)
	if n != MaxFlipEvaluations {
		t.Errorf("%d evaluations", n)
	}
	if diff := cmp.Diff([]Flip{{Field: "amount", Op: "gt", Value: 5.0, Outcome: OutcomeBlock, Message: "amount above 5 would BLOCK"}}, flips); diff != "" {
		t.Error(diff)
	}
}

func ruleIndex(c *Compiled, id string) int {
	return slices.IndexFunc(c.rules, func(r rule) bool { return r.id == id })
}

// TestExplainAgreesWithEvaluateOnCases runs Explain over every bundle and
// input of testdata/cases.
func TestExplainAgreesWithEvaluateOnCases(t *testing.T) {
	n := 0
	for name, cf := range readCaseFiles(t) {
		var bundles []*Compiled
		if c, err := loadCaseBundle(cf.Bundle); err == nil && len(cf.Published) == 0 {
			bundles = append(bundles, c)
		}
		for _, body := range cf.Published {
			if c, err := Load([]byte(body)); err == nil {
				bundles = append(bundles, c)
			}
		}
		for _, tc := range cf.Cases {
			now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
			if tc.Now != "" {
				now, _ = time.Parse(time.RFC3339, tc.Now)
			}
			in, err := inputFromJSON(tc.Input, now)
			if err != nil {
				continue
			}
			if a := tc.Approval; a != nil {
				in.Approval = &Approval{Verified: a.Verified, ApproverID: a.ApproverID, Method: a.Method}
			}
			in.Signals, in.Extra = tc.Signals, tc.Extra
			for _, c := range bundles {
				t.Run(name+"/"+tc.Name, func(t *testing.T) {
					before := cloneInput(&in)
					x := c.Explain(&in)
					checkExplainMatchesEvaluate(t, c, &in, x)
					checkFlips(t, c, &in, x)
					if !reflect.DeepEqual(before, in) {
						t.Fatal("Explain modified its input")
					}
				})
				n++
			}
		}
	}
	if n < 50 {
		t.Fatalf("only %d cases explained", n)
	}
}

// TestExplainAgreesWithEvaluateRandom explains random inputs over a
// generated bundle of structured predicates, selectors and CEL.
func TestExplainAgreesWithEvaluateRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	outcomes := []Outcome{OutcomeAllow, OutcomeEscalate, OutcomeReviewRequired, OutcomeBlock}
	currencies := []any{"USD", "EUR", "GBP"}
	randPred := func() Predicate {
		switch rng.IntN(8) {
		case 0:
			return Predicate{Field: "amount", Op: []string{"lt", "le", "gt", "ge", "eq", "ne"}[rng.IntN(6)], Value: float64(rng.IntN(20)) * 50}
		case 1:
			return Predicate{Field: "risk_score", Op: []string{"lt", "ge"}[rng.IntN(2)], Value: float64(rng.IntN(10)) / 10}
		case 2:
			return Predicate{Field: "currency", Op: []string{"eq", "ne", "in", "not_in"}[rng.IntN(4)], Value: currencies[rng.IntN(3)]}
		case 3:
			return Predicate{Field: "context.tier", Op: []string{"eq", "ne"}[rng.IntN(2)], Value: []any{"gold", "silver", 3.0, true}[rng.IntN(4)]}
		case 4:
			return Predicate{Field: "context.n", Op: []string{"lt", "gt", "in"}[rng.IntN(3)], Value: float64(rng.IntN(5))}
		case 5:
			return Predicate{Field: "approval.verified", Op: []string{"eq", "exists", "not_exists"}[rng.IntN(3)], Value: rng.IntN(2) == 0}
		case 6:
			return Predicate{Field: "actor.type", Op: []string{"exists", "not_exists", "eq"}[rng.IntN(3)], Value: "bot"}
		}
		return Predicate{Field: "amount", Op: []string{"exists", "not_exists"}[rng.IntN(2)]}
	}
	fix := func(p Predicate) Predicate {
		switch p.Op {
		case "exists", "not_exists":
			p.Value = nil
		case "in", "not_in":
			p.Value = []any{p.Value}
		}
		return p
	}
	var flips, failed, numeric int
	whens := []string{"", "", "", "", "has(intent.amount) && intent.amount > 300", "has(intent.context.n) && intent.context.n > 2",
		"approval != null", "has(intent.context.tier) && intent.context.tier == 'gold'", "intent.amount > 900"}
	for iter := range 30 {
		b := bundleWith()
		b.Default = Default{Outcome: outcomes[rng.IntN(4)], ReasonCodes: []string{"DEFAULT"}}
		for i := range 25 {
			r := Rule{ID: fmt.Sprint(i), Outcome: outcomes[rng.IntN(4)], ReasonCodes: []string{fmt.Sprintf("C%d", rng.IntN(6))},
				When: whens[rng.IntN(len(whens))]}
			if rng.IntN(3) == 0 {
				r.DecisionTypes = []string{[]string{"PAYMENT", "REFUND"}[rng.IntN(2)]}
			}
			if rng.IntN(4) == 0 {
				r.WorkflowKeys = []string{"ap", "payroll"}[:1+rng.IntN(2)]
			}
			for range rng.IntN(3) {
				r.Match = append(r.Match, fix(randPred()))
			}
			b.Rules = append(b.Rules, r)
		}
		c := mustCompile(t, b)
		for range 40 {
			in := Input{Now: time.Unix(1_700_000_000, 0)}
			if rng.IntN(4) > 0 {
				in.Amount, in.HasAmount = float64(rng.IntN(1100)), true
			}
			if rng.IntN(2) == 0 {
				in.RiskScore, in.HasRiskScore = rng.Float64(), true
			}
			in.Currency = []string{"", "USD", "EUR", "JPY"}[rng.IntN(4)]
			in.DecisionType = []string{"", "PAYMENT", "REFUND"}[rng.IntN(3)]
			in.WorkflowKey = []string{"", "ap", "payroll"}[rng.IntN(3)]
			in.ActorType = []string{"", "bot", "human"}[rng.IntN(3)]
			if rng.IntN(3) > 0 {
				in.Context = map[string]any{}
				if rng.IntN(2) == 0 {
					in.Context["tier"] = []any{"gold", "silver", 3, true, nil}[rng.IntN(5)]
				}
				if rng.IntN(2) == 0 {
					in.Context["n"] = rng.IntN(6)
				}
			}
			switch rng.IntN(3) {
			case 1:
				in.Approval = &Approval{Verified: true}
			case 2:
				in.Approval = &Approval{}
			}
			before := cloneInput(&in)
			x := c.Explain(&in)
			checkExplainMatchesEvaluate(t, c, &in, x)
			checkFlips(t, c, &in, x)
			if !reflect.DeepEqual(before, in) {
				t.Fatalf("iter %d: Explain modified its input", iter)
			}
			flips += len(x.Flips)
			for _, f := range x.Flips {
				if _, ok := f.Value.(float64); ok {
					numeric++
				}
			}
			if x.EvaluationError != "" {
				failed++
			}
		}
	}
	// The property is not vacuous: flips were found and checked, numbers
	// among them, and evaluation errors were explained.
	if flips < 500 || numeric < 100 || failed < 20 {
		t.Errorf("%d flips (%d numeric), %d failed evaluations", flips, numeric, failed)
	}
	if testing.Verbose() {
		t.Logf("%d flips (%d numeric), %d failed evaluations", flips, numeric, failed)
	}
}

// checkExplainMatchesEvaluate checks that x carries Evaluate's decision
// and that its traces agree with it.
func checkExplainMatchesEvaluate(t *testing.T, c *Compiled, in *Input, x Explanation) {
	t.Helper()
	d := c.Evaluate(in)
	if x.Outcome != d.Outcome || !slices.Equal(x.ReasonCodes, d.ReasonCodes) || !slices.Equal(x.MatchedRules, d.MatchedRules) ||
		x.MatchedRules == nil || x.Rules == nil || x.Flips == nil {
		t.Fatalf("explanation %+v; decision %+v", x, d)
	}
	if (d.Err != nil) != (x.EvaluationError != "") || d.Err != nil && d.Err.Error() != x.EvaluationError {
		t.Fatalf("evaluation error %q; decision error %v", x.EvaluationError, d.Err)
	}
	if in == nil || x.RulesOmitted > 0 || len(x.Rules) == 0 && x.EvaluationError != "" {
		return
	}
	if len(x.Rules) != len(c.rules) {
		t.Fatalf("%d of %d rules traced, none omitted", len(x.Rules), len(c.rules))
	}
	var decisive []string
	best := -1
	for _, r := range x.Rules {
		if r.Matched == (r.Failed != nil) || r.Decisive && !r.Matched {
			t.Fatalf("trace %+v", r)
		}
		if r.Decisive {
			decisive = append(decisive, r.RuleID)
		}
		if r.Matched {
			best = max(best, r.Outcome.Rank())
		}
	}
	if !slices.Equal(decisive, x.MatchedRules) {
		t.Fatalf("decisive %v; matched rules %v", decisive, x.MatchedRules)
	}
	if d.Err == nil && best >= 0 && best != d.Outcome.Rank() {
		t.Fatalf("matched rules rank up to %d; outcome %s", best, d.Outcome)
	}
	if d.Err == nil && best < 0 && len(d.MatchedRules) != 0 {
		t.Fatal("no match traced but rules matched")
	}
}

// checkFlips applies each flip as it reads and checks the outcome it
// promises, and that flips are sorted and unique per (field, outcome).
func checkFlips(t *testing.T, c *Compiled, in *Input, x Explanation) {
	t.Helper()
	for k, f := range x.Flips {
		if f.Outcome == x.Outcome || f.Message == "" {
			t.Fatalf("flip %+v does not flip %s", f, x.Outcome)
		}
		if k > 0 {
			p := x.Flips[k-1]
			if p.Field > f.Field || p.Field == f.Field && p.Outcome.Rank() >= f.Outcome.Rank() {
				t.Fatalf("flips out of order: %+v", x.Flips)
			}
		}
		cp := cloneInput(in)
		applyFlipForTest(t, &cp, f)
		if d := c.Evaluate(&cp); d.Outcome != f.Outcome || d.Err != nil {
			t.Fatalf("flip %+v gives %s (%v)", f, d.Outcome, d.Err)
		}
	}
}

// applyFlipForTest reads a flip as a user would: lt is the value just
// below (by 0.000001 for amounts), gt just above, the others the value.
func applyFlipForTest(t *testing.T, in *Input, f Flip) {
	t.Helper()
	num, isNum := f.Value.(float64)
	if isNum {
		switch f.Op {
		case "lt":
			num = math.Nextafter(num, math.Inf(-1))
			if f.Field == "amount" {
				num = f.Value.(float64) - 0.000001
			}
		case "gt":
			num = math.Nextafter(num, math.Inf(1))
			if f.Field == "amount" {
				num = f.Value.(float64) + 0.000001
			}
		}
	}
	var v any = f.Value
	if isNum {
		v = num
	}
	switch f.Op {
	case "absent":
		v = nil
	case "present":
		v = "present"
	}
	if key, ok := strings.CutPrefix(f.Field, "context."); ok {
		in.Context = maps.Clone(in.Context)
		if in.Context == nil {
			in.Context = map[string]any{}
		}
		if v == nil {
			delete(in.Context, key)
		} else {
			in.Context[key] = v
		}
		return
	}
	s, _ := v.(string)
	switch f.Field {
	case "amount":
		in.Amount, in.HasAmount = num, v != nil
		if !in.HasAmount {
			in.Amount = 0
		}
	case "risk_score":
		in.RiskScore, in.HasRiskScore = num, v != nil
	case "approval.verified":
		switch f.Op {
		case "absent":
			in.Approval = nil
		case "present":
			in.Approval = &Approval{}
		default:
			a := Approval{}
			if in.Approval != nil {
				a = *in.Approval
			}
			a.Verified = f.Value.(bool)
			in.Approval = &a
		}
	case "decision_type":
		in.DecisionType = s
	case "workflow_key":
		in.WorkflowKey = s
	case "surface":
		in.Surface = s
	case "currency":
		in.Currency = s
	case "actor.id":
		in.ActorID = s
	case "actor.type":
		in.ActorType = s
	case "action.type":
		in.ActionType = s
	case "action.target":
		in.ActionTarget = s
	case "vertical_pack":
		in.VerticalPack = s
	case "objective_profile":
		in.ObjectiveProfile = s
	default:
		t.Fatalf("flip of unexpected field %q", f.Field)
	}
}

// cloneInput copies in and the maps and approval Explain could touch.
func cloneInput(in *Input) Input {
	if in == nil {
		return Input{}
	}
	out := *in
	out.Context = maps.Clone(in.Context)
	if in.Approval != nil {
		a := *in.Approval
		out.Approval = &a
	}
	return out
}

func TestExplainConcurrent(t *testing.T) {
	c, err := Load([]byte(celBenchBundle))
	if err != nil {
		t.Fatal(err)
	}
	in := Input{DecisionType: "REFUND", Amount: 250, HasAmount: true, Context: map[string]any{"channel": "email"}}
	want := c.Explain(&in)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if got := c.Explain(&in); !reflect.DeepEqual(got, want) {
					t.Error("explanations differ")
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkExplain(b *testing.B) {
	c := mustCompile(b, benchBundle(true))
	in := benchInput()
	if x := c.Explain(&in); x.Outcome != OutcomeBlock || len(x.Rules) != MaxExplainedRules {
		b.Fatalf("unexpected explanation %+v", x)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Explain(&in)
	}
}
