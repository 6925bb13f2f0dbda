package policy

import (
	"testing"
	"time"
)

// A rule on federation decides only when it reads it: the same bundle
// without such a rule answers the same with or without federated decisions.
func TestFederationInput(t *testing.T) {
	allowIfFederated := Rule{ID: "federated-allow", Outcome: OutcomeAllow, ReasonCodes: []string{"FEDERATED_ALLOW"},
		When: `federation.exists(f, f.issuer == "https://a.example" && f.outcome == "ALLOW" && f.matches_intent)`}
	withRule, err := Compile(Bundle{BundleID: "b", Version: "v1", Mode: ModeEnforcement, Rules: []Rule{allowIfFederated},
		Default: Default{Outcome: OutcomeEscalate, ReasonCodes: []string{"NEEDS_REVIEW"}}})
	if err != nil {
		t.Fatal(err)
	}
	without, err := Compile(Bundle{BundleID: "b", Version: "v1", Mode: ModeEnforcement,
		Rules:   []Rule{{ID: "big", Outcome: OutcomeBlock, ReasonCodes: []string{"BIG"}, When: `intent.amount > 100.0`}},
		Default: Default{Outcome: OutcomeEscalate, ReasonCodes: []string{"NEEDS_REVIEW"}}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fed := func(iss string, outcome Outcome, matches bool) []FederatedDecision {
		return []FederatedDecision{{Issuer: iss, Outcome: outcome, Mode: ModeEnforcement, DecisionID: "d",
			IntentDigest: "sha256:x", MatchesIntent: matches, PolicyVersion: "1", ReasonCodes: []string{"OK"}}}
	}
	cases := []struct {
		name string
		c    *Compiled
		fed  []FederatedDecision
		want Outcome
	}{
		{"none", withRule, nil, OutcomeEscalate},
		{"trusted allow of the same intent", withRule, fed("https://a.example", OutcomeAllow, true), OutcomeAllow},
		{"another intent", withRule, fed("https://a.example", OutcomeAllow, false), OutcomeEscalate},
		{"another issuer", withRule, fed("https://b.example", OutcomeAllow, true), OutcomeEscalate},
		{"a block", withRule, fed("https://a.example", OutcomeBlock, true), OutcomeEscalate},
		{"no rule reads it", without, fed("https://a.example", OutcomeAllow, true), OutcomeEscalate},
	}
	for _, tc := range cases {
		in := Input{Amount: 50, HasAmount: true, Now: now, Federation: tc.fed}
		if got := tc.c.Evaluate(&in); got.Outcome != tc.want || got.Err != nil {
			t.Errorf("%s: %s (%v), want %s", tc.name, got.Outcome, got.Err, tc.want)
		}
	}
}

// A rule may narrow to one issuing org and one bundle of the issuer.
func TestFederationOrgAndBundle(t *testing.T) {
	c, err := Compile(Bundle{BundleID: "b", Version: "v1", Mode: ModeEnforcement, Rules: []Rule{{ID: "org", Outcome: OutcomeAllow,
		ReasonCodes: []string{"FEDERATED_ALLOW"},
		When:        `federation.exists(f, f.org == "org-a" && f.bundle_digest == "sha256:b1" && f.policy_version == "7" && f.outcome == "ALLOW")`}},
		Default: Default{Outcome: OutcomeEscalate, ReasonCodes: []string{"NEEDS_REVIEW"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		org, bundle string
		want        Outcome
	}{{"org-a", "sha256:b1", OutcomeAllow}, {"org-m", "sha256:b1", OutcomeEscalate}, {"org-a", "sha256:b2", OutcomeEscalate}} {
		in := Input{Now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), Federation: []FederatedDecision{{Issuer: "https://a.example",
			Org: tc.org, Outcome: OutcomeAllow, Mode: ModeEnforcement, PolicyVersion: "7", BundleDigest: tc.bundle}}}
		if got := c.Evaluate(&in); got.Outcome != tc.want || got.Err != nil {
			t.Errorf("org %s bundle %s: %s (%v), want %s", tc.org, tc.bundle, got.Outcome, got.Err, tc.want)
		}
	}
}
