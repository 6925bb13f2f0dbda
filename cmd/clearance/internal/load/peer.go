package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/clearancehq/clearance/policy"
)

// Peer names a policy server other than Clearance that the evaluate
// scenario can drive, for comparisons under the same load tool.
type Peer string

// Peers. The zero value means the target is a Clearance server.
const (
	// PeerOPA is an OPA server (`opa run --server`) loaded with the starter
	// policy in Rego (bench/peers/starter.rego).
	PeerOPA Peer = "opa"
)

// DefaultOPAPath is the data path of starter.rego's decision.
const DefaultOPAPath = "clearance/starter/decision"

// OPA routes.
const (
	pathOPAHealth = "/health"
	pathOPAData   = "/v1/data/"
)

// Synthetic error codes of peer answers (see doc.go).
const (
	codeNoResult     = "NO_RESULT"
	codeWrongOutcome = "WRONG_OUTCOME"
	codeWrongRules   = "WRONG_RULES"
)

// peerDecision is the decision document starter.rego answers:
// {"outcome": "ESCALATE", "rules": ["amount-escalation-band"]}.
type peerDecision struct {
	Outcome string   `json:"outcome"`
	Rules   []string `json:"rules"`
}

// validatePeer checks the peer half of a configuration.
func (c Config) validatePeer() error {
	if c.Peer != PeerOPA {
		return fmt.Errorf("unknown peer %q: want opa", c.Peer)
	}
	if c.Scenario != Evaluate {
		return fmt.Errorf("peer %s runs the evaluate scenario only (%s needs Clearance's grants and claims)", c.Peer, c.Scenario)
	}
	if c.APIKey != "" || c.PlatformKey != "" {
		return fmt.Errorf("peer %s takes no Clearance credentials", c.Peer)
	}
	if _, err := opaDataPath(c.OPAPath); err != nil {
		return err
	}
	return nil
}

// opaDataPath is the URL path of the decision at data path p
// ("clearance/starter/decision" → "/v1/data/clearance/starter/decision");
// empty p means DefaultOPAPath.
func opaDataPath(p string) (string, error) {
	if p == "" {
		p = DefaultOPAPath
	}
	trimmed := strings.Trim(p, "/")
	if trimmed == "" {
		return "", fmt.Errorf("bad OPA path %q: want a data path such as %s", p, DefaultOPAPath)
	}
	for seg := range strings.SplitSeq(trimmed, "/") {
		if seg == "" || seg == "." || seg == ".." || url.PathEscape(seg) != seg {
			return "", fmt.Errorf("bad OPA path %q: want slash-separated names such as %s", p, DefaultOPAPath)
		}
	}
	return pathOPAData + trimmed, nil
}

// starterDecision is what Clearance's starter policy decides for the
// evaluate scenario's input with amount cents/100.
func starterDecision(cents int64) policy.Decision {
	in := policy.Input{DecisionType: "PAYMENT", WorkflowKey: "loadtest", Amount: float64(cents) / 100, HasAmount: true}
	return policy.Starter().Evaluate(&in)
}

// checkPeer compares a peer's answer with the starter policy's decision;
// it returns the error code of a mismatch, or "".
func checkPeer(a *answer, want policy.Decision) string {
	switch {
	case a.Result == nil:
		return codeNoResult
	case a.Result.Outcome != string(want.Outcome):
		return codeWrongOutcome
	case !slices.Equal(a.Result.Rules, slices.Sorted(slices.Values(want.MatchedRules))):
		return codeWrongRules
	}
	return ""
}

// probeCents is the amount of the setup's probe decision (5,000: the
// escalation band).
const probeCents = 500_000

// setupPeer checks that the peer is up and answers the starter policy's
// decision at the configured path.
func (r *runner) setupPeer(ctx context.Context) error {
	if err := r.setupCall(ctx, http.MethodGet, pathOPAHealth, "", nil, nil, "reach the OPA server"); err != nil {
		return err
	}
	var a answer
	body := r.evaluateBody(nil, probeCents)
	if err := r.setupCall(ctx, http.MethodPost, r.peerPath, "", body, &a, "probe decision"); err != nil {
		return err
	}
	want := starterDecision(probeCents)
	switch checkPeer(&a, want) {
	case "":
		return nil
	case codeNoResult:
		return fmt.Errorf("probe decision: POST %s answered without a result: is %q the data path of the starter policy's decision (e.g. %s)?",
			r.peerPath, strings.TrimPrefix(r.peerPath, pathOPAData), DefaultOPAPath)
	default:
		got, _ := json.Marshal(a.Result)
		return errors.New("probe decision: amount 5000 gave " + string(got) + ", the starter policy gives " +
			fmt.Sprintf(`{"outcome":%q,"rules":%q}`, want.Outcome, want.MatchedRules) + ": is the peer loaded with starter.rego?")
	}
}
