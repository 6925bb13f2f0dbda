package decide

import "github.com/clearancehq/clearance/policy"

// Verdicts a workflow tool branches on.
const (
	VerdictContinue = "continue"
	VerdictStop     = "stop"
	VerdictHandOff  = "hand_off"
	VerdictReview   = "review"
)

// VerdictOf maps an outcome to the hook verdict; BLOCK and anything unknown
// fail closed (stop).
func VerdictOf(o policy.Outcome) string {
	switch o {
	case policy.OutcomeAllow:
		return VerdictContinue
	case policy.OutcomeEscalate:
		return VerdictHandOff
	case policy.OutcomeReviewRequired:
		return VerdictReview
	default:
		return VerdictStop
	}
}

// GateAnswer is the answer of the gate and hook routes: the verdict the
// flow branches on, the decision, and links to verify its evidence.
type GateAnswer struct {
	Verdict string `json:"verdict"`
	// Enforced is false in SHADOW mode: the flow continues, and
	// EnforcedVerdict says what enforcement would have answered.
	Enforced        bool           `json:"enforced"`
	EnforcedVerdict string         `json:"enforced_verdict"`
	Outcome         policy.Outcome `json:"outcome"`
	Decision        Decision       `json:"decision"`
	Links           GateLinks      `json:"links"`
}

// GateLinks point at the decision's evidence.
type GateLinks struct {
	Dossier           string `json:"dossier"`
	DossierByDecision string `json:"dossier_by_decision"`
	LedgerVerify      string `json:"ledger_verify"`
}

// GateAnswerOf is d as a gate answer.
func GateAnswerOf(d Decision) GateAnswer {
	v := VerdictOf(d.Outcome)
	a := GateAnswer{Verdict: v, Enforced: true, EnforcedVerdict: v, Outcome: d.Outcome, Decision: d,
		Links: GateLinks{
			Dossier:           d.DossierURL,
			DossierByDecision: "/v1/dossiers/" + d.DecisionID,
			LedgerVerify:      "/v1/protocol/audit/ledger/verify",
		}}
	if d.Mode == policy.ModeShadow {
		a.Verdict, a.Enforced = VerdictContinue, false
	}
	return a
}

// IsGate reports whether r answers with a GateAnswer rather than the bare
// Decision.
func (r Route) IsGate() bool {
	switch r {
	case RouteActionGate, RouteCRMActionGate, RouteWorkspaceApp, RouteCloudAgentVerify:
		return true
	}
	return false
}
