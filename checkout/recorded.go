package checkout

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/ucp"
)

// RecordedInput rebuilds the policy input a recorded checkout decision was
// evaluated with, for a replay or a reproduction: the intent the dossier
// records as evaluated, and intent.checkout summarised from the recorded
// checkout with the verification as it was recorded (terms, merchant kid,
// mandate) — never verified again against today's merchant keys.
func RecordedInput(checkout, evidence json.RawMessage, now time.Time) (policy.Input, error) {
	var ev dossier.Checkout
	if err := json.Unmarshal(evidence, &ev); err != nil {
		return policy.Input{}, fmt.Errorf("checkout: recorded evidence: %w", err)
	}
	c, err := ucp.Parse(checkout)
	if err != nil {
		return policy.Input{}, fmt.Errorf("checkout: recorded checkout: %w", err)
	}
	var intent decide.ExecutionIntent
	if err := strictjson.Decode(ev.EvaluatedIntent, &intent, strictjson.Options{RejectUnknown: true}); err != nil {
		return policy.Input{}, fmt.Errorf("checkout: recorded intent: %w", err)
	}
	in, err := decide.IntentInput(intent, "", now)
	if err != nil {
		return in, err
	}
	v := verified{c: c, terms: ev.Terms, kid: ev.MerchantKID, mandate: ev.Mandate}
	in.Extra = map[string]any{"checkout": v.summary()}
	return in, nil
}
