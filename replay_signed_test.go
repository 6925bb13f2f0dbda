package clearance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
)

// Decisions of signed intents (enforce-and-bind) replay, reproduce and
// explain from their recorded intents like those of evaluate-decision.
func TestSignedIntentDecisionsReplay(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	org := x.org.Org.ID
	from := time.Unix(0, x.now.Load()).UTC()
	amounts := []float64{120, 4_999, 5_000, 9_999.5, 10_000, 25_000}
	var blocked []string
	for _, a := range amounts {
		jws, _ := x.intent(t, a, "", "")
		d := x.bind(t, jws)
		if (a >= 10_000) != (d.Outcome == "BLOCK") {
			t.Fatalf("amount %v decided %s", a, d.Outcome)
		}
		if d.Outcome == "BLOCK" {
			blocked = append(blocked, d.DossierID)
		}
		r, err := x.e.Policies.Reproduce(ctx, org, d.DossierID)
		if err != nil || !r.Matches {
			t.Fatalf("reproduce %v: %+v %v", a, r, err)
		}
		x.advance(time.Second)
	}
	// A draft that blocks from 5,000: two more decisions would be blocked.
	tight := `{"bundle_id":"pay","version":"v2","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":5000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	if _, _, err := x.e.Policies.PutDraft(ctx, clearance.DraftRequest{OrgID: org, Name: "tight", Raw: []byte(tight)}); err != nil {
		t.Fatal(err)
	}
	body := fmt.Appendf(nil, `{"draft":"tight","from":%q}`, from.Format(time.RFC3339Nano))
	r, _, err := x.e.Policies.StartReplay(ctx, org, body)
	if err != nil || r.Result.Replayed != len(amounts) || r.Result.Changed != 2 || r.Result.ByDirection["ALLOW->BLOCK"] != 2 ||
		r.Result.ByWorkflow["refunds"].Changed != 2 || r.Result.ByDecisionType["REFUND"].Changed != 2 {
		t.Fatalf("replay: %+v %v", r.Result, err)
	}
	x2, err := x.e.Policies.ExplainDossier(ctx, org, blocked[0], nil)
	if err != nil || x2.Outcome != "BLOCK" || len(x2.Flips) == 0 || x2.Flips[0].Field != "amount" || x2.Flips[0].Op != "lt" {
		t.Fatalf("explain: %+v %v", x2, err)
	}
}
