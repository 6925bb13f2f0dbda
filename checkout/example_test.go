package checkout_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/checkout"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// The merchant's public terms-signing key (P-256) that signed the example
// checkout in ucp/testdata.
const merchantJWK = `{"kty":"EC","crv":"P-256","x":"pAlV_i-oFov22_vYLgpka1pzwwpyoW7chboti_eQtw0","y":"ERvqjAcOqZdemwdU-f07GKlnyMSTnho1iEgFY8ChPGc"}`

// A merchant registers its terms-signing key, then asks whether a signed
// UCP checkout may be completed: the answer binds a grant to the exact
// checkout, which is claimed right before the order is placed and then
// finalized.
func ExampleService_Authorize() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "checkout-example")
	defer os.RemoveAll(dir)
	now := func() time.Time { return time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC) }
	backend, err := pebblestore.Open(dir, pebblestore.Options{Now: now})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer backend.Close()
	key, _ := grant.KeyFromSeed(make([]byte, 32))
	engine, err := clearance.Open(backend, clearance.Options{Now: now, GrantKeys: grant.NewKeyRing(key)})
	if err != nil {
		fmt.Println(err)
		return
	}
	org, _ := engine.Admin.CreateOrg(ctx, "Shop")
	orgID := org.Org.ID
	policy := `{"bundle_id":"shop","version":"v1","mode":"ENFORCEMENT","rules":[
	 {"id":"terms","decision_types":["UCP_CHECKOUT"],"match":[{"field":"context.ucp_terms","op":"ne","value":"VERIFIED"}],
	  "outcome":"BLOCK","reason_codes":["TERMS_UNVERIFIED"]},
	 {"id":"limit","decision_types":["UCP_CHECKOUT"],"match":[{"field":"amount","op":"gt","value":500}],
	  "outcome":"REVIEW_REQUIRED","reason_codes":["OVER_LIMIT"]}],
	 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	if _, err := engine.Policies.PublishBundle(ctx, orgID, []byte(policy)); err != nil {
		fmt.Println(err)
		return
	}
	if _, _, err := engine.Admin.RegisterKey(ctx, orgID, registry.KindMerchant,
		registry.Registration{KID: "merchant-2026", PublicJWK: []byte(merchantJWK)}); err != nil {
		fmt.Println(err)
		return
	}

	envelope, err := os.ReadFile("../ucp/testdata/2026-08-25/checkout-response-2026-08-25-ready-for-complete-ap2.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	a, err := engine.Checkout.Authorize(ctx, checkout.Request{OrgID: orgID, Body: envelope})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("release:", a.UCP.Version, "checkout:", a.CheckoutID, "terms:", a.Terms.Status)
	fmt.Println("outcome:", a.Authority.Outcome, "authoritative:", a.Authority.Authoritative)
	fmt.Println("grant bound to the checkout:", a.Authority.Grant.IntentHash == a.CheckoutDigest)

	c, err := engine.Claim(ctx, clearance.ClaimRequest{OrgID: orgID, ExecutionToken: a.Authority.Grant.ExecutionToken, IntentHash: a.CheckoutDigest})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("should execute:", c.ShouldExecute)
	f, err := engine.Finalize(ctx, clearance.FinalizeRequest{OrgID: orgID, ExecutionToken: a.Authority.Grant.ExecutionToken,
		ClaimToken: c.ClaimToken, Outcome: claim.OutcomeCommitted})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("finalized:", f.Outcome)
	// Output:
	// release: 2026-08-25 checkout: chk_1234567890 terms: VERIFIED
	// outcome: ALLOW authoritative: true
	// grant bound to the checkout: true
	// should execute: true
	// finalized: COMMITTED
}
