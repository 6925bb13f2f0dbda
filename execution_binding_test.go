package clearance_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/registry"
)

// grantClaimsOf decodes the claims of a grant token (not verified).
func grantClaimsOf(t *testing.T, token string) grant.Claims {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	var c grant.Claims
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestForgedGrantClaimsAreRefused: a token signed with the grant key whose
// claims differ from the stored grant in any member (what a leaked key or a
// signing bug would produce) is refused by claim, verify-token and
// finalize, and consumes nothing; the attestation of an honest claim states
// what the stored grant says.
func TestForgedGrantClaimsAreRefused(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	org := x.org.Org.ID
	jws, _ := x.intent(t, 100, "", effectDigest("refund-1"))
	d := x.bind(t, jws)
	jws2, _ := x.intent(t, 100, "", "")
	other := x.bind(t, jws2)
	real := grantClaimsOf(t, d.ExecutionToken)
	big := 999999.0
	now := time.Unix(0, x.now.Load()).Unix()

	forgeries := map[string]func(c *grant.Claims){
		"act amount and target": func(c *grant.Claims) { c.Action.Amount, c.Action.Target = &big, "attacker-account" },
		"act amount":            func(c *grant.Claims) { c.Action.Amount = &big },
		"act without amount":    func(c *grant.Claims) { c.Action.Amount = nil },
		"act currency":          func(c *grant.Claims) { c.Action.Currency = "USD" },
		"act type":              func(c *grant.Claims) { c.Action.Type = "payout" },
		"sub":                   func(c *grant.Claims) { c.Subject = "agent-8" },
		"jti of another grant":  func(c *grant.Claims) { c.ID = other.GrantID },
		"iat":                   func(c *grant.Claims) { c.IssuedAt = now - 1 },
		"nbf":                   func(c *grant.Claims) { c.NotBefore = now - 1 },
		"exp":                   func(c *grant.Claims) { c.Expiry += 3600 },
		"payload_digest":        func(c *grant.Claims) { c.PayloadDigest = effectDigest("other action") },
		"payload_profile":       func(c *grant.Claims) { c.PayloadProfile = "" },
		"expected_effect":       func(c *grant.Claims) { c.ExpectedEffectDigest = effectDigest("other effect") },
		"no expected_effect":    func(c *grant.Claims) { c.ExpectedEffectDigest = "" },
		"nonce":                 func(c *grant.Claims) { c.Nonce = "another-nonce" },
		"scope":                 func(c *grant.Claims) { c.Scope = "another-scope" },
		"corr":                  func(c *grant.Claims) { c.Correlation = "corr-x" },
		"decision_id":           func(c *grant.Claims) { c.DecisionID = other.DecisionID },
		"dossier_id":            func(c *grant.Claims) { c.DossierID = other.DossierID },
		"mode":                  func(c *grant.Claims) { c.Mode = "SHADOW" },
	}
	for name, edit := range forgeries {
		forged := real
		edit(&forged)
		tok, err := grant.Mint(x.ring.Active(), forged)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: tok, IntentHash: d.IntentHash})
		wantCode(t, name+": claim", err, clearance.ErrConflict, clearance.CodeBindingMismatch)
		if c.ShouldExecute || c.ClaimAttestation != "" {
			t.Fatalf("%s: a refused claim authorized: %+v", name, c)
		}
		_, err = x.e.VerifyGrant(ctx, org, tok, d.IntentHash)
		wantCode(t, name+": verify-token", err, clearance.ErrConflict, clearance.CodeBindingMismatch)
	}

	// Nothing was claimed: the honest token claims, and its attestation
	// states the stored grant's action, as the grant does.
	st, err := x.e.VerifyGrant(ctx, org, d.ExecutionToken, d.IntentHash)
	if err != nil || st.State != claim.StateIssued {
		t.Fatalf("verify after the forgeries: %+v %v", st, err)
	}
	c, err := x.claimOf(t, d)
	if err != nil {
		t.Fatal(err)
	}
	att, err := grant.VerifyAttestation(c.ClaimAttestation, x.ring, grant.VerifyOptions{Now: time.Unix(0, x.now.Load())})
	if err != nil {
		t.Fatal(err)
	}
	want := grant.Action{Type: "refund", Amount: new(100.0), Currency: "EUR", Target: "order-1"}
	if !sameAction(att.Action, want) || !sameAction(real.Action, want) || !sameAction(st.Action, want) {
		t.Fatalf("attestation act %+v, grant act %+v, verify-token act %+v; want %+v", att.Action, real.Action, st.Action, want)
	}
	if att.Subject != real.Subject || att.Binding.Nonce != real.Nonce || att.Binding.Scope != real.Scope ||
		att.Binding.ExpectedEffectDigest != real.ExpectedEffectDigest || att.Binding.PayloadDigest != real.PayloadDigest {
		t.Fatalf("attestation %+v does not repeat the grant %+v", att, real)
	}

	// Finalize finds the grant by the token: a forged one is refused too,
	// and the claim stays live for the honest finalization.
	forged := real
	forged.Action.Amount = &big
	tok, err := grant.Mint(x.ring.Active(), forged)
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: org, ExecutionToken: tok, ClaimToken: c.ClaimToken, Outcome: claim.OutcomeCommitted})
	wantCode(t, "finalize with a forged token", err, clearance.ErrConflict, clearance.CodeBindingMismatch)
	if _, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: org, ExecutionToken: d.ExecutionToken, ClaimToken: c.ClaimToken,
		Outcome: claim.OutcomeCommitted}); err != nil {
		t.Fatalf("honest finalize after the forged one: %v", err)
	}
}

func sameAction(a, b grant.Action) bool {
	if (a.Amount == nil) != (b.Amount == nil) || (a.Amount != nil && *a.Amount != *b.Amount) {
		return false
	}
	return a.Type == b.Type && a.Currency == b.Currency && a.Target == b.Target
}

// TestGrantIssuedInTheFuture: a grant token whose iat is later than now
// plus the tolerated clock skew is not valid, whatever its nbf says. At
// finalize the token's lifetime is not judged by the engine's clock (the
// lease is, by the store's), so there the forged token is refused for what
// it is: not the token of the issued grant.
func TestGrantIssuedInTheFuture(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	org := x.org.Org.ID
	jws, _ := x.intent(t, 100, "", "")
	d := x.bind(t, jws)
	forged := grantClaimsOf(t, d.ExecutionToken)
	forged.IssuedAt = time.Unix(0, x.now.Load()).Add(clearance.DefaultMaxClockSkew + time.Second).Unix()
	tok, err := grant.Mint(x.ring.Active(), forged)
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: tok, IntentHash: d.IntentHash})
	wantCode(t, "claim", err, clearance.ErrConflict, clearance.CodeGrantInvalid)
	_, err = x.e.VerifyGrant(ctx, org, tok, d.IntentHash)
	wantCode(t, "verify-token", err, clearance.ErrConflict, clearance.CodeGrantInvalid)
	c, err := x.claimOf(t, d)
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: org, ExecutionToken: tok, ClaimToken: c.ClaimToken, Outcome: claim.OutcomeCommitted})
	wantCode(t, "finalize", err, clearance.ErrConflict, clearance.CodeBindingMismatch)
}

// TestVerifyTokenOfASpentGrant: a claimed or finalized grant is no longer a
// valid grant: verify-token answers 409 GRANT_ALREADY_CLAIMED, and never
// consumes one that is still ISSUED.
func TestVerifyTokenOfASpentGrant(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	org := x.org.Org.ID
	jws, _ := x.intent(t, 100, "", "")
	d := x.bind(t, jws)
	for range 2 {
		if st, err := x.e.VerifyGrant(ctx, org, d.ExecutionToken, d.IntentHash); err != nil || !st.Valid || st.State != claim.StateIssued {
			t.Fatalf("verify an issued grant: %+v %v", st, err)
		}
	}
	c, err := x.claimOf(t, d)
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.e.VerifyGrant(ctx, org, d.ExecutionToken, d.IntentHash)
	wantCode(t, "verify a claimed grant", err, clearance.ErrConflict, clearance.CodeGrantAlreadyClaimed)
	if _, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: org, ExecutionToken: d.ExecutionToken, ClaimToken: c.ClaimToken,
		Outcome: claim.OutcomeCommitted}); err != nil {
		t.Fatal(err)
	}
	_, err = x.e.VerifyGrant(ctx, org, d.ExecutionToken, d.IntentHash)
	wantCode(t, "verify a finalized grant", err, clearance.ErrConflict, clearance.CodeGrantAlreadyClaimed)
}

// claimedWithEffect binds and claims a grant that names an expected effect.
func (x *execEnv) claimedWithEffect(t *testing.T, effect string) (clearance.AuthorityDecision, clearance.ClaimResult) {
	t.Helper()
	jws, _ := x.intent(t, 100, "", effect)
	d := x.bind(t, jws)
	c, err := x.claimOf(t, d)
	if err != nil {
		t.Fatal(err)
	}
	return d, c
}

func (x *execEnv) finalizeWith(t *testing.T, d clearance.AuthorityDecision, c clearance.ClaimResult, r *clearance.EffectReceipt) clearance.FinalizeResult {
	t.Helper()
	f, err := x.e.Finalize(context.Background(), clearance.FinalizeRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken,
		ClaimToken: c.ClaimToken, Outcome: claim.OutcomeCommitted, Receipt: r})
	if err != nil {
		t.Fatalf("finalize: %v", err)
	}
	if f.Outcome != claim.StateCommitted {
		t.Fatalf("finalize: %+v", f)
	}
	return f
}

// TestReceiptIssuerIsTheRegisteredOne: a receipt signed by a registered
// provider key verifies only when its iss is the issuer registered with
// that key; a key registered without an issuer verifies no receipt.
func TestReceiptIssuerIsTheRegisteredOne(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	effect := effectDigest("refund-1")
	sign := func(k grant.Key, iss, grantID string) *clearance.EffectReceipt {
		s, err := grant.SignReceipt(k, grant.ReceiptClaims{Issuer: iss, GrantID: grantID, EffectDigest: effect, IssuedAt: 1})
		if err != nil {
			t.Fatal(err)
		}
		return &clearance.EffectReceipt{Profile: grant.ProfileVP3, Receipt: s}
	}

	d, c := x.claimedWithEffect(t, effect)
	f := x.finalizeWith(t, d, c, sign(x.provider, "bank.evil.example", d.GrantID))
	if f.EffectConfirmed || f.Evidence != nil || f.ReceiptVerification == nil || f.ReceiptVerification.Verified ||
		!strings.Contains(f.ReceiptVerification.Reason, "iss") {
		t.Fatalf("a receipt claiming another issuer: %+v %+v", f, f.ReceiptVerification)
	}

	d, c = x.claimedWithEffect(t, effect)
	if f := x.finalizeWith(t, d, c, sign(x.provider, "psp", d.GrantID)); !f.EffectConfirmed || !f.ReceiptVerification.Verified ||
		f.ReceiptVerification.Issuer != "psp" {
		t.Fatalf("a receipt of the registered issuer: %+v %+v", f, f.ReceiptVerification)
	}

	// A provider key registered without iss verifies nothing.
	noIss, _ := grant.KeyFromSeed(seed(4))
	jwk, _ := json.Marshal(noIss.PublicJWK())
	if _, _, err := x.e.Admin.RegisterKey(ctx, x.org.Org.ID, registry.KindProvider, registry.Registration{KID: noIss.KID(), PublicJWK: jwk}); err != nil {
		t.Fatal(err)
	}
	d, c = x.claimedWithEffect(t, effect)
	f = x.finalizeWith(t, d, c, sign(noIss, "psp", d.GrantID))
	if f.EffectConfirmed || f.ReceiptVerification.Verified || !strings.Contains(f.ReceiptVerification.Reason, "issuer") {
		t.Fatalf("a receipt of a key without a registered issuer: %+v %+v", f, f.ReceiptVerification)
	}
}

// TestReceiptsNeverRefuseFinalization: whatever the receipt (another
// profile, no receipt at all in it, no effect digest), finalization and
// reconciliation succeed and record it as presented, with the reason it did
// not verify.
func TestReceiptsNeverRefuseFinalization(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	effect := effectDigest("refund-1")
	good := func(grantID, digest string) string {
		s, err := grant.SignReceipt(x.provider, grant.ReceiptClaims{Issuer: "psp", GrantID: grantID, EffectDigest: digest, IssuedAt: 1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name, profile string
		receipt       func(grantID string) string
		verified      bool
	}{
		{"lower-case profile", "vp-3", func(id string) string { return good(id, effect) }, false},
		{"VP-2", "VP-2", func(id string) string { return good(id, effect) }, false},
		{"no profile", "", func(id string) string { return good(id, effect) }, false},
		{"empty receipt", grant.ProfileVP3, func(string) string { return "" }, false},
		{"not a JWS", grant.ProfileVP3, func(string) string { return strings.Repeat("x", 10000) }, false},
		{"no effect digest", grant.ProfileVP3, func(id string) string { return good(id, "") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, c := x.claimedWithEffect(t, effect)
			in := &clearance.EffectReceipt{Profile: tc.profile, Receipt: tc.receipt(d.GrantID)}
			f := x.finalizeWith(t, d, c, in)
			rv := f.ReceiptVerification
			if rv == nil || rv.Profile != in.Profile || rv.Token != in.Receipt || rv.Verified != tc.verified || f.EffectConfirmed || f.Evidence != nil {
				t.Fatalf("finalize: %+v receipt %+v", f, rv)
			}
			if !tc.verified && rv.Reason == "" {
				t.Fatalf("an unverified receipt without a reason: %+v", rv)
			}
		})
	}

	// Reconciliation records a receipt of another profile the same way.
	d, c := x.claimedWithEffect(t, effect)
	if _, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken,
		ClaimToken: c.ClaimToken, Outcome: claim.OutcomeIndeterminate}); err != nil {
		t.Fatal(err)
	}
	g, err := x.e.Execution.Reconcile(ctx, clearance.ReconcileRequest{OrgID: x.org.Org.ID, GrantID: d.GrantID, Resolution: claim.OutcomeCommitted,
		Receipt: &clearance.EffectReceipt{Profile: "VP-2", Receipt: good(d.GrantID, effect)}})
	if err != nil || g.Reconciliation == nil || g.Reconciliation.Receipt == nil || g.Reconciliation.Receipt.Verified ||
		g.Reconciliation.Receipt.Reason == "" || g.Reconciliation.EffectConfirmed {
		t.Fatalf("reconcile with a VP-2 receipt: %+v %v", g, err)
	}
}
