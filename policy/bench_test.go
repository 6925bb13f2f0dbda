package policy

import (
	"fmt"
	"testing"
	"time"
)

func BenchmarkEvaluateStarter(b *testing.B) {
	c := Starter()
	in := Input{DecisionType: "PAYMENT", WorkflowKey: "ap", Amount: 5000, HasAmount: true,
		Approval: &Approval{Verified: true}, Now: time.Unix(1_700_000_000, 0)}
	b.ReportAllocs()
	for b.Loop() {
		if d := c.Evaluate(&in); d.Outcome != OutcomeAllow {
			b.Fatal(d)
		}
	}
}

// benchBundle has 1,000 rules over 100 decision types and 100 workflow keys;
// benchInput selects 10 candidates through the index, 2 of which match (one
// REVIEW_REQUIRED, one BLOCK). Unindexed, the same selectors are predicates.
func benchBundle(indexed bool) Bundle {
	outcomes := []Outcome{OutcomeAllow, OutcomeEscalate, OutcomeReviewRequired, OutcomeBlock}
	bb := Bundle{BundleID: "bench", Version: "1", Mode: ModeEnforcement, Default: Default{Outcome: OutcomeAllow}}
	for i := range 1000 {
		dt, wk := fmt.Sprintf("DT_%d", i%100), fmt.Sprintf("wk-%d", (i/200)*20+i%20)
		r := Rule{ID: fmt.Sprintf("rule-%d", i), Outcome: outcomes[(i/100)%4], ReasonCodes: []string{fmt.Sprintf("CODE_%d", i)},
			Match: []Predicate{{Field: "amount", Op: "ge", Value: (i % 7) * 100}}}
		if indexed {
			r.DecisionTypes, r.WorkflowKeys = []string{dt}, []string{wk}
		} else {
			r.Match = append([]Predicate{{Field: "decision_type", Op: "eq", Value: dt}, {Field: "workflow_key", Op: "eq", Value: wk}}, r.Match...)
		}
		bb.Rules = append(bb.Rules, r)
	}
	return bb
}

func benchInput() Input {
	return Input{DecisionType: "DT_7", WorkflowKey: "wk-27", Amount: 5000, HasAmount: true}
}

func benchmarkBundle(b *testing.B, bb Bundle) {
	c := mustCompile(b, bb)
	in := benchInput()
	if d := c.Evaluate(&in); d.Outcome != OutcomeBlock || len(d.MatchedRules) != 1 || d.MatchedRules[0] != "rule-307" {
		b.Fatalf("unexpected decision %+v", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Evaluate(&in)
	}
}

func BenchmarkEvaluate1000Rules(b *testing.B)          { benchmarkBundle(b, benchBundle(true)) }
func BenchmarkEvaluate1000RulesUnindexed(b *testing.B) { benchmarkBundle(b, benchBundle(false)) }

const celBenchBundle = `{"bundle_id": "cel-bench", "version": "1", "mode": "ENFORCEMENT",
 "rules": [
  {"id": "small", "match": [{"field": "amount", "op": "lt", "value": 1000000}], "outcome": "ALLOW", "reason_codes": ["SMALL"]},
  {"id": "email-refund", "decision_types": ["REFUND"],
   "when": "has(intent.amount) && intent.amount > 200 && intent.context.channel == 'email'",
   "outcome": "ESCALATE", "reason_codes": ["EMAIL_REFUND_OVER_200"]}],
 "default": {"outcome": "ALLOW", "reason_codes": []}}`

func BenchmarkEvaluateCEL(b *testing.B) {
	c, err := Load([]byte(celBenchBundle))
	if err != nil {
		b.Fatal(err)
	}
	in := Input{DecisionType: "REFUND", Amount: 250, HasAmount: true, Context: map[string]any{"channel": "email"},
		Now: time.Unix(1_700_000_000, 0)}
	b.ReportAllocs()
	for b.Loop() {
		if d := c.Evaluate(&in); d.Outcome != OutcomeEscalate {
			b.Fatal(d)
		}
	}
}

func BenchmarkLoadStarter(b *testing.B) {
	raw := []byte(starterJSON)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIntentInput measures the mapping every decision makes, name
// grammars included.
func BenchmarkIntentInput(b *testing.B) {
	i := Intent{DecisionType: "PAYMENT", WorkflowKey: "ap.invoice", Surface: "workspace_app", Amount: Amount{Value: 2500, Set: true},
		Actor: &Actor{ID: "agent-7", Type: "agent"}, Action: &Action{Type: "refund", Currency: "EUR", Target: "order-1"}}
	now := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := i.Input(now); err != nil {
			b.Fatal(err)
		}
	}
}
