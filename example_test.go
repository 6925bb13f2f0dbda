package clearance_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// An agent asks for authority to refund 120 EUR, gets a single-use grant,
// claims it immediately before the refund, and reports the effect. The
// downstream system checks the claim attestation offline, with the
// published JWKS only. The clock and the keys are fixed so the example is
// repeatable; in production they are time.Now and keys loaded from files.
func ExampleEngine_EnforceAndBind() {
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC) }

	dir, err := os.MkdirTemp("", "clearance-example-")
	check(err)
	defer os.RemoveAll(dir)
	// The store's clock judges claim leases; give it the engine's.
	backend, err := pebblestore.Open(dir, pebblestore.Options{Now: now})
	check(err)
	defer backend.Close()
	signing, err := grant.KeyFromSeed(bytes.Repeat([]byte{1}, 32))
	check(err)
	engine, err := clearance.Open(backend, clearance.Options{Now: now, GrantKeys: grant.NewKeyRing(signing)})
	check(err)

	org, err := engine.Admin.CreateOrg(ctx, "Acme")
	check(err)
	orgID := org.Org.ID
	// Only intents signed by a registered agent key of the org are heard.
	agent, err := grant.KeyFromSeed(bytes.Repeat([]byte{2}, 32))
	check(err)
	jwk, err := json.Marshal(agent.PublicJWK())
	check(err)
	_, _, err = engine.Admin.RegisterKey(ctx, orgID, registry.KindAgent, registry.Registration{KID: agent.KID(), PublicJWK: jwk})
	check(err)
	// Only an ALLOW in ENFORCEMENT mode binds a grant.
	_, err = engine.Policies.PublishBundle(ctx, orgID, []byte(`{"bundle_id":"refunds","version":"v1","mode":"ENFORCEMENT",
	 "rules":[{"id":"large","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"BLOCK","reason_codes":["TOO_LARGE"]}],
	 "default":{"outcome":"ALLOW","reason_codes":["WITHIN_LIMIT"]}}`))
	check(err)

	// The agent signs its intent. The payload must be RFC 8785 canonical
	// JSON; encoding/json of maps is, for ASCII strings without <, > or &
	// and integer amounts (use a JCS library for anything else). issued_at
	// must be within minutes of the engine's clock.
	effect := digest("psp refund order-1 120 EUR") // what the provider will report
	payload, err := json.Marshal(map[string]any{
		"intent_id": "refund-order-1", "org_id": orgID,
		"actor":        map[string]any{"id": "agent-7", "type": "agent"},
		"action":       map[string]any{"type": "refund", "amount": 120, "currency": "EUR", "target": "order-1"},
		"workflow_key": "refunds", "decision_type": "REFUND",
		"nonce": "n-1", "concurrency_scope": "order-1",
		"expected_effect_digest": effect,
		"escalation":             map[string]any{"mode": "NONE"},
		"issued_at":              now().Format(time.RFC3339),
	})
	check(err)
	signed, err := grant.SignIntent(agent, payload)
	check(err)

	d, err := engine.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: orgID, SignedIntent: signed})
	check(err)
	fmt.Println("decision:", d.Outcome, d.Mode, d.ReasonCodes, "grant issued:", d.ExecutionToken != "")

	// Immediately before the refund: one claim wins, under a lease.
	c, err := engine.Claim(ctx, clearance.ClaimRequest{OrgID: orgID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
	check(err)
	fmt.Println("should execute:", c.ShouldExecute)

	// The downstream system needs no Clearance code to trust the claim.
	jwks, ok := engine.Admin.JWKS()
	if !ok {
		panic("grant signing is not configured")
	}
	grantID, err := attestedGrant(c.ClaimAttestation, jwks)
	check(err)
	fmt.Println("attestation names the grant:", grantID == d.GrantID)

	// The refund ran; the executor reports it with digest-bound evidence.
	f, err := engine.Finalize(ctx, clearance.FinalizeRequest{OrgID: orgID, ExecutionToken: d.ExecutionToken,
		ClaimToken: c.ClaimToken, Outcome: claim.OutcomeCommitted,
		Evidence: &clearance.EffectEvidence{Kind: "psp.refund", Status: claim.EvidenceConfirmed, EffectDigest: effect}})
	check(err)
	fmt.Println("finalized:", f.Outcome, "effect confirmed:", f.EffectConfirmed)

	report, err := engine.Audit.VerifyLedger(ctx, orgID)
	check(err)
	fmt.Println("ledger valid:", report.Valid)
	// Output:
	// decision: ALLOW ENFORCEMENT [PROTOCOL_OUTCOME_ALLOW NO_RULE_MATCHED WITHIN_LIMIT] grant issued: true
	// should execute: true
	// attestation names the grant: true
	// finalized: COMMITTED effect confirmed: true
	// ledger valid: true
}

// attestedGrant verifies a claim attestation against the JWKS alone and
// returns the grant it names. examples/verifyattestation also checks the
// typ header, audience, issuer, expiry and intent hash.
func attestedGrant(token string, jwks jose.JSONWebKeySet) (string, error) {
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil || len(jws.Signatures) != 1 {
		return "", errors.New("not one compact EdDSA JWS")
	}
	keys := jwks.Key(jws.Signatures[0].Protected.KeyID)
	if len(keys) != 1 {
		return "", errors.New("kid not in the JWKS")
	}
	payload, err := jws.Verify(keys[0].Key) // the key comes from the JWKS, never from the token
	if err != nil {
		return "", err
	}
	var claims struct {
		GrantID string `json:"grant_id"`
	}
	err = json.Unmarshal(payload, &claims)
	return claims.GrantID, err
}

// digest is the sha256:<hex> form Clearance uses for effect digests.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
