package policy

// Federated decisions as policies see them. Input.Federation lists the
// decisions other Clearance deployments made and signed, presented with the
// request and verified against an issuer the org trusts. CEL reads them as
// the list `federation`, each element a map
//
//	{"issuer": <string>, "org": <string>, "outcome": <string>,
//	 "mode": <string>, "decision_id": <string>, "intent_digest": <string>,
//	 "matches_intent": <bool>, "policy_version": <string>,
//	 "bundle_digest": <string>, "reason_codes": [<string>…],
//	 "age_seconds": <number>}
//
// matches_intent is true when the issuer decided the same intent as the one
// being evaluated (equal intent digests under the federation profile).
// org is the issuing org: verification already refuses an org the trust
// list entry does not name, and a rule may narrow further. A rule such as
//
//	federation.exists(f, f.issuer == "https://a.example" && f.org == "<org id>" && f.outcome == "ALLOW" && f.matches_intent)
//
// allows only what that org of a trusted issuer allowed for this same
// intent. The list
// is empty without federated decisions: a rule that does not read it is
// never changed by one.

// FederatedDecision is one verified federated decision.
type FederatedDecision struct {
	Issuer string
	// Org is the issuing org on Issuer's deployment.
	Org           string
	Outcome       Outcome
	Mode          Mode
	DecisionID    string
	IntentDigest  string
	MatchesIntent bool
	PolicyVersion string
	// BundleDigest is the digest of the policy bundle the issuer decided
	// under.
	BundleDigest string
	ReasonCodes  []string
	// AgeSeconds is how long before the evaluation the issuer decided.
	AgeSeconds float64
}

var emptyList = []any{}

// federationValues is fs as CEL sees it.
func federationValues(fs []FederatedDecision) []any {
	if len(fs) == 0 {
		return emptyList
	}
	out := make([]any, len(fs))
	for i, f := range fs {
		codes := make([]any, len(f.ReasonCodes))
		for j, c := range f.ReasonCodes {
			codes[j] = c
		}
		out[i] = map[string]any{
			"issuer":         f.Issuer,
			"org":            f.Org,
			"outcome":        string(f.Outcome),
			"mode":           string(f.Mode),
			"decision_id":    f.DecisionID,
			"intent_digest":  f.IntentDigest,
			"matches_intent": f.MatchesIntent,
			"policy_version": f.PolicyVersion,
			"bundle_digest":  f.BundleDigest,
			"reason_codes":   codes,
			"age_seconds":    f.AgeSeconds,
		}
	}
	return out
}
