package peers

import (
	"context"
	"testing"

	"github.com/clearancehq/clearance/policy"
)

// starterCases are the inputs of the agreement test with the starter
// policy's expected outcome and winning rule.
var starterCases = []struct {
	Case
	want Result
}{
	{Case{Name: "zero", Amount: 0, HasAmount: true}, Result{"ALLOW", []string{"amount-below-escalation"}}},
	{Case{Name: "999.99", Amount: 999.99, HasAmount: true}, Result{"ALLOW", []string{"amount-below-escalation"}}},
	{Case{Name: "1000", Amount: 1000, HasAmount: true}, Result{"ESCALATE", []string{"amount-escalation-band"}}},
	{Case{Name: "5000", Amount: 5000, HasAmount: true}, Result{"ESCALATE", []string{"amount-escalation-band"}}},
	{Case{Name: "5000-approved", Amount: 5000, HasAmount: true, Approved: true}, Result{"ALLOW", []string{"amount-escalation-band-approved"}}},
	{Case{Name: "9999.99", Amount: 9999.99, HasAmount: true}, Result{"ESCALATE", []string{"amount-escalation-band"}}},
	{Case{Name: "10000", Amount: 10000, HasAmount: true}, Result{"BLOCK", []string{"amount-block"}}},
	{Case{Name: "50000", Amount: 50000, HasAmount: true}, Result{"BLOCK", []string{"amount-block"}}},
	{Case{Name: "no-amount"}, Result{"ESCALATE", []string{"amount-missing"}}},
	{Case{Name: "no-amount-approved", Approved: true}, Result{"ESCALATE", []string{"amount-missing"}}},
}

// benchCase is the starter input of BenchmarkStarter (as in the policy
// package's BenchmarkEvaluateStarter).
var benchCase = Case{Name: "bench", DecisionType: "PAYMENT", WorkflowKey: "ap", Amount: 5000, HasAmount: true, Approved: true}

// rulesCases are inputs of the generated bundles, valid for every size.
func rulesCases(n int) []struct {
	Case
	want Result
} {
	d := n / 10
	rule := func(i int) []string { return []string{"rule-" + itoa(i)} }
	return []struct {
		Case
		want Result
	}{
		// candidates rule-(7+2d) (REVIEW_REQUIRED) and rule-(7+7d) (BLOCK) both match.
		{Case{Name: "two-match", DecisionType: "DT_7", WorkflowKey: "wk-2", Amount: 5000, HasAmount: true}, Result{"BLOCK", rule(7 + 7*d)}},
		// candidates rule-(3+d) (ESCALATE, ≥100) matches, rule-(3+6d) (≥600) does not.
		{Case{Name: "one-match", DecisionType: "DT_3", WorkflowKey: "wk-1", Amount: 150, HasAmount: true}, Result{"ESCALATE", rule(3 + d)}},
		{Case{Name: "no-match", DecisionType: "DT_3", WorkflowKey: "wk-1", Amount: 50, HasAmount: true}, Result{"ALLOW", nil}},
		{Case{Name: "unknown-type", DecisionType: "OTHER", WorkflowKey: "wk-1", Amount: 5000, HasAmount: true}, Result{"ALLOW", nil}},
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

type engines struct {
	clearance *policy.Compiled
	opa       *OPA
	cedar     *Cedar
}

func starterEngines(tb testing.TB) engines {
	tb.Helper()
	o, err := NewOPA(StarterRego, StarterQuery)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := NewCedar(StarterCedar, "ESCALATE")
	if err != nil {
		tb.Fatal(err)
	}
	return engines{policy.Starter(), o, c}
}

func rulesEngines(tb testing.TB, n int) engines {
	tb.Helper()
	cl, err := policy.Compile(RulesBundle(n))
	if err != nil {
		tb.Fatal(err)
	}
	o, err := NewOPA(RulesRego(n), RulesQuery)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := NewCedar(RulesCedar(n), "ALLOW")
	if err != nil {
		tb.Fatal(err)
	}
	return engines{cl, o, c}
}

// check asserts that each engine gives want for c.
func (e engines) check(t *testing.T, c Case, want Result) {
	t.Helper()
	in := ClearanceInput(c)
	if got := ClearanceResult(e.clearance.Evaluate(&in)); !got.Equal(want) {
		t.Errorf("%s: clearance = %v, want %v", c.Name, got, want)
	}
	got, err := e.opa.Eval(context.Background(), OPAInput(c))
	if err != nil || !got.Equal(want) {
		t.Errorf("%s: opa = %v (err %v), want %v", c.Name, got, err, want)
	}
	got, err = e.cedar.Eval(CedarRequest(c))
	if err != nil || !got.Equal(want) {
		t.Errorf("%s: cedar = %v (err %v), want %v", c.Name, got, err, want)
	}
}

func TestAgreeStarter(t *testing.T) {
	e := starterEngines(t)
	for _, tc := range starterCases {
		e.check(t, tc.Case, tc.want)
	}
	e.check(t, benchCase, Result{"ALLOW", []string{"amount-escalation-band-approved"}})
}

func TestAgreeRules(t *testing.T) {
	for _, n := range []int{100, 1000} {
		e := rulesEngines(t, n)
		for _, tc := range rulesCases(n) {
			e.check(t, tc.Case, tc.want)
		}
	}
}

// bench runs the three engines on c, checking the outcome before timing.
func bench(b *testing.B, e engines, c Case, want Result) {
	b.Run("clearance", func(b *testing.B) {
		in := ClearanceInput(c)
		if got := ClearanceResult(e.clearance.Evaluate(&in)); !got.Equal(want) {
			b.Fatalf("clearance = %v, want %v", got, want)
		}
		b.ReportAllocs()
		for b.Loop() {
			if d := e.clearance.Evaluate(&in); string(d.Outcome) != want.Outcome {
				b.Fatal(d)
			}
		}
	})
	b.Run("opa", func(b *testing.B) {
		ctx, in := context.Background(), OPAInput(c)
		b.ReportAllocs()
		for b.Loop() {
			if got, err := e.opa.Eval(ctx, in); err != nil || got.Outcome != want.Outcome {
				b.Fatal(got, err)
			}
		}
	})
	b.Run("cedar", func(b *testing.B) {
		req := CedarRequest(c)
		b.ReportAllocs()
		for b.Loop() {
			if got, err := e.cedar.Eval(req); err != nil || got.Outcome != want.Outcome {
				b.Fatal(got, err)
			}
		}
	})
}

func BenchmarkStarter(b *testing.B) {
	bench(b, starterEngines(b), benchCase, Result{"ALLOW", []string{"amount-escalation-band-approved"}})
}

func benchmarkRules(b *testing.B, n int) {
	tc := rulesCases(n)[0] // two candidate rules match
	bench(b, rulesEngines(b, n), tc.Case, tc.want)
}

func BenchmarkRules100(b *testing.B)  { benchmarkRules(b, 100) }
func BenchmarkRules1000(b *testing.B) { benchmarkRules(b, 1000) }
