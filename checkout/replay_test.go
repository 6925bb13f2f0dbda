package checkout_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/registry"
)

// A checkout decision reproduces under its recorded bundle with its
// recorded verification, and replays under a draft that reads the
// checkout's summary (CEL) and facts (predicates).
func TestCheckoutDecisionsReplay(t *testing.T) {
	x := newEnv(t, enforcing)
	ctx := context.Background()
	from := time.Unix(0, x.now.Load()).UTC()
	var ids []string
	for i, quantity := range []int64{2, 12, 1} { // 50.00, BULK (CEL), 25.00
		m := envelope(t, fmt.Sprintf("chk_%d", i), quantity, 2500)
		sign(t, m, x.merchant, kid)
		a, err := x.authorize(body(t, m), "")
		if err != nil && quantity <= 10 {
			t.Fatal(err)
		}
		ids = append(ids, a.Authority.DossierID)
		x.advance(time.Second)
	}
	// The merchant key is revoked: reproductions and replays keep the
	// verification as recorded (terms VERIFIED), never verify again.
	if _, err := x.e.Admin.RevokeKey(ctx, x.org, registry.KindMerchant, kid); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		r, err := x.e.Policies.Reproduce(ctx, x.org, id)
		if err != nil || !r.Matches {
			t.Fatalf("reproduce %s: %+v %v", id, r, err)
		}
	}
	draft := `{"bundle_id":"shop","version":"v2","mode":"ENFORCEMENT","rules":[
 {"id":"big","decision_types":["UCP_CHECKOUT"],"match":[{"field":"context.ucp_total_minor","op":"ge","value":5000}],"outcome":"BLOCK","reason_codes":["CHECKOUT_TOO_BIG"]},
 {"id":"terms","decision_types":["UCP_CHECKOUT"],"match":[{"field":"context.ucp_terms","op":"ne","value":"VERIFIED"}],"outcome":"REVIEW_REQUIRED","reason_codes":["TERMS_UNVERIFIED"]},
 {"id":"cel","decision_types":["UCP_CHECKOUT"],"when":"intent.checkout.line_items.exists(li, li.quantity > 10)","outcome":"BLOCK","reason_codes":["BULK"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	if _, _, err := x.e.Policies.PutDraft(ctx, clearance.DraftRequest{OrgID: x.org, Name: "tight", Raw: []byte(draft)}); err != nil {
		t.Fatal(err)
	}
	rp, _, err := x.e.Policies.StartReplay(ctx, x.org, fmt.Appendf(nil, `{"draft":"tight","from":%q,"examples":10}`, from.Format(time.RFC3339Nano)))
	if err != nil {
		t.Fatal(err)
	}
	res := rp.Result
	// 50.00 now blocks (ALLOW->BLOCK); the bulk checkout stays BLOCK by CEL; 25.00 stays ALLOW.
	if res.Replayed != 3 || res.Skipped != 0 || res.Changed != 1 || res.ByDirection["ALLOW->BLOCK"] != 1 ||
		len(res.Examples) != 1 || res.Examples[0].DossierID != ids[0] {
		t.Fatalf("replay: %+v", res)
	}
}
