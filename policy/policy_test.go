package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clearancehq/clearance/internal/strictjson"
)

func TestOutcomeRank(t *testing.T) {
	order := []Outcome{OutcomeAllow, OutcomeEscalate, OutcomeReviewRequired, OutcomeBlock}
	for i, o := range order {
		if o.Rank() != i || !o.Valid() {
			t.Errorf("%s: rank %d valid %v; want %d true", o, o.Rank(), o.Valid(), i)
		}
	}
	for _, o := range []Outcome{"", "allow", "DENY"} {
		if o.Valid() || o.Rank() != -1 {
			t.Errorf("%q accepted", o)
		}
	}
}

func TestEffectiveMode(t *testing.T) {
	cases := []struct{ bundle, req, want Mode }{
		{ModeEnforcement, "", ModeEnforcement},
		{ModeEnforcement, ModeEnforcement, ModeEnforcement},
		{ModeEnforcement, ModeShadow, ModeShadow},
		{ModeShadow, "", ModeShadow},
		{ModeShadow, ModeEnforcement, ModeShadow},
		{ModeShadow, ModeShadow, ModeShadow},
		{"", ModeEnforcement, ModeShadow}, // only a bundle turns enforcement on
	}
	for _, c := range cases {
		if got := EffectiveMode(c.bundle, c.req); got != c.want {
			t.Errorf("EffectiveMode(%q, %q) = %q; want %q", c.bundle, c.req, got, c.want)
		}
	}
	if !ModeShadow.Valid() || !ModeEnforcement.Valid() || Mode("shadow").Valid() {
		t.Error("Mode.Valid")
	}
}

func TestValidationProblems(t *testing.T) {
	raw := `{"bundle_id": "", "version": "1 0", "mode": "LOUD",
	 "rules": [
	  {"id": "a", "outcome": "MAYBE", "reason_codes": ["lower_case"]},
	  {"id": "a", "outcome": "ALLOW", "reason_codes": []},
	  {"id": "", "outcome": "ALLOW", "reason_codes": ["POLICY_MATCHED", "PROTOCOL_OUTCOME_ALLOW"]},
	  {"id": "preds", "outcome": "ALLOW", "reason_codes": ["X"], "match": [
	    {"field": "colour", "op": "eq", "value": "red"},
	    {"field": "amount", "op": "between", "value": 1},
	    {"field": "actor.type", "op": "lt", "value": 5},
	    {"field": "amount", "op": "eq", "value": "5"},
	    {"field": "amount", "op": "exists", "value": 5},
	    {"field": "context.a.b", "op": "eq", "value": 1},
	    {"field": "currency", "op": "in", "value": []},
	    {"field": "currency", "op": "in", "value": ["USD", 1]},
	    {"field": "mode", "op": "eq", "value": "LOUD"},
	    {"field": "context.x", "op": "eq", "value": {"k": 1}},
	    {"field": "approval.verified", "op": "eq", "value": "yes"}]},
	  {"id": "cel", "outcome": "ALLOW", "reason_codes": ["X"], "when": "intent.amount >>> 3"},
	  {"id": "sel", "outcome": "ALLOW", "reason_codes": ["X"], "decision_types": [""]}
	 ],
	 "default": {"outcome": "NOPE", "reason_codes": ["ok_not"]}}`
	_, err := Load([]byte(raw))
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalidBundle) {
		t.Fatalf("got %v; want *ValidationError", err)
	}
	want := []struct{ rule, field, msg string }{
		{"", "bundle_id", "required"},
		{"", "version", "[A-Za-z0-9._-]"},
		{"", "mode", "ENFORCEMENT or SHADOW"},
		{"a", "rules[0].outcome", "outcome must be"},
		{"a", "rules[0].reason_codes[0]", `"lower_case" must match`},
		{"a", "rules[1].id", "duplicate rule id"},
		{"a", "rules[1].reason_codes", "at least one reason code"},
		{"", "rules[2].id", "rule id is required"},
		{"", "rules[2].reason_codes[0]", "reserved"},
		{"", "rules[2].reason_codes[1]", "reserved"},
		{"preds", "rules[3].match[0].field", `unknown field "colour"`},
		{"preds", "rules[3].match[1].op", `unknown op "between"`},
		{"preds", "rules[3].match[2].op", "needs a numeric field"},
		{"preds", "rules[3].match[3].value", "holds a number; the value is a string"},
		{"preds", "rules[3].match[4].value", "takes no value"},
		{"preds", "rules[3].match[5].field", "top-level keys only"},
		{"preds", "rules[3].match[6].value", "non-empty array"},
		{"preds", "rules[3].match[7].value[1]", "the element is a number"},
		{"preds", "rules[3].match[8].value", "mode must be"},
		{"preds", "rules[3].match[9].value", "string, number or boolean"},
		{"preds", "rules[3].match[10].value", "holds a boolean"},
		{"cel", "rules[4].when", "Syntax error"},
		{"sel", "rules[5].decision_types[0]", "must be upper snake case"},
		{"", "default.outcome", "outcome must be"},
		{"", "default.reason_codes[0]", "must match"},
	}
	if len(ve.Problems) != len(want) {
		t.Errorf("%d problems; want %d:\n%s", len(ve.Problems), len(want), problemList(ve.Problems))
	}
	for _, w := range want {
		if !slices.ContainsFunc(ve.Problems, func(p Problem) bool {
			return p.RuleID == w.rule && p.Field == w.field && strings.Contains(p.Message, w.msg)
		}) {
			t.Errorf("missing problem %+v in:\n%s", w, problemList(ve.Problems))
		}
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "policy: invalid bundle; bundle_id: ") || !strings.Contains(msg, "more") {
		t.Errorf("Error() = %q", msg)
	}
	// Problems marshal with the documented member names.
	b, _ := json.Marshal(ve.Problems[3])
	if got := string(b); got != `{"rule_id":"a","field":"rules[0].outcome","message":"outcome must be ALLOW, ESCALATE, REVIEW_REQUIRED or BLOCK"}` {
		t.Errorf("problem JSON %s", got)
	}
}

func problemList(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  %q %s: %s\n", p.RuleID, p.Field, p.Message)
	}
	return b.String()
}

func TestCELProblemCarriesIssueText(t *testing.T) {
	b := bundleWith(Rule{ID: "r1", When: "intent.amount > ", Outcome: OutcomeAllow, ReasonCodes: []string{"X"}})
	_, err := Compile(b)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 {
		t.Fatalf("got %v", err)
	}
	p := ve.Problems[0]
	if p.RuleID != "r1" || p.Field != "rules[0].when" || !strings.Contains(p.Message, "ERROR: <input>:1:") {
		t.Errorf("problem %+v", p)
	}
}

func TestTooManyRules(t *testing.T) {
	b := bundleWith()
	for i := range MaxRules + 1 {
		b.Rules = append(b.Rules, Rule{ID: fmt.Sprint(i), Outcome: OutcomeAllow, ReasonCodes: []string{"X"}})
	}
	_, err := Compile(b)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Field != "rules" {
		t.Fatalf("got %v", err)
	}
	b.Rules = b.Rules[:MaxRules]
	if _, err := Compile(b); err != nil {
		t.Fatalf("%d rules refused: %v", MaxRules, err)
	}
}

func TestProblemsAreCapped(t *testing.T) {
	b := bundleWith()
	for range 500 {
		b.Rules = append(b.Rules, Rule{ID: "dup", Outcome: OutcomeAllow, ReasonCodes: []string{"X"}})
	}
	_, err := Compile(b)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != maxProblems+1 {
		t.Fatalf("got %d problems", len(ve.Problems))
	}
	if last := ve.Problems[maxProblems]; last.Message != "399 more problems not shown" {
		t.Errorf("last problem %+v", last)
	}
}

func TestSyntaxErrorsAreStrictJSONErrors(t *testing.T) {
	for raw, code := range map[string]string{
		`{"bundle_id":"a","bundle_id":"b"}`:    strictjson.CodeDuplicate,
		`{"bundle_id":"a","surprise":1}`:       strictjson.CodeUnknownMember,
		`{"bundle_id":"a"} x`:                  strictjson.CodeTrailingData,
		`{"bundle_id":5}`:                      strictjson.CodeWrongType,
		`{"rules":[{"id":"a","Outcome":"x"}]}`: strictjson.CodeUnknownMember,
		``:                                     strictjson.CodeEmpty,
	} {
		_, err := Load([]byte(raw))
		var se *strictjson.Error
		if !errors.As(err, &se) || se.Code != code || errors.Is(err, ErrInvalidBundle) {
			t.Errorf("Load(%s) = %v; want strictjson %s", raw, err, code)
		}
	}
}

func TestDigestStability(t *testing.T) {
	a := `{"bundle_id":"b","version":"1","mode":"SHADOW","rules":[{"id":"r","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"BLOCK","reason_codes":["BIG"]}],"default":{"outcome":"ALLOW","reason_codes":[]}}`
	b := "{\n  \"default\": {\"reason_codes\": [], \"outcome\": \"ALLOW\"},\n  \"rules\": [ {\"reason_codes\": [\"BIG\"], \"outcome\": \"BLOCK\",\n   \"match\": [{\"value\": 1000.0, \"op\": \"ge\", \"field\": \"amount\"}], \"id\": \"r\"} ],\n  \"mode\": \"SHADOW\", \"version\": \"1\", \"bundle_id\": \"b\"\n}"
	// Absent optional members and [] canonicalise alike.
	c := `{"bundle_id":"b","version":"1","mode":"SHADOW","rules":[{"id":"r","decision_types":[],"when":"","match":[{"field":"amount","op":"ge","value":1e3}],"outcome":"BLOCK","reason_codes":["BIG"]}],"default":{"outcome":"ALLOW"}}`
	ca, err := Load([]byte(a))
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{b, c} {
		cb, err := Load([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if ca.Digest() != cb.Digest() {
			t.Errorf("digests differ:\n%s\n%s", ca.Canonical(), cb.Canonical())
		}
	}
	// The same bundle built in Go (ints, []string values) has the same digest.
	built := Bundle{BundleID: "b", Version: "1", Mode: ModeShadow,
		Rules:   []Rule{{ID: "r", Match: []Predicate{{Field: "amount", Op: "ge", Value: 1000}}, Outcome: OutcomeBlock, ReasonCodes: []string{"BIG"}}},
		Default: Default{Outcome: OutcomeAllow}}
	cc, err := Compile(built)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Digest() != ca.Digest() {
		t.Errorf("Go-built digest differs: %s", cc.Canonical())
	}
	// Canonical round-trips.
	again, err := Load(ca.Canonical())
	if err != nil || again.Digest() != ca.Digest() || string(again.Canonical()) != string(ca.Canonical()) {
		t.Errorf("reload: %v", err)
	}
	wantCanon := `{"bundle_id":"b","default":{"outcome":"ALLOW","reason_codes":[]},"mode":"SHADOW","rules":[{"id":"r","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"BLOCK","reason_codes":["BIG"]}],"version":"1"}`
	if got := string(ca.Canonical()); got != wantCanon {
		t.Errorf("canonical\n got %s\nwant %s", got, wantCanon)
	}
	if !strings.HasPrefix(ca.Digest(), "sha256:") || len(ca.Digest()) != 71 {
		t.Errorf("digest %q", ca.Digest())
	}
	// A different rule changes the digest.
	d, _ := Load([]byte(strings.Replace(a, "1000", "1001", 1)))
	if d.Digest() == ca.Digest() {
		t.Error("digest ignores a value change")
	}
	// Mutating the input or the returned copies does not affect the compiled bundle.
	built.Rules[0].Match[0].Value = 5
	got := cc.Bundle()
	got.Rules[0].ReasonCodes[0] = "CHANGED"
	cc.Canonical()[0] = 'x'
	if cc.Bundle().Rules[0].ReasonCodes[0] != "BIG" || cc.Bundle().Rules[0].Match[0].Value != 1000.0 || cc.Canonical()[0] != '{' {
		t.Error("compiled bundle was mutated")
	}
	snap := cc.Snapshot()
	if snap != (Snapshot{PolicyVersion: "1", BundleID: "b", BundleDigest: cc.Digest(), Evaluator: EvaluatorVersion}) {
		t.Errorf("snapshot %+v", snap)
	}
}

func TestStarter(t *testing.T) {
	s := Starter()
	if s != Starter() {
		t.Error("Starter compiles more than once")
	}
	if s.Mode() != ModeShadow || s.Snapshot().BundleID != "starter" || s.Snapshot().PolicyVersion != "starter-1" {
		t.Errorf("starter snapshot %+v mode %s", s.Snapshot(), s.Mode())
	}
	for _, r := range s.Bundle().Rules {
		if r.When != "" {
			t.Errorf("starter rule %s uses CEL", r.ID)
		}
	}
	// Every amount matches exactly one starter rule.
	for _, amt := range []float64{0, 1, 999.999999, 1000, 5000, 9999.999999, 10000, MaxAmount} {
		for _, appr := range []*Approval{nil, {Verified: true}, {Verified: false}} {
			in := Input{Amount: amt, HasAmount: true, Approval: appr}
			if d := s.Evaluate(&in); len(d.MatchedRules) != 1 || d.Err != nil {
				t.Errorf("amount %v approval %+v: %+v", amt, appr, d)
			}
		}
	}
}

func TestEvaluateFailsClosed(t *testing.T) {
	s := Starter()
	for name, in := range map[string]*Input{
		"nil":           nil,
		"nan amount":    {Amount: math.NaN(), HasAmount: true},
		"inf amount":    {Amount: math.Inf(1), HasAmount: true},
		"negative":      {Amount: -1, HasAmount: true},
		"nan risk":      {RiskScore: math.NaN(), HasRiskScore: true},
		"above max":     {Amount: 2e15, HasAmount: true},
		"negative zero": {Amount: math.Copysign(0, -1), HasAmount: true},
	} {
		d := s.Evaluate(in)
		if d.Outcome != OutcomeBlock || !slices.Equal(d.ReasonCodes, []string{ReasonOutcomeBlock, ReasonEvaluationError}) || !errors.Is(d.Err, ErrEvaluation) {
			t.Errorf("%s: %+v", name, d)
		}
	}
	d := s.Evaluate(&Input{Amount: math.NaN(), HasAmount: true})
	if !errors.Is(d.Err, ErrInvalidInput) {
		t.Errorf("Err %v does not wrap the input error", d.Err)
	}
}

func TestCELErrorNamesRule(t *testing.T) {
	c := mustCompile(t, bundleWith(Rule{ID: "needs-amount", When: "intent.amount > 1", Outcome: OutcomeAllow, ReasonCodes: []string{"X"}}))
	d := c.Evaluate(&Input{})
	var ee *EvalError
	if !errors.As(d.Err, &ee) || ee.RuleID != "needs-amount" || !strings.Contains(d.Err.Error(), "no such key") {
		t.Fatalf("Err = %v", d.Err)
	}
}

func TestEvaluationCostBudget(t *testing.T) {
	// Each rule stays under MaxRuleCost; together they exceed MaxEvaluationCost.
	list := "[" + strings.TrimSuffix(strings.Repeat("1,", 50), ",") + "]"
	expr := list + ".all(x, " + list + ".all(y, x + y + intent.context.n > 0))"
	b := bundleWith()
	for i := range 60 {
		b.Rules = append(b.Rules, Rule{ID: fmt.Sprint(i), When: expr, Outcome: OutcomeAllow, ReasonCodes: []string{"X"}})
	}
	c := mustCompile(t, b)
	one := mustCompile(t, bundleWith(b.Rules[0]))
	in := Input{Context: map[string]any{"n": 0}}
	if d := one.Evaluate(&in); d.Err != nil || d.Outcome != OutcomeAllow {
		t.Fatalf("one rule: %+v", d)
	}
	d := c.Evaluate(&in)
	if !errors.Is(d.Err, errCostBudget) || d.Outcome != OutcomeBlock {
		t.Fatalf("60 rules: %+v", d)
	}
}

func TestDecisionSlicesAreClipped(t *testing.T) {
	s := Starter()
	in := Input{Amount: 5, HasAmount: true}
	d := s.Evaluate(&in)
	_ = append(d.ReasonCodes, "MUTATION")
	_ = append(d.MatchedRules, "MUTATION")
	d2 := s.Evaluate(&in)
	if len(d2.ReasonCodes) != 3 || len(d2.MatchedRules) != 1 || cap(d.ReasonCodes) != 3 {
		t.Errorf("shared slices changed: %+v", d2)
	}
}

func TestEvaluateAllocations(t *testing.T) {
	s := Starter()
	in := Input{DecisionType: "PAYMENT", Amount: 5000, HasAmount: true, Approval: &Approval{Verified: true}}
	if n := testing.AllocsPerRun(100, func() { _ = s.Evaluate(&in) }); n != 0 {
		t.Errorf("starter: %v allocs", n)
	}
	big := mustCompile(t, benchBundle(true))
	bin := benchInput()
	if d := big.Evaluate(&bin); len(d.MatchedRules) != 1 {
		t.Fatalf("bench input matches %v", d.MatchedRules)
	}
	if n := testing.AllocsPerRun(100, func() { _ = big.Evaluate(&bin) }); n != 0 {
		t.Errorf("1000 rules: %v allocs", n)
	}
	ctx := mustCompile(t, bundleWith(Rule{ID: "c", Match: []Predicate{{Field: "context.tier", Op: "in", Value: []string{"a", "b"}}}, Outcome: OutcomeAllow, ReasonCodes: []string{"X"}}))
	cin := Input{Context: map[string]any{"tier": "b"}}
	if n := testing.AllocsPerRun(100, func() { _ = ctx.Evaluate(&cin) }); n != 0 {
		t.Errorf("context predicate: %v allocs", n)
	}
}

// TestIndexAgreesWithPredicates checks the index against a bundle whose
// selectors are rewritten as unindexed `in` predicates.
func TestIndexAgreesWithPredicates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []string{"a", "b", "c", "d", "e"}
	pick := func() []string {
		var out []string
		for _, v := range vals {
			if rng.IntN(3) == 0 {
				out = append(out, v)
			}
		}
		return out
	}
	upper := func(s []string) []string { // decision types are upper snake case
		for i := range s {
			s[i] = strings.ToUpper(s[i])
		}
		return s
	}
	outcomes := []Outcome{OutcomeAllow, OutcomeEscalate, OutcomeReviewRequired, OutcomeBlock}
	for iter := range 50 {
		indexed, flat := bundleWith(), bundleWith()
		for i := range 40 {
			r := Rule{ID: fmt.Sprint(i), Outcome: outcomes[rng.IntN(4)], ReasonCodes: []string{fmt.Sprintf("C%d", rng.IntN(10))},
				DecisionTypes: upper(pick()), WorkflowKeys: pick(), Surfaces: pick()}
			if rng.IntN(2) == 0 {
				r.Match = []Predicate{{Field: "amount", Op: "ge", Value: rng.IntN(100)}}
			}
			indexed.Rules = append(indexed.Rules, r)
			f := r
			f.DecisionTypes, f.WorkflowKeys, f.Surfaces, f.Match = nil, nil, nil, slices.Clone(r.Match)
			for field, sel := range map[string][]string{"decision_type": r.DecisionTypes, "workflow_key": r.WorkflowKeys, "surface": r.Surfaces} {
				if len(sel) > 0 {
					f.Match = append(f.Match, Predicate{Field: field, Op: "in", Value: sel})
				}
			}
			flat.Rules = append(flat.Rules, f)
		}
		ci, cf := mustCompile(t, indexed), mustCompile(t, flat)
		if len(cf.unindexed) != 40 {
			t.Fatal("flat bundle is indexed")
		}
		for range 50 {
			one := func() string { return append(slices.Clone(vals), "", "z")[rng.IntN(7)] }
			in := Input{DecisionType: strings.ToUpper(one()), WorkflowKey: one(), Surface: one(), Amount: float64(rng.IntN(100)), HasAmount: true}
			di, df := ci.Evaluate(&in), cf.Evaluate(&in)
			if diff := cmp.Diff(df, di); diff != "" {
				t.Fatalf("iter %d input %+v (-flat +indexed):\n%s", iter, in, diff)
			}
		}
	}
}

func TestConcurrentEvaluate(t *testing.T) {
	c, err := Load([]byte(celBenchBundle))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				in := Input{DecisionType: "REFUND", Amount: float64(g*100 + i), HasAmount: true,
					Context: map[string]any{"channel": "email"}, Now: time.Unix(int64(i), 0)}
				d := c.Evaluate(&in)
				want := OutcomeAllow
				if in.Amount > 200 {
					want = OutcomeEscalate
				}
				if d.Outcome != want || d.Err != nil {
					t.Errorf("amount %v: %+v", in.Amount, d)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestReasonCodesVocabulary(t *testing.T) {
	seen := map[string]bool{}
	for _, rc := range ReasonCodes() {
		if !validReasonCode(rc.Code) || rc.Description == "" || rc.Category == "" || seen[rc.Code] {
			t.Errorf("bad entry %+v", rc)
		}
		seen[rc.Code] = true
	}
	for _, c := range []string{ReasonPolicyMatched, ReasonNoRuleMatched, ReasonOutcomeAllow, ReasonOutcomeEscalate,
		ReasonOutcomeReviewRequired, ReasonOutcomeBlock, ReasonApprovalVerified, ReasonEvaluationError,
		ReasonAmountMissing, ReasonAmountBelowEscalation, ReasonAmountEscalationBand, ReasonAmountBlock} {
		if !seen[c] {
			t.Errorf("%s undocumented", c)
		}
	}
	// Every code the starter emits is documented.
	for _, r := range Starter().Bundle().Rules {
		for _, c := range r.ReasonCodes {
			if !seen[c] {
				t.Errorf("starter code %s undocumented", c)
			}
		}
	}
	ReasonCodes()[0].Code = "CHANGED"
	if ReasonCodes()[0].Code == "CHANGED" {
		t.Error("ReasonCodes shares its slice")
	}
}

func TestParseAmount(t *testing.T) {
	ok := map[string]float64{"0": 0, "0.0": 0, "999.99": 999.99, "9999.999": 9999.999, "1000000000000000": 1e15,
		" 12.5 ": 12.5, "1.123456": 1.123456, "1.1234560000": 1.123456, "123456789012345.5": 123456789012345.5}
	for raw, want := range ok {
		got, err := ParseAmount([]byte(raw))
		if err != nil || got != want {
			t.Errorf("ParseAmount(%q) = %v, %v; want %v", raw, got, err, want)
		}
	}
	for _, raw := range []string{"", "-1", "-0", "null", "true", `"5"`, "{}", "[]", "1e3", "1E+2", "1e400", "1e-2",
		"01", "1.", ".5", "+1", "1.1234567", "1000000000000000.1", "10000000000000000", "NaN", "Infinity", "0x10", "1 2"} {
		_, err := ParseAmount([]byte(raw))
		var ie *InputError
		if !errors.As(err, &ie) || ie.Code != CodeInvalidAmount || ie.Field != "amount" || !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ParseAmount(%q) = %v; want INVALID_AMOUNT", raw, err)
		}
	}
}

// A policy.Amount inside another request struct decoded with strictjson
// keeps its code: the InputError surfaces as *strictjson.Error INVALID_AMOUNT.
func TestAmountInsideStrictJSON(t *testing.T) {
	type request struct {
		Intent
		Extra string `json:"extra"`
	}
	for _, raw := range []string{`{"amount":null}`, `{"amount":"5"}`, `{"action":{"amount":-3}}`, `{"amount":1e3,"extra":"x"}`} {
		var r request
		err := strictjson.Decode([]byte(raw), &r, strictjson.Options{RejectUnknown: true})
		var se *strictjson.Error
		if !errors.As(err, &se) || se.Code != CodeInvalidAmount {
			t.Errorf("%s: %v", raw, err)
		}
	}
	var r request
	if err := strictjson.Decode([]byte(`{"amount":12.50,"extra":"x"}`), &r, strictjson.Options{RejectUnknown: true}); err != nil {
		t.Fatal(err)
	}
	if r.Amount != (Amount{Value: 12.5, Set: true, Raw: "12.50"}) {
		t.Errorf("amount %+v", r.Amount)
	}
}

func TestIntentJSON(t *testing.T) {
	raw := `{"decision_type":"REFUND","amount":1000.50,"risk_score":0.25,"mode":"SHADOW","context":{"k":"v"},"actor":{"id":"a1","type":"agent"},"action":{"type":"pay","amount":1000.5,"currency":"USD","target":"acct"}}`
	i, err := DecodeIntent([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(i)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != raw {
		t.Errorf("re-encoded\n got %s\nwant %s", out, raw)
	}
	if empty, _ := json.Marshal(Intent{}); string(empty) != `{}` {
		t.Errorf("empty intent %s", empty)
	}
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	in, err := i.Input(now)
	if err != nil {
		t.Fatal(err)
	}
	want := Input{DecisionType: "REFUND", Amount: 1000.5, HasAmount: true, RiskScore: 0.25, HasRiskScore: true,
		RequestedMode: ModeShadow, Context: map[string]any{"k": "v"}, ActorID: "a1", ActorType: "agent",
		ActionType: "pay", Currency: "USD", ActionTarget: "acct", Now: now}
	if diff := cmp.Diff(want, in); diff != "" {
		t.Errorf("Input (-want +got):\n%s", diff)
	}
	// Field names of input errors.
	for raw, field := range map[string]string{`{"action":{"amount":null}}`: "action.amount", `{"amount":true}`: "amount", `{"risk_score":"x"}`: "risk_score"} {
		_, err := DecodeIntent([]byte(raw))
		var ie *InputError
		if !errors.As(err, &ie) || ie.Field != field {
			t.Errorf("%s: %v; want field %s", raw, err, field)
		}
	}
	// Go-built intents are checked too.
	for _, bad := range []Intent{{Amount: Amount{Value: -1, Set: true}}, {Action: &Action{Amount: Amount{Value: math.Inf(1), Set: true}}}, {RiskScore: Score{Value: math.NaN(), Set: true}}, {Mode: "x"}} {
		if _, err := bad.Input(now); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v accepted: %v", bad, err)
		}
	}
}

func bundleWith(rules ...Rule) Bundle {
	return Bundle{BundleID: "t", Version: "1", Mode: ModeEnforcement, Rules: rules, Default: Default{Outcome: OutcomeAllow}}
}

func mustCompile(t testing.TB, b Bundle) *Compiled {
	t.Helper()
	c, err := Compile(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
