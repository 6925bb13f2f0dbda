package policy

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clearancehq/clearance/internal/canon"
)

func TestDiff(t *testing.T) {
	base := func() Bundle {
		return Bundle{BundleID: "payments", Version: "1", Mode: ModeEnforcement,
			Rules: []Rule{
				{ID: "a", DecisionTypes: []string{"PAYMENT"}, Match: []Predicate{{Field: "amount", Op: "ge", Value: 1000.0}}, Outcome: OutcomeEscalate, ReasonCodes: []string{"BIG"}},
				{ID: "b", Match: []Predicate{{Field: "currency", Op: "in", Value: []any{"KPW"}}}, Outcome: OutcomeBlock, ReasonCodes: []string{"SANCTIONED"}},
				{ID: "c", When: "approval != null", Outcome: OutcomeAllow, ReasonCodes: []string{"APPROVED"}},
			},
			Default: Default{Outcome: OutcomeAllow, ReasonCodes: []string{}}}
	}
	edit := func(f func(b *Bundle)) Bundle {
		b := base()
		f(&b)
		return b
	}
	none := []string{}
	cases := []struct {
		name string
		to   Bundle
		want BundleDiff
	}{
		{"same", base(), BundleDiff{Identical: true, RulesAdded: none, RulesRemoved: none, RulesChanged: []RuleChange{}}},
		{"version and source are not content", edit(func(b *Bundle) {
			b.Version = "2"
			b.Source = &Provenance{Repository: "https://example.com/p.git", Commit: "0123456789abcdef0123456789abcdef01234567"}
		}), BundleDiff{Identical: true, RulesAdded: none, RulesRemoved: none, RulesChanged: []RuleChange{}}},
		{"int and float values, nil and empty lists, are equal", edit(func(b *Bundle) {
			b.Rules[0].Match[0].Value = 1000
			b.Rules[1].Match[0].Value = []string{"KPW"}
			b.Rules[1].DecisionTypes = []string{}
			b.Default.ReasonCodes = nil
		}), BundleDiff{Identical: true, RulesAdded: none, RulesRemoved: none, RulesChanged: []RuleChange{}}},
		{"header", edit(func(b *Bundle) {
			b.BundleID, b.Mode = "payments-v2", ModeShadow
			b.Default = Default{Outcome: OutcomeEscalate, ReasonCodes: []string{"UNCLASSIFIED"}}
		}), BundleDiff{
			BundleID:   &StringChange{From: "payments", To: "payments-v2"},
			Mode:       &StringChange{From: "ENFORCEMENT", To: "SHADOW"},
			Default:    &DefaultChange{From: Default{Outcome: OutcomeAllow, ReasonCodes: []string{}}, To: Default{Outcome: OutcomeEscalate, ReasonCodes: []string{"UNCLASSIFIED"}}},
			RulesAdded: none, RulesRemoved: none, RulesChanged: []RuleChange{}}},
		{"default codes only", edit(func(b *Bundle) { b.Default.ReasonCodes = []string{"X"} }), BundleDiff{
			Default:    &DefaultChange{From: Default{Outcome: OutcomeAllow, ReasonCodes: []string{}}, To: Default{Outcome: OutcomeAllow, ReasonCodes: []string{"X"}}},
			RulesAdded: none, RulesRemoved: none, RulesChanged: []RuleChange{}}},
		{"added and removed", edit(func(b *Bundle) {
			b.Rules = append(b.Rules[:1], b.Rules[2], Rule{ID: "d", Outcome: OutcomeReviewRequired, ReasonCodes: []string{"D"}})
		}), BundleDiff{RulesAdded: []string{"d"}, RulesRemoved: []string{"b"}, RulesChanged: []RuleChange{}}},
		{"reordered", edit(func(b *Bundle) { b.Rules[0], b.Rules[2] = b.Rules[2], b.Rules[0] }),
			BundleDiff{Reordered: true, RulesAdded: none, RulesRemoved: none, RulesChanged: []RuleChange{}}},
		{"an insertion is no reordering", edit(func(b *Bundle) {
			b.Rules = slices.Insert(b.Rules, 1, Rule{ID: "new", Outcome: OutcomeBlock, ReasonCodes: []string{"NEW"}})
		}), BundleDiff{RulesAdded: []string{"new"}, RulesRemoved: none, RulesChanged: []RuleChange{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Diff(base(), tc.to)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			checkIdenticalIsCanonical(t, base(), tc.to, got.Identical)
		})
	}
}

func TestDiffRuleChanges(t *testing.T) {
	from := bundleWith(
		Rule{ID: "a", DecisionTypes: []string{"PAYMENT"}, Match: []Predicate{{Field: "amount", Op: "ge", Value: 1000}}, Outcome: OutcomeEscalate, ReasonCodes: []string{"BIG"}},
		Rule{ID: "b", WorkflowKeys: []string{"ap"}, Surfaces: []string{"web"}, When: "true", Outcome: OutcomeBlock, ReasonCodes: []string{"B"}},
		Rule{ID: "c", Outcome: OutcomeAllow, ReasonCodes: []string{"C"}},
	)
	to := bundleWith(
		Rule{ID: "c", Outcome: OutcomeAllow, ReasonCodes: []string{"C"}},
		Rule{ID: "b", WorkflowKeys: []string{"ap", "payroll"}, Surfaces: []string{"web"}, When: "false", Outcome: OutcomeReviewRequired, ReasonCodes: []string{"B", "B2"}},
		Rule{ID: "a", DecisionTypes: []string{"REFUND"}, Surfaces: []string{"web"}, Match: []Predicate{{Field: "amount", Op: "ge", Value: 2000}}, Outcome: OutcomeEscalate, ReasonCodes: []string{"BIG"}},
	)
	got := Diff(from, to)
	if !got.Reordered || got.Identical || len(got.RulesAdded) != 0 || len(got.RulesRemoved) != 0 {
		t.Fatalf("%+v", got)
	}
	var fields [][]string
	var ids []string
	for _, rc := range got.RulesChanged {
		ids = append(ids, rc.RuleID)
		fields = append(fields, rc.Fields)
	}
	if diff := cmp.Diff([]string{"b", "a"}, ids); diff != "" { // in `to` order
		t.Error(diff)
	}
	want := [][]string{{"workflow_keys", "when", "outcome", "reason_codes"}, {"decision_types", "surfaces", "match"}}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Error(diff)
	}
	a := got.RulesChanged[1]
	if a.From.Match[0].Value != 1000.0 || a.To.Match[0].Value != 2000.0 || a.To.DecisionTypes[0] != "REFUND" {
		t.Errorf("%+v", a)
	}
	// The change holds copies: editing them leaves the bundles alone.
	a.To.DecisionTypes[0] = "EDITED"
	if to.Rules[2].DecisionTypes[0] != "REFUND" {
		t.Error("Diff shares the caller's slices")
	}
	raw, err := json.Marshal(Diff(from, from))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"identical":true,"rules_added":[],"rules_removed":[],"rules_changed":[],"reordered":false}`; string(raw) != want {
		t.Errorf("got %s; want %s", raw, want)
	}
	raw, _ = json.Marshal(Diff(bundleWith(), func() Bundle { b := bundleWith(); b.Mode = ModeShadow; return b }()))
	if want := `{"identical":false,"mode":{"from":"ENFORCEMENT","to":"SHADOW"},"rules_added":[],"rules_removed":[],"rules_changed":[],"reordered":false}`; string(raw) != want {
		t.Errorf("got %s; want %s", raw, want)
	}
}

func TestDiffDuplicateIDs(t *testing.T) {
	// Invalid bundles still diff: repeated ids pair up in order.
	r := func(codes ...string) Rule { return Rule{ID: "dup", Outcome: OutcomeAllow, ReasonCodes: codes} }
	from := bundleWith(r("A"), r("B"))
	to := bundleWith(r("A"), r("C"), r("D"))
	got := Diff(from, to)
	if len(got.RulesAdded) != 1 || len(got.RulesChanged) != 1 || got.RulesChanged[0].To.ReasonCodes[0] != "C" || got.Identical || got.Reordered {
		t.Fatalf("%+v", got)
	}
	checkIdenticalIsCanonical(t, from, to, got.Identical)
	checkIdenticalIsCanonical(t, from, from, Diff(from, from).Identical)
}

// checkIdenticalIsCanonical compares Identical with the canonical bytes
// of the bundles without version and source.
func checkIdenticalIsCanonical(t *testing.T, a, b Bundle, identical bool) {
	t.Helper()
	strip := func(x Bundle) []byte {
		x = cloneBundle(x)
		x.Version, x.Source = "", nil
		raw, err := canon.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	if same := bytes.Equal(strip(a), strip(b)); same != identical {
		t.Errorf("identical %v; canonical forms equal %v", identical, same)
	}
}
