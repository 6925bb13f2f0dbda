package server_test

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/grant"
)

// grantClaimsOf decodes the claims of a grant token (not verified).
func grantClaimsOf(t testing.TB, token string) grant.Claims {
	t.Helper()
	var c grant.Claims
	if err := json.Unmarshal(payloadOf(t, token), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestExecForgedGrantIsRefused: a grant token signed with the server's own
// key whose claims differ from the recorded grant (another amount and
// target, an iat in the future) never claims, verifies or finalizes, and
// consumes nothing; the honest claim's attestation states the recorded
// grant's action.
func TestExecForgedGrantIsRefused(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	g := x.grantFor(t, intentSpec{})
	real := grantClaimsOf(t, g.token)
	forge := func(edit func(c *grant.Claims)) string {
		c := real
		edit(&c)
		tok, err := grant.Mint(x.ring.Active(), c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	big := 999999.0
	rich := forge(func(c *grant.Claims) { c.Action.Amount, c.Action.Target = &big, "attacker-account" })
	future := forge(func(c *grant.Claims) { c.IssuedAt = x.clock().Add(clearance.DefaultMaxClockSkew + time.Second).Unix() })
	verify := func(tok string) *result {
		return x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": tok, "intent_hash": g.hash}, nil)
	}
	for _, p := range []string{pathClaim, pathConsume} {
		wantFailedClaim(t, x.claim(t, p, rich, g.hash), "BINDING_MISMATCH")
		wantFailedClaim(t, x.claim(t, p, future, g.hash), "GRANT_INVALID")
	}
	verify(rich).wantProblem(t, http.StatusConflict, "BINDING_MISMATCH")
	verify(future).wantProblem(t, http.StatusConflict, "GRANT_INVALID")

	// Nothing was claimed; the attestation says what the grant says.
	v := verify(g.token).want(t, http.StatusOK)
	wantAct := map[string]any{"type": "refund", "amount": float64(100), "currency": "EUR", "target": "order-1"}
	if v.str("state") != "ISSUED" || !reflect.DeepEqual(lookup(v.JSON, "act"), wantAct) || v.str("sub") != "agent-7" {
		t.Fatalf("verify-token after the forgeries: %s", v)
	}
	c := x.claimed(t, g)
	att, _ := verifyOffline(t, c.str("claim_attestation"), grant.TypAttestation, x.fetchJWKS(t))
	if !reflect.DeepEqual(att["act"], wantAct) || !reflect.DeepEqual(jwsPart(t, g.token, 1)["act"], wantAct) || att["sub"] != real.Subject {
		t.Fatalf("attestation act %v, grant act %v, want %v", att["act"], jwsPart(t, g.token, 1)["act"], wantAct)
	}

	// Finalize finds the grant by the token: forged ones are refused and the
	// claim stays live. Finalize does not judge the token's lifetime (the
	// store's clock judges the lease), so the future iat is refused as a
	// token that is not the issued one.
	x.finalize(t, rich, c.str("claim_token"), "COMMITTED", nil).wantProblem(t, http.StatusConflict, "BINDING_MISMATCH")
	x.finalize(t, future, c.str("claim_token"), "COMMITTED", nil).wantProblem(t, http.StatusConflict, "BINDING_MISMATCH")
	x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	x.ledgerOK(t)
}

// TestExecVerifyTokenOfASpentGrant: verify-token never consumes a grant,
// and a claimed or finalized grant is no longer valid (409).
func TestExecVerifyTokenOfASpentGrant(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	g := x.grantFor(t, intentSpec{})
	verify := func() *result {
		return x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": g.token, "intent_hash": g.hash}, nil)
	}
	for range 2 {
		if v := verify().want(t, http.StatusOK); lookup(v.JSON, "valid") != true || v.str("state") != "ISSUED" {
			t.Fatalf("verify-token of an issued grant: %s", v)
		}
	}
	c := x.claimed(t, g)
	verify().wantProblem(t, http.StatusConflict, "GRANT_ALREADY_CLAIMED")
	x.finalize(t, g.token, c.str("claim_token"), "FAILED", nil).want(t, http.StatusOK)
	verify().wantProblem(t, http.StatusConflict, "GRANT_ALREADY_CLAIMED")
}

// TestExecUnknownOutcomeHoldsTheScope: after an INDETERMINATE finalization,
// or a claim whose lease passed unfinalized, a new intent on the same
// concurrency scope is refused until the execution is reconciled.
func TestExecUnknownOutcomeHoldsTheScope(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	const scope = "account-77"
	reconcile := func(grantID, resolution string) *result {
		return x.req(t, "POST", pathReconcile+"/"+grantID, x.o.Key, map[string]any{"resolution": resolution}, nil)
	}

	a := x.grantFor(t, intentSpec{scope: scope})
	ca := x.claimed(t, a)
	x.finalize(t, a.token, ca.str("claim_token"), "INDETERMINATE", nil).want(t, http.StatusOK)
	b := x.grantFor(t, intentSpec{scope: scope})
	for _, p := range []string{pathClaim, pathConsume} {
		wantFailedClaim(t, x.claim(t, p, b.token, b.hash), "CLAIM_SCOPE_UNRECONCILED")
	}
	x.advance(time.Minute) // a's lease is long over: still held
	wantFailedClaim(t, x.claim(t, pathClaim, b.token, b.hash), "CLAIM_SCOPE_UNRECONCILED")
	reconcile(a.grantID, "FAILED").want(t, http.StatusOK)
	cb := x.claimed(t, b)
	x.finalize(t, b.token, cb.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)

	// An executor that never finalized: after its lease the scope stays held;
	// reconciling it directly records it INDETERMINATE, then settles it.
	c := x.grantFor(t, intentSpec{scope: scope})
	cc := x.claimed(t, c)
	x.advance(30 * time.Second)
	d := x.grantFor(t, intentSpec{scope: scope})
	wantFailedClaim(t, x.claim(t, pathClaim, d.token, d.hash), "CLAIM_SCOPE_UNRECONCILED")
	rec := reconcile(c.grantID, "COMMITTED").want(t, http.StatusOK)
	if rec.str("state") != "COMMITTED" || rec.str("final_code") != "CLAIM_LEASE_EXPIRED" || rec.str("reconciliation.resolution") != "COMMITTED" {
		t.Fatalf("reconcile a lapsed claim: %s", rec)
	}
	x.finalize(t, c.token, cc.str("claim_token"), "COMMITTED", nil).wantProblem(t, http.StatusConflict, "ALREADY_FINALIZED")
	cd := x.claimed(t, d)
	x.finalize(t, d.token, cd.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	x.ledgerOK(t)
}

// TestExecAttestationExpiryIsTheLease: a claim made mid-second gets a lease
// that ends on a whole second, and the attestation's exp, read with
// go-jose's JWT parser, is exactly that end.
func TestExecAttestationExpiryIsTheLease(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	g := x.grantFor(t, intentSpec{})
	x.advance(2500 * time.Millisecond)
	claimedAt := x.clock()
	c := x.claimed(t, g)
	lease, err := time.Parse(time.RFC3339Nano, c.str("claim_lease_expires_at"))
	if err != nil {
		t.Fatal(err)
	}
	if lease.After(claimedAt.Add(30*time.Second)) || !lease.After(claimedAt.Add(29*time.Second)) || lease.Nanosecond() != 0 {
		t.Fatalf("claimed at %s: lease ends %s", claimedAt.Format(time.RFC3339Nano), c.str("claim_lease_expires_at"))
	}
	set := x.fetchJWKS(t)
	verifyOffline(t, c.str("claim_attestation"), grant.TypAttestation, set)
	tok, err := jwt.ParseSigned(c.str("claim_attestation"), []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var std jwt.Claims
	if err := tok.Claims(set.Keys[0].Key.(ed25519.PublicKey), &std); err != nil {
		t.Fatal(err)
	}
	if std.Expiry == nil || !std.Expiry.Time().Equal(lease) {
		t.Fatalf("attestation exp %v, lease ends %s", std.Expiry, lease)
	}
	// The lease holds until its end, exactly.
	x.advance(lease.Sub(claimedAt) - time.Nanosecond)
	x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
}

// TestExecReceiptChecks: a receipt signed by a registered provider key but
// naming another issuer is recorded unverified and confirms nothing; a
// receipt without effect_digest verifies but confirms nothing; receipts
// never refuse finalization or reconciliation.
func TestExecReceiptChecks(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	effect := effectDigestOf("refund-5")
	sign := func(iss, grantID, digest string) string {
		s, err := grant.SignReceipt(x.provider, grant.ReceiptClaims{Issuer: iss, GrantID: grantID, EffectDigest: digest,
			Outcome: "COMMITTED", IssuedAt: x.clock().Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	finalizeWith := func(receipt map[string]any) *result {
		g, ct := x.claimedGrantOther(t, effect)
		if receipt["receipt"] == "sign" {
			receipt["receipt"] = sign(receipt["iss"].(string), g.grantID, receipt["digest"].(string))
			delete(receipt, "iss")
			delete(receipt, "digest")
		}
		return x.finalize(t, g.token, ct, "COMMITTED", map[string]any{"effect_receipt": receipt}).want(t, http.StatusOK)
	}

	r := finalizeWith(map[string]any{"profile": "VP-3", "receipt": "sign", "iss": "bank.evil.example", "digest": effect})
	if lookup(r.JSON, "effect_confirmed") != false || lookup(r.JSON, "evidence") != nil ||
		lookup(r.JSON, "receipt_verification.verified") != false || !strings.Contains(r.str("receipt_verification.reason"), "bank.evil.example") {
		t.Fatalf("a receipt naming another issuer: %s", r)
	}
	r = finalizeWith(map[string]any{"profile": "VP-3", "receipt": "sign", "iss": "psp.example", "digest": ""})
	if lookup(r.JSON, "effect_confirmed") != false || lookup(r.JSON, "evidence") != nil ||
		lookup(r.JSON, "receipt_verification.verified") != true || r.str("receipt_verification.iss") != "psp.example" {
		t.Fatalf("a receipt without effect_digest: %s", r)
	}
	for _, rc := range []map[string]any{
		{"profile": "VP-3", "receipt": ""},
		{},
		{"profile": "VP-3", "receipt": strings.Repeat("A", 200000)},
		{"profile": "VP-3\u200b", "receipt": "a.b.c"}, // (a NUL anywhere in a body is refused before: JSON_NUL_CHARACTER)
	} {
		presented, _ := rc["receipt"].(string)
		r := finalizeWith(rc)
		if r.str("outcome") != "COMMITTED" || lookup(r.JSON, "receipt_verification.verified") != false ||
			r.str("receipt_verification.reason") == "" || r.str("receipt_verification.receipt") != presented {
			t.Fatalf("finalize with receipt %.80v: %.400s", rc, r)
		}
	}

	// Reconciliation records a receipt of another profile the same way.
	g, ct := x.claimedGrantOther(t, effect)
	x.finalize(t, g.token, ct, "INDETERMINATE", nil).want(t, http.StatusOK)
	rec := x.req(t, "POST", pathReconcile+"/"+g.grantID, x.o.Key, map[string]any{"resolution": "COMMITTED",
		"effect_receipt": map[string]any{"profile": "VP-2", "receipt": sign("psp.example", g.grantID, effect)}}, nil).want(t, http.StatusOK)
	if rec.str("state") != "COMMITTED" || lookup(rec.JSON, "reconciliation.receipt.verified") != false ||
		rec.str("reconciliation.receipt.profile") != "VP-2" || lookup(rec.JSON, "reconciliation.effect_confirmed") != false {
		t.Fatalf("reconcile with a VP-2 receipt: %s", rec)
	}
	x.ledgerOK(t)
}
