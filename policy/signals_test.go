package policy

import (
	"testing"
	"time"
)

func signalBundle(rules ...Rule) Bundle {
	return Bundle{BundleID: "b", Version: "v1", Mode: ModeEnforcement, Rules: rules,
		Default: Default{Outcome: OutcomeAllow, ReasonCodes: []string{"OK"}}}
}

func TestUsesSignals(t *testing.T) {
	cases := []struct {
		name string
		rule Rule
		want bool
	}{
		{"amount only", Rule{ID: "r", Match: []Predicate{{Field: "amount", Op: "ge", Value: 10}}}, false},
		{"context only", Rule{ID: "r", Match: []Predicate{{Field: "context.signals", Op: "exists"}}}, false},
		{"when on intent", Rule{ID: "r", When: `intent.amount > 5.0`}, false},
		{"signal data predicate", Rule{ID: "r", Match: []Predicate{{Field: "signals.fraud.alert.data.level", Op: "eq", Value: "high"}}}, true},
		{"signal age predicate", Rule{ID: "r", Match: []Predicate{{Field: "signals.fraud.age_seconds", Op: "lt", Value: 60}}}, true},
		{"when on signals", Rule{ID: "r", When: `"fraud" in signals`}, true},
		{"signals in a macro", Rule{ID: "r", When: `intent.action.parameters.all(k, k in signals)`}, true},
	}
	for _, tc := range cases {
		tc.rule.Outcome, tc.rule.ReasonCodes = OutcomeBlock, []string{"X"}
		c, err := Compile(signalBundle(tc.rule))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.UsesSignals() != tc.want {
			t.Errorf("%s: UsesSignals() = %v, want %v", tc.name, c.UsesSignals(), tc.want)
		}
	}
}

func TestSignalPredicates(t *testing.T) {
	c, err := Compile(signalBundle(
		Rule{ID: "fraud", Outcome: OutcomeBlock, ReasonCodes: []string{"FRAUD_ALERT"},
			Match: []Predicate{{Field: "signals.fraud.alert.data.level", Op: "in", Value: []any{"high", "critical"}},
				{Field: "signals.fraud.alert.age_seconds", Op: "lt", Value: 3600}}},
		Rule{ID: "cel", Outcome: OutcomeEscalate, ReasonCodes: []string{"MAINTENANCE"},
			When: `"maintenance" in signals && signals["maintenance"].data.active == true`},
	))
	if err != nil {
		t.Fatal(err)
	}
	sig := func(age float64, data map[string]any) map[string]any {
		return map[string]any{SignalData: data, SignalTimestamp: "2026-01-01T00:00:00Z", SignalReceivedAt: "2026-01-01T00:00:01Z", SignalAgeSeconds: age}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		signals map[string]any
		want    Outcome
	}{
		{"none", nil, OutcomeAllow},
		{"high and fresh", map[string]any{"fraud.alert": sig(10, map[string]any{"level": "high"})}, OutcomeBlock},
		{"high but old", map[string]any{"fraud.alert": sig(7200, map[string]any{"level": "high"})}, OutcomeAllow},
		{"low", map[string]any{"fraud.alert": sig(10, map[string]any{"level": "low"})}, OutcomeAllow},
		{"level missing", map[string]any{"fraud.alert": sig(10, map[string]any{})}, OutcomeAllow},
		{"maintenance", map[string]any{"maintenance": sig(1, map[string]any{"active": true})}, OutcomeEscalate},
	}
	for _, tc := range cases {
		d := c.Evaluate(&Input{Signals: tc.signals, Now: now})
		if d.Err != nil || d.Outcome != tc.want {
			t.Errorf("%s: %s (%v), want %s", tc.name, d.Outcome, d.Err, tc.want)
		}
	}
}

func TestSignalPredicateFieldsRefused(t *testing.T) {
	for _, field := range []string{"signals.", "signals.fraud", "signals.fraud.level", "signals..data.x",
		"signals.fraud.data.", "signals.fraud.data.a.b", "signals.-x.age_seconds", "signals.a..b.data.k", "signals.age_seconds"} {
		_, err := Compile(signalBundle(Rule{ID: "r", Outcome: OutcomeBlock, ReasonCodes: []string{"X"},
			Match: []Predicate{{Field: field, Op: "exists"}}}))
		if err == nil {
			t.Errorf("%q compiled", field)
		}
	}
	// age_seconds is a number: a string operand is refused.
	if _, err := Compile(signalBundle(Rule{ID: "r", Outcome: OutcomeBlock, ReasonCodes: []string{"X"},
		Match: []Predicate{{Field: "signals.x.age_seconds", Op: "eq", Value: "old"}}})); err == nil {
		t.Error("a string operand of age_seconds compiled")
	}
}

func TestValidSignalType(t *testing.T) {
	for _, ok := range []string{"a", "fraud.alert", "invoice:paid", "A_b-c.d", "x1"} {
		if !ValidSignalType(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	long := make([]byte, MaxSignalTypeLen+1)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", ".a", "a.", "a..b", "-a", "a b", "a/b", "é", string(long)} {
		if ValidSignalType(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
