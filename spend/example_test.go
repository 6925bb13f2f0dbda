package spend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// A budget of 1,000 EUR a day holds one refund of 600, not two: the second
// claim is refused until the first one's attempt fails and frees its
// amount.
func Example() {
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC) }
	backend, _ := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: now})
	defer backend.Close()
	seed := make([]byte, 32)
	signing, _ := grant.KeyFromSeed(seed)
	engine, _ := clearance.Open(backend, clearance.Options{Now: now, GrantKeys: grant.NewKeyRing(signing)})
	org, _ := engine.Admin.CreateOrg(ctx, "Acme")
	orgID := org.Org.ID
	seed[0] = 1
	agent, _ := grant.KeyFromSeed(seed)
	jwk, _ := json.Marshal(agent.PublicJWK())
	engine.Admin.RegisterKey(ctx, orgID, registry.KindAgent, registry.Registration{KID: agent.KID(), PublicJWK: jwk})
	_, err := engine.Policies.PublishBundle(ctx, orgID, []byte(`{"bundle_id":"refunds","version":"v1","mode":"ENFORCEMENT",
		"spend_gates":[{"id":"refunds.daily","workflow_keys":["refunds"],"currency":"EUR","limit":"1000","window":"DAY"}],
		"rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	bind := func(n int) clearance.AuthorityDecision {
		payload, _ := canon.Marshal(map[string]any{
			"intent_id": fmt.Sprintf("refund-%d", n), "org_id": orgID, "actor": map[string]any{"id": "agent-7", "type": "agent"},
			"action":       map[string]any{"type": "refund", "amount": 600, "currency": "EUR", "target": "order-1"},
			"workflow_key": "refunds", "decision_type": "REFUND", "nonce": fmt.Sprintf("nonce-%d", n),
			"concurrency_scope": fmt.Sprintf("order-%d", n), "escalation": map[string]any{"mode": "NONE"},
			"issued_at": "2026-11-01T12:00:00Z",
		})
		jws, _ := grant.SignIntent(agent, payload)
		d, _ := engine.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: orgID, SignedIntent: jws})
		return d
	}
	claimOf := func(d clearance.AuthorityDecision) (clearance.ClaimResult, error) {
		return engine.Claim(ctx, clearance.ClaimRequest{OrgID: orgID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
	}
	first, second := bind(1), bind(2) // both fit when they are bound: nothing is spent yet
	c1, _ := claimOf(first)
	_, err = claimOf(second)
	fmt.Println(c1.ShouldExecute, err)

	engine.Finalize(ctx, clearance.FinalizeRequest{OrgID: orgID, ExecutionToken: first.ExecutionToken,
		ClaimToken: c1.ClaimToken, Outcome: claim.OutcomeFailed})
	c2, _ := claimOf(second)
	g, _ := engine.SpendGate(ctx, orgID, "refunds.daily", "")
	fmt.Println(c2.ShouldExecute, g.Reserved, g.Remaining)
	// Output:
	// true SPEND_LIMIT_EXCEEDED: under the current policy (v1) the action does not fit its spend gate: BLOCK
	// true 600 400
}
