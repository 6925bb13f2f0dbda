package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func gateBundle(gates []SpendGate, rules ...Rule) Bundle {
	b := signalBundle(rules...)
	b.SpendGates = gates
	return b
}

func payInput(amount float64, currency string) *Input {
	return &Input{DecisionType: "PAYMENT", WorkflowKey: "payments", ActorID: "agent-1", ActionType: "pay",
		Amount: amount, HasAmount: true, Currency: currency}
}

func TestSpendGateRefusesWhatDoesNotFit(t *testing.T) {
	c, err := Compile(gateBundle([]SpendGate{
		{ID: "payments.daily", WorkflowKeys: []string{"payments"}, Currency: "EUR", Limit: "50000", Window: WindowDay},
		{ID: "review", ActionTypes: []string{"refund"}, Currency: "EUR", Limit: "100.5", Window: WindowHour, OnExceed: OutcomeReviewRequired},
	}))
	if err != nil {
		t.Fatal(err)
	}
	in := payInput(20000, "EUR")
	if d := c.Evaluate(in); d.Outcome != OutcomeAllow {
		t.Fatalf("unused budget: %v %v", d.Outcome, d.ReasonCodes)
	}
	in.Spend = map[string]SpendStatus{"payments.daily": {Currency: "EUR", Limit: 50000 * MicrosPerUnit, Used: 30000 * MicrosPerUnit}}
	if d := c.Evaluate(in); d.Outcome != OutcomeAllow {
		t.Fatalf("exact fit: %v %v", d.Outcome, d.ReasonCodes)
	}
	in.Amount = 20000.000001
	d := c.Evaluate(in)
	if d.Outcome != OutcomeBlock || !slices.Equal(d.ReasonCodes, []string{ReasonOutcomeBlock, ReasonSpendLimitExceeded}) {
		t.Fatalf("one micro over: %v %v", d.Outcome, d.ReasonCodes)
	}
	// A limit the caller misstates does not count: the bundle's does.
	in.Spend["payments.daily"] = SpendStatus{Limit: 1 << 60, Used: 30000 * MicrosPerUnit}
	if d := c.Evaluate(in); d.Outcome != OutcomeBlock {
		t.Fatalf("caller's limit was used: %v", d.Outcome)
	}
	if d := c.Evaluate(payInput(10, "USD")); d.Outcome != OutcomeBlock || d.ReasonCodes[1] != ReasonSpendCurrencyMismatch {
		t.Fatalf("other currency: %v %v", d.Outcome, d.ReasonCodes)
	}
	noAmount := payInput(0, "")
	noAmount.HasAmount = false
	if d := c.Evaluate(noAmount); d.Outcome != OutcomeAllow {
		t.Fatalf("no amount spends nothing: %v", d.Outcome)
	}
	refund := &Input{ActionType: "refund", Amount: 100.6, HasAmount: true, Currency: "EUR"}
	if d := c.Evaluate(refund); d.Outcome != OutcomeReviewRequired || d.ReasonCodes[1] != ReasonSpendLimitExceeded {
		t.Fatalf("on_exceed REVIEW_REQUIRED: %v %v", d.Outcome, d.ReasonCodes)
	}
}

func TestSpendGateLeavesNonAllowAlone(t *testing.T) {
	c, err := Compile(gateBundle([]SpendGate{{ID: "g", Currency: "EUR", Limit: "1", Window: WindowDay}},
		Rule{ID: "esc", Match: []Predicate{{Field: "amount", Op: "gt", Value: 5}}, Outcome: OutcomeEscalate, ReasonCodes: []string{"BIG"}}))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Evaluate(payInput(10, "EUR"))
	if d.Outcome != OutcomeEscalate || !slices.Contains(d.ReasonCodes, "BIG") {
		t.Fatalf("ESCALATE changed: %v %v", d.Outcome, d.ReasonCodes)
	}
}

func TestRulesSeeTheBudget(t *testing.T) {
	c, err := Compile(gateBundle([]SpendGate{{ID: "daily", Currency: "EUR", Limit: "1000", Window: WindowDay}},
		Rule{ID: "low", Match: []Predicate{{Field: "spend.daily.remaining", Op: "lt", Value: 200}}, Outcome: OutcomeEscalate, ReasonCodes: []string{"BUDGET_LOW"}},
		Rule{ID: "cel", When: `"daily" in spend && spend["daily"].used >= 900.0`, Outcome: OutcomeReviewRequired, ReasonCodes: []string{"BUDGET_NEARLY_USED"}},
	))
	if err != nil {
		t.Fatal(err)
	}
	in := payInput(10, "EUR")
	if d := c.Evaluate(in); d.Outcome != OutcomeAllow {
		t.Fatalf("no status: %v", d.Outcome)
	}
	in.Spend = map[string]SpendStatus{"daily": {Currency: "EUR", Limit: 1000 * MicrosPerUnit, Used: 850 * MicrosPerUnit}}
	if d := c.Evaluate(in); d.Outcome != OutcomeEscalate || !slices.Contains(d.ReasonCodes, "BUDGET_LOW") {
		t.Fatalf("predicate on remaining: %v %v", d.Outcome, d.ReasonCodes)
	}
	in.Spend["daily"] = SpendStatus{Currency: "EUR", Limit: 1000 * MicrosPerUnit, Used: 950 * MicrosPerUnit}
	d := c.Evaluate(in)
	if d.Outcome != OutcomeReviewRequired || !slices.Contains(d.ReasonCodes, "BUDGET_NEARLY_USED") {
		t.Fatalf("CEL on used: %v %v", d.Outcome, d.ReasonCodes)
	}
}

func TestSpendGateValidation(t *testing.T) {
	bad := []struct {
		gate  SpendGate
		field string
	}{
		{SpendGate{ID: "", Currency: "EUR", Limit: "1", Window: WindowDay}, "spend_gates[0].id"},
		{SpendGate{ID: "g", Currency: "eur", Limit: "1", Window: WindowDay}, "spend_gates[0].currency"},
		{SpendGate{ID: "g", Currency: "EUR", Limit: "0", Window: WindowDay}, "spend_gates[0].limit"},
		{SpendGate{ID: "g", Currency: "EUR", Limit: "1.0000001", Window: WindowDay}, "spend_gates[0].limit"},
		{SpendGate{ID: "g", Currency: "EUR", Limit: "-5", Window: WindowDay}, "spend_gates[0].limit"},
		{SpendGate{ID: "g", Currency: "EUR", Limit: "1e3", Window: WindowDay}, "spend_gates[0].limit"},
		{SpendGate{ID: "g", Currency: "EUR", Limit: "1000000000001", Window: WindowDay}, "spend_gates[0].limit"},
		{SpendGate{ID: "g", Currency: "EUR", Limit: "1", Window: "YEAR"}, "spend_gates[0].window"},
		{SpendGate{ID: "g", Currency: "EUR", Limit: "1", Window: WindowDay, OnExceed: OutcomeAllow}, "spend_gates[0].on_exceed"},
		{SpendGate{ID: "g", Currency: "EUR", Limit: "1", Window: WindowDay, WorkflowKeys: []string{" x"}}, "spend_gates[0].workflow_keys[0]"},
	}
	for _, tc := range bad {
		_, err := Compile(gateBundle([]SpendGate{tc.gate}))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Problems[0].Field != tc.field {
			t.Errorf("%+v: got %v, want a problem at %s", tc.gate, err, tc.field)
		}
	}
	two := SpendGate{ID: "g", Currency: "EUR", Limit: "1", Window: WindowDay}
	if _, err := Compile(gateBundle([]SpendGate{two, two})); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("duplicate ids: %v", err)
	}
	_, err := Compile(signalBundle(Rule{ID: "r", Match: []Predicate{{Field: "spend.daily.left", Op: "lt", Value: 1}}, Outcome: OutcomeBlock, ReasonCodes: []string{"X"}}))
	if err == nil {
		t.Error("spend.<gate>.left compiled")
	}
	_, err = Compile(signalBundle(Rule{ID: "r", Outcome: OutcomeBlock, ReasonCodes: []string{ReasonSpendLimitExceeded}}))
	if err == nil {
		t.Error("a rule may not claim the evaluator's SPEND_LIMIT_EXCEEDED")
	}
}

func TestSpendGatesKeepOldDigests(t *testing.T) {
	b := signalBundle()
	c1, _ := Compile(b)
	b.SpendGates = []SpendGate{}
	c2, err := Compile(b)
	if err != nil || c1.Digest() != c2.Digest() {
		t.Fatalf("an empty gate list changed the digest: %v", err)
	}
	c3, err := Load([]byte(`{"bundle_id":"b","version":"v1","mode":"ENFORCEMENT","rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]},
		"spend_gates":[{"id":"g","currency":"EUR","limit":50000.5,"window":"DAY"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c5, err := Load([]byte(strings.Replace(string(c3.Canonical()), `"limit":"50000.5"`, `"limit":"050000.500"`, 1)))
	if err != nil || c5.Digest() != c3.Digest() {
		t.Fatalf("one limit, two digests: %v", err)
	}
	c4, err := Load(c3.Canonical())
	if err != nil || c4.Digest() != c3.Digest() || !strings.Contains(string(c3.Canonical()), `"limit":"50000.5"`) {
		t.Fatalf("a number limit is not kept as its decimal: %s %v", c3.Canonical(), err)
	}
}

func TestWindowStart(t *testing.T) {
	at := time.Date(2026, 11, 25, 14, 35, 12, 5, time.FixedZone("X", 3600)) // 13:35:12 UTC, a Wednesday
	for _, tc := range []struct {
		w          Window
		start, end string
	}{
		{WindowHour, "2026-11-25T13:00:00Z", "2026-11-25T14:00:00Z"},
		{WindowDay, "2026-11-25T00:00:00Z", "2026-11-26T00:00:00Z"},
		{WindowWeek, "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"},
		{WindowMonth, "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"},
	} {
		s := tc.w.Start(at)
		if s.Format(time.RFC3339) != tc.start || tc.w.End(s).Format(time.RFC3339) != tc.end {
			t.Errorf("%s: %s..%s", tc.w, s.Format(time.RFC3339), tc.w.End(s).Format(time.RFC3339))
		}
	}
	sunday := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	if got := WindowWeek.Start(sunday).Format(time.DateOnly); got != "2026-11-23" {
		t.Errorf("a Sunday's week starts %s", got)
	}
}

func TestAmountMicros(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want int64
	}{
		{0.1, 100000}, {1234567.89, 1234567890000}, {0.0000001, 1}, {1.0000011, 1000002}, {50000, 50000000000},
		{2e15, (MaxSpendLimit + 1) * MicrosPerUnit},
	} {
		if got := AmountMicros(tc.in); got != tc.want {
			t.Errorf("AmountMicros(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
	if FormatMicros(1234567890000) != "1234567.89" || FormatMicros(1) != "0.000001" || FormatMicros(5e10) != "50000" {
		t.Error("FormatMicros")
	}
}
