package server_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/server"
)

// ---------------------------------------------------------------------------
// Full cycle

func TestExecFullCycle(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)

	// The agent key registered by newExecEnv is listed, public members only.
	keys := x.req(t, "GET", pathAgentKeys, x.o.Key, nil, nil).want(t, http.StatusOK)
	if keys.str("keys.0.kid") != x.agent.KID() || keys.str("keys.0.status") != "ACTIVE" || strings.Contains(string(keys.Raw), `"d"`) {
		t.Fatalf("agent keys: %s", keys)
	}

	effect := effectDigestOf("refund-42")
	g := x.grantFor(t, intentSpec{effect: effect})
	if g.bind.str("expires_at") != execStart.Add(120*time.Second).Format(time.RFC3339Nano) {
		t.Fatalf("expires_at: %s", g.bind)
	}
	if _, ok := g.bind.JSON["verification_envelope"]; ok {
		t.Fatalf("a plain client got a verification envelope: %s", g.bind)
	}
	if h := jwsPart(t, g.token, 0); h["typ"] != grant.TypGrant || h["alg"] != "EdDSA" || h["kid"] != x.ring.Active().KID() || len(h) != 3 {
		t.Fatalf("grant header %v", h)
	}

	v := x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": g.token, "intent_hash": g.hash}, nil).
		want(t, http.StatusOK)
	if lookup(v.JSON, "valid") != true || v.str("state") != "ISSUED" || v.str("grant_id") != g.grantID || v.str("intent_hash") != g.hash {
		t.Fatalf("verify-token: %s", v)
	}

	x.advance(5 * time.Second)
	c := x.claimed(t, g)
	claimToken := c.str("claim_token")
	lease := x.clock().Add(30 * time.Second)
	if !strings.HasPrefix(claimToken, "clr_claim_") || c.str("claim_lease_expires_at") != lease.Format(time.RFC3339Nano) ||
		c.str("grant_id") != g.grantID || c.str("decision_id") != g.bind.str("decision_id") || lookup(c.JSON, "valid") != true {
		t.Fatalf("claim: %s", c)
	}

	// The downstream system verifies the attestation offline with the JWKS.
	set := x.fetchJWKS(t)
	att, kid := verifyOffline(t, c.str("claim_attestation"), grant.TypAttestation, set)
	if kid != x.ring.Active().KID() {
		t.Fatalf("attestation kid %q", kid)
	}
	if att["claim_token_digest"] != sha256Digest([]byte(claimToken)) {
		t.Fatalf("claim_token_digest %v, want sha256 of the claim token", att["claim_token_digest"])
	}
	binding, _ := att["binding"].(map[string]any)
	if att["aud"] != grant.AudAttestation || att["iss"] != "clearance" || att["org"] != x.o.ID || att["grant_id"] != g.grantID ||
		att["decision_id"] != g.bind.str("decision_id") || att["dossier_id"] != g.bind.str("dossier_id") ||
		att["exp"] != float64(lease.Unix()) || binding["intent_hash"] != g.hash || binding["expected_effect_digest"] != effect ||
		binding["payload_profile"] != grant.PayloadProfile || binding["nonce"] == "" || binding["scope"] == "" ||
		!strings.HasPrefix(fmt.Sprint(binding["payload_digest"]), "sha256:") {
		t.Fatalf("attestation claims %v", att)
	}

	// A claimed grant is spent: verify-token says so with a 409.
	x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": g.token, "intent_hash": g.hash}, nil).
		wantProblem(t, http.StatusConflict, "GRANT_ALREADY_CLAIMED")

	f := x.finalize(t, g.token, claimToken, "COMMITTED", map[string]any{
		"effect_evidence": map[string]any{"kind": "PROVIDER_API", "status": "CONFIRMED", "effect_digest": effect},
	}).want(t, http.StatusOK)
	if f.str("outcome") != "COMMITTED" || lookup(f.JSON, "effect_confirmed") != true || f.str("evidence.status") != "CONFIRMED" ||
		f.str("evidence.effect_digest") != effect || f.str("grant_id") != g.grantID {
		t.Fatalf("finalize with evidence: %s", f)
	}

	// The consume-token alias, and COMMITTED without evidence.
	g2 := x.grantFor(t, intentSpec{effect: effect})
	c2 := x.claim(t, pathConsume, g2.token, g2.hash).want(t, http.StatusOK)
	if lookup(c2.JSON, "should_execute") != true || c2.str("claim_token") == "" || c2.str("grant_id") != g2.grantID {
		t.Fatalf("consume-token: %s", c2)
	}
	att2, _ := verifyOffline(t, c2.str("claim_attestation"), grant.TypAttestation, set)
	if att2["claim_token_digest"] != sha256Digest([]byte(c2.str("claim_token"))) || att2["grant_id"] != g2.grantID {
		t.Fatalf("consume attestation %v", att2)
	}
	wantFailedClaim(t, x.claim(t, pathConsume, g2.token, g2.hash), "CLAIM_REPLAY")
	wantFailedClaim(t, x.claim(t, pathClaim, g2.token, g2.hash), "CLAIM_REPLAY")
	f2 := x.finalize(t, g2.token, c2.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	if f2.str("outcome") != "COMMITTED" || lookup(f2.JSON, "effect_confirmed") != false || lookup(f2.JSON, "evidence") != nil {
		t.Fatalf("COMMITTED alone must not confirm the effect: %s", f2)
	}

	// FAILED is recorded as such.
	g3 := x.grantFor(t, intentSpec{})
	c3 := x.claimed(t, g3)
	if f3 := x.finalize(t, g3.token, c3.str("claim_token"), "FAILED", nil).want(t, http.StatusOK); f3.str("outcome") != "FAILED" {
		t.Fatalf("FAILED: %s", f3)
	}
	x.ledgerOK(t)
}

// ---------------------------------------------------------------------------
// 409s of enforce-and-bind and verify-token

func TestExecIntentIDIsTheIssuanceBoundary(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	jws, id := x.intent(t, intentSpec{})
	first := x.bind(t, jws, nil).want(t, http.StatusOK)
	if first.Header.Get(server.HeaderReplayed) != "" || first.str("execution_token") == "" {
		t.Fatalf("first bind: %s", first)
	}
	again := x.bind(t, jws, map[string]string{server.HeaderIdempotencyKey: id}).want(t, http.StatusOK)
	if again.Header.Get(server.HeaderReplayed) != "true" || string(again.Raw) != string(first.Raw) {
		t.Fatalf("replay differs:\n%s\n%s", first, again)
	}
	// Another intent under the bound intent_id (different amount, nonce).
	other, _ := x.intent(t, intentSpec{id: id, amount: 101})
	x.bind(t, other, nil).wantProblem(t, http.StatusConflict, "INTENT_ID_ALREADY_BOUND")

	// A replay after the claim hands back the same, spent grant: it never
	// mints a second one.
	g := issued{token: first.str("execution_token"), hash: first.str("intent_hash")}
	x.claimed(t, g)
	after := x.bind(t, jws, nil).want(t, http.StatusOK)
	if after.str("execution_token") != g.token || after.Header.Get(server.HeaderReplayed) != "true" {
		t.Fatalf("replay after claim: %s", after)
	}
	wantFailedClaim(t, x.claim(t, pathClaim, g.token, g.hash), "CLAIM_REPLAY")
	x.ledgerOK(t)
}

func TestExecVerifyTokenConflicts(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	g := x.grantFor(t, intentSpec{})
	other := x.grantFor(t, intentSpec{})
	verify := func(key, token, hash string) *result {
		return x.req(t, "POST", pathVerifyToken, key, map[string]any{"execution_token": token, "intent_hash": hash}, nil)
	}
	verify(x.o.Key, g.token, other.hash).wantProblem(t, http.StatusConflict, "GRANT_NOT_BOUND")
	verify(x.o.Key, g.token, "").wantProblem(t, http.StatusConflict, "GRANT_NOT_BOUND")
	verify(x.o.Key, "", g.hash).wantProblem(t, http.StatusBadRequest, "INVALID_REQUEST")

	// Another org's grant, presented by that other org.
	o2 := x.createOrg("Other")
	x.registerKey(t, pathAgentKeys, o2.Key, x.agent, "").want(t, http.StatusCreated)
	verify(o2.Key, g.token, g.hash).wantProblem(t, http.StatusConflict, "GRANT_INVALID")
	wantFailedClaim(t, x.req(t, "POST", pathClaim, o2.Key, map[string]any{"execution_token": g.token, "intent_hash": g.hash}, nil), "GRANT_INVALID")

	// verify-token does not consume: it still verifies and claims.
	verify(x.o.Key, g.token, g.hash).want(t, http.StatusOK)
	verify(x.o.Key, g.token, g.hash).want(t, http.StatusOK)

	// Expiry, with zero leeway: valid 1 ns before, expired at exp.
	x.advance(120*time.Second - time.Second)
	verify(x.o.Key, other.token, other.hash).want(t, http.StatusOK)
	x.advance(time.Second)
	verify(x.o.Key, other.token, other.hash).wantProblem(t, http.StatusConflict, "GRANT_EXPIRED")
	wantFailedClaim(t, x.claim(t, pathClaim, other.token, other.hash), "GRANT_EXPIRED")
	x.ledgerOK(t)
}

// ---------------------------------------------------------------------------
// 409s of claim-token

func TestExecClaimConflicts(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)

	t.Run("replay", func(t *testing.T) {
		g := x.grantFor(t, intentSpec{})
		x.claimed(t, g)
		for _, p := range []string{pathClaim, pathConsume} {
			r := x.claim(t, p, g.token, g.hash)
			wantFailedClaim(t, r, "CLAIM_REPLAY")
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("failed claim Content-Type %q", ct)
			}
		}
	})
	t.Run("not bound", func(t *testing.T) {
		g := x.grantFor(t, intentSpec{})
		wantFailedClaim(t, x.claim(t, pathClaim, g.token, sha256Digest([]byte("other"))), "GRANT_NOT_BOUND")
		x.claimed(t, g) // the refusal consumed nothing
	})
	t.Run("binding mismatch", func(t *testing.T) {
		// A grant token with the real grant id but another nonce, signed by
		// the real key (what a signing bug or a leaked key would produce):
		// the claim compares every binding claim with the stored grant.
		g := x.grantFor(t, intentSpec{})
		var c grant.Claims
		if err := json.Unmarshal(payloadOf(t, g.token), &c); err != nil {
			t.Fatal(err)
		}
		for _, edit := range []func(*grant.Claims){
			func(c *grant.Claims) { c.Nonce = "another-nonce" },
			func(c *grant.Claims) { c.Scope = "another-scope" },
			func(c *grant.Claims) { c.PayloadDigest = sha256Digest([]byte("x")) },
			func(c *grant.Claims) { c.Subject = "agent-8" },
			func(c *grant.Claims) { c.ExpectedEffectDigest = sha256Digest([]byte("e")) },
		} {
			forged := c
			edit(&forged)
			tok, err := grant.Mint(x.ring.Active(), forged)
			if err != nil {
				t.Fatal(err)
			}
			wantFailedClaim(t, x.claim(t, pathClaim, tok, g.hash), "BINDING_MISMATCH")
		}
		x.claimed(t, g)
	})
	t.Run("scope busy", func(t *testing.T) {
		a := x.grantFor(t, intentSpec{scope: "account-9"})
		b := x.grantFor(t, intentSpec{scope: "account-9"})
		ca := x.claimed(t, a)
		wantFailedClaim(t, x.claim(t, pathClaim, b.token, b.hash), "CONCURRENCY_SCOPE_BUSY")
		x.finalize(t, a.token, ca.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
		x.claimed(t, b) // finalizing a released the scope
	})
	t.Run("nonce reuse", func(t *testing.T) {
		a := x.grantFor(t, intentSpec{nonce: "n-shared"})
		b := x.grantFor(t, intentSpec{nonce: "n-shared"})
		x.claimed(t, a)
		wantFailedClaim(t, x.claim(t, pathClaim, b.token, b.hash), "NONCE_ALREADY_USED")
	})
	t.Run("stale authorization", func(t *testing.T) {
		g := x.grantFor(t, intentSpec{})
		if r := x.publish(x.o.Key, stricterBundle); r.Status >= 300 {
			t.Fatalf("publish: %s", r)
		}
		wantFailedClaim(t, x.claim(t, pathClaim, g.token, g.hash), "STALE_AUTHORIZATION")
		wantFailedClaim(t, x.claim(t, pathConsume, g.token, g.hash), "STALE_AUTHORIZATION")
		// verify-token is not a claim: it still reports the grant ISSUED.
		v := x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": g.token, "intent_hash": g.hash}, nil)
		if v.Status != http.StatusOK || v.str("state") != "ISSUED" {
			t.Fatalf("verify after stale claim: %s", v)
		}
	})
	x.ledgerOK(t)
}

// ---------------------------------------------------------------------------
// 409s of finalize-token

func TestExecFinalizeConflicts(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)

	g := x.grantFor(t, intentSpec{})
	x.finalize(t, g.token, "clr_claim_nothing", "COMMITTED", nil).wantProblem(t, http.StatusConflict, "GRANT_NOT_CLAIMED")
	c := x.claimed(t, g)
	x.finalize(t, g.token, c.str("claim_token")+"x", "COMMITTED", nil).wantProblem(t, http.StatusConflict, "CLAIM_TOKEN_MISMATCH")
	x.finalize(t, g.token, "", "COMMITTED", nil).wantProblem(t, http.StatusBadRequest, "INVALID_FINALIZATION")
	x.finalize(t, g.token, c.str("claim_token"), "DONE", nil).wantProblem(t, http.StatusBadRequest, "INVALID_FINALIZATION")
	x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", map[string]any{
		"effect_evidence": map[string]any{"kind": "X", "status": "CONFIRMED", "effect_digest": "md5:abc"},
	}).wantProblem(t, http.StatusBadRequest, "INVALID_EFFECT_EVIDENCE")
	x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil).wantProblem(t, http.StatusConflict, "ALREADY_FINALIZED")
	x.finalize(t, g.token, c.str("claim_token"), "FAILED", nil).wantProblem(t, http.StatusConflict, "ALREADY_FINALIZED")

	// One nanosecond inside the lease still finalizes.
	g = x.grantFor(t, intentSpec{})
	c = x.claimed(t, g)
	x.advance(30*time.Second - time.Nanosecond)
	x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)

	// At the lease boundary: recorded INDETERMINATE, answered 409 with the
	// finalize shape.
	g = x.grantFor(t, intentSpec{})
	c = x.claimed(t, g)
	x.advance(30 * time.Second)
	r := x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil)
	if r.Status != http.StatusConflict || r.str("outcome") != "INDETERMINATE" || r.str("code") != "CLAIM_LEASE_EXPIRED" ||
		r.str("grant_id") != g.grantID || lookup(r.JSON, "effect_confirmed") != false {
		t.Fatalf("finalize at the lease boundary: %s", r)
	}
	x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil).wantProblem(t, http.StatusConflict, "ALREADY_FINALIZED")

	// A grant that expires after its claim still finalizes within the lease.
	g = x.grantFor(t, intentSpec{})
	x.advance(119 * time.Second)
	c = x.claimed(t, g)
	x.advance(20 * time.Second) // the grant expired 19 s ago; the lease holds 10 s more
	x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": g.token, "intent_hash": g.hash}, nil).
		wantProblem(t, http.StatusConflict, "GRANT_EXPIRED")
	f := x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	if f.str("outcome") != "COMMITTED" {
		t.Fatalf("finalize after the grant expired: %s", f)
	}
	x.ledgerOK(t)
}

// ---------------------------------------------------------------------------
// enforce-and-bind statuses

func TestExecEnforceAndBindStatuses(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	bindRaw := func(t *testing.T, signed any, hdr map[string]string) *result {
		return x.req(t, "POST", pathBind, x.o.Key, map[string]any{"signed_intent": signed}, hdr)
	}
	jws, id := x.intent(t, intentSpec{})
	payload := payloadOf(t, jws)

	t.Run("unsigned and garbage", func(t *testing.T) {
		for _, s := range []string{"", string(payload), "a.b.c", "not a jws", "..", strings.Repeat("A", 100),
			b64([]byte(`{"alg":"EdDSA","kid":"k","typ":"clearance-intent+jwt"}`)) + "." + b64(payload)} {
			r := bindRaw(t, s, nil)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("%q: want 400: %s", s, r)
			}
			checkProblemShape(t, r)
		}
		// An unsigned JWS (alg none) names no key that verifies it: refused
		// as a bad signature.
		none := compact(t, map[string]any{"alg": "none", "kid": x.agent.KID(), "typ": grant.TypIntent}, payload,
			func([]byte) []byte { return nil })
		bindRaw(t, none, nil).wantProblem(t, http.StatusForbidden, "INTENT_SIGNATURE_INVALID")
	})
	t.Run("unregistered key", func(t *testing.T) {
		stranger := mustKey(t, 40)
		s, _ := x.intent(t, intentSpec{key: &stranger})
		bindRaw(t, s, nil).wantProblem(t, http.StatusForbidden, "INTENT_SIGNATURE_INVALID")
		// The stranger's signature under the registered key's kid.
		forged := compact(t, map[string]any{"alg": "EdDSA", "kid": x.agent.KID(), "typ": grant.TypIntent}, payload,
			func(in []byte) []byte { sig, _ := stranger.Sign(in); return sig })
		bindRaw(t, forged, nil).wantProblem(t, http.StatusForbidden, "INTENT_SIGNATURE_INVALID")
	})
	t.Run("another org", func(t *testing.T) {
		o2 := x.createOrg("Other")
		s, _ := x.intent(t, intentSpec{org: o2.ID})
		bindRaw(t, s, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
		// The other org has not registered the agent key.
		x.req(t, "POST", pathBind, o2.Key, map[string]any{"signed_intent": s}, nil).
			wantProblem(t, http.StatusForbidden, "INTENT_SIGNATURE_INVALID")
	})
	t.Run("not canonical", func(t *testing.T) {
		var m map[string]any
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatal(err)
		}
		pretty, _ := json.MarshalIndent(m, "", " ")
		s, _ := grant.SignIntent(x.agent, pretty)
		bindRaw(t, s, nil).wantProblem(t, http.StatusBadRequest, "INTENT_NOT_CANONICAL")
		u, _ := x.intent(t, intentSpec{mutate: func(m map[string]any) { m["surprise"] = true }})
		if r := bindRaw(t, u, nil); r.Status != http.StatusBadRequest {
			t.Fatalf("unknown intent member: %s", r)
		}
	})
	t.Run("idempotency key", func(t *testing.T) {
		bindRaw(t, jws, map[string]string{server.HeaderIdempotencyKey: id + "-x"}).
			wantProblem(t, http.StatusBadRequest, "IDEMPOTENCY_KEY_NOT_INTENT_ID")
		r := bindRaw(t, jws, map[string]string{server.HeaderIdempotencyKey: id}).want(t, http.StatusOK)
		if r.str("execution_token") == "" || r.Header.Get(server.HeaderReplayed) != "" {
			t.Fatalf("first bind with a matching Idempotency-Key: %s", r)
		}
	})
	t.Run("approval evidence", func(t *testing.T) {
		s, _ := x.intent(t, intentSpec{})
		for _, ev := range []any{map[string]any{"approver": "bob", "sig": "x"}, "yes", true, []any{}} {
			x.req(t, "POST", pathBind, x.o.Key, map[string]any{"signed_intent": s, "approval_evidence": ev}, nil).
				wantProblem(t, http.StatusConflict, "APPROVAL_EVIDENCE_UNVERIFIED")
		}
		// null is absence; the refusals recorded nothing for this intent.
		r := x.req(t, "POST", pathBind, x.o.Key, `{"signed_intent":"`+s+`","approval_evidence":null}`, nil).want(t, http.StatusOK)
		if r.str("execution_token") == "" || r.Header.Get(server.HeaderReplayed) != "" {
			t.Fatalf("approval_evidence null: %s", r)
		}
	})
	t.Run("revoked agent key", func(t *testing.T) {
		s, _ := x.intent(t, intentSpec{})
		x.req(t, "DELETE", pathAgentKeys+"/"+x.agent.KID(), x.o.Key, nil, nil).want(t, http.StatusOK)
		bindRaw(t, s, nil).wantProblem(t, http.StatusForbidden, "INTENT_SIGNATURE_INVALID")
		x.registerKey(t, pathAgentKeys, x.o.Key, x.agent, "").want(t, http.StatusCreated)
		bindRaw(t, s, nil).want(t, http.StatusOK)
	})
	x.ledgerOK(t)
}

func TestExecNonAuthorizingAnswersCarryNoGrant(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	noGrant := func(t *testing.T, r *result, outcome, mode string) {
		t.Helper()
		r.want(t, http.StatusOK)
		if r.str("outcome") != outcome || r.str("mode") != mode {
			t.Fatalf("want %s in %s: %s", outcome, mode, r)
		}
		for _, k := range []string{"execution_token", "grant_id", "expires_at"} {
			if _, ok := r.JSON[k]; ok {
				t.Fatalf("%s %s carries %s: %s", outcome, mode, k, r)
			}
		}
		if r.str("intent_hash") == "" || r.str("dossier_id") == "" {
			t.Fatalf("non-authorizing answer lacks its evidence: %s", r)
		}
	}
	for _, c := range []struct {
		amount  float64
		outcome string
	}{{1000, "ESCALATE"}, {5000, "REVIEW_REQUIRED"}, {10000, "BLOCK"}} {
		s, _ := x.intent(t, intentSpec{amount: c.amount})
		noGrant(t, x.bind(t, s, nil), c.outcome, "ENFORCEMENT")
	}
	// A MANAGED escalation needs an approval service: without one it is a
	// non-authorizing 503 that records nothing (the same intent is still
	// unbound afterwards).
	managed := func(m map[string]any) { m["escalation"] = map[string]any{"mode": "MANAGED"} }
	s, _ := x.intent(t, intentSpec{amount: 2000, mutate: managed})
	before := x.fingerprint(t)
	x.bind(t, s, nil).wantProblem(t, http.StatusServiceUnavailable, "APPROVAL_SERVICE_NOT_CONFIGURED")
	if after := x.fingerprint(t); after != before {
		t.Fatalf("a refused MANAGED escalation changed the store:\n%s\n%s", before, after)
	}
	// MANAGED with an outcome that is not ESCALATE is answered as usual.
	s, _ = x.intent(t, intentSpec{amount: 10000, mutate: managed})
	r := x.bind(t, s, nil)
	noGrant(t, r, "BLOCK", "ENFORCEMENT")
	if r.str("escalation_mode") != "MANAGED" {
		t.Fatalf("escalation_mode: %s", r)
	}
	// An ALLOW asked for in SHADOW mode.
	s, _ = x.intent(t, intentSpec{})
	noGrant(t, x.req(t, "POST", pathBind, x.o.Key, map[string]any{"signed_intent": s, "mode": "SHADOW"}, nil), "ALLOW", "SHADOW")

	// The starter policy (SHADOW): nothing is ever granted.
	o2 := x.createOrg("Starter")
	x.registerKey(t, pathAgentKeys, o2.Key, x.agent, "").want(t, http.StatusCreated)
	for _, c := range []struct {
		amount  float64
		outcome string
	}{{5, "ALLOW"}, {1500, "ESCALATE"}, {20000, "BLOCK"}} {
		s, _ := x.intent(t, intentSpec{org: o2.ID, amount: c.amount})
		noGrant(t, x.req(t, "POST", pathBind, o2.Key, map[string]any{"signed_intent": s}, nil), c.outcome, "SHADOW")
		noGrant(t, x.req(t, "POST", pathBind, o2.Key, map[string]any{"signed_intent": s, "mode": "ENFORCEMENT"}, nil), c.outcome, "SHADOW")
	}
	x.ledgerOK(t)
}

func TestExecVerificationEnvelopeByUserAgent(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	set := x.fetchJWKS(t)
	jws, _ := x.intent(t, intentSpec{})
	first := x.bind(t, jws, map[string]string{"User-Agent": pipelineUA}).want(t, http.StatusOK)
	for _, c := range []struct {
		ua   string
		want bool
	}{
		{"agent-safe-pipeline/0.2.0", true},
		{"agent-safe-pipeline/0.10.0", true},
		{"agent-safe-pipeline/1.0.0", true},
		{"acme-runner/3.1 agent-safe-pipeline/0.3.1 (linux)", true},
		{"agent-safe-pipeline/0.1.9", false},
		{"agent-safe-pipeline/0.2.0-rc.1", false},
		{"agent-safe-pipeline/0.2.0+build.7", true}, // build metadata is not part of the version core
		{"agent-safe-pipeline/0.3.0-beta.1+exp.sha.5114f85", true},
		{"agent-safe-pipeline/0.2+build.7", false},
		{"agent-safe-pipeline/garbage", false},
		{"agent-safe-pipeline/0.2", false}, // not MAJOR.MINOR.PATCH
		{"agent-safe-pipeline/1", false},
		{"Agent-Safe-Pipeline/1.0.0", false},
		{"curl/8.5.0", false},
		{"-", false}, // no User-Agent at all
	} {
		r := x.bind(t, jws, map[string]string{"User-Agent": c.ua}).want(t, http.StatusOK)
		env, ok := r.JSON["verification_envelope"].(string)
		if ok != c.want {
			t.Fatalf("User-Agent %q: envelope present %v, want %v: %s", c.ua, ok, c.want, r)
		}
		if !ok {
			continue
		}
		claims, _ := verifyOffline(t, env, grant.TypDecision, set)
		if claims["aud"] != grant.AudDecision || claims["decision_id"] != first.str("decision_id") ||
			claims["intent_hash"] != first.str("intent_hash") || claims["grant_id"] != first.str("grant_id") ||
			claims["outcome"] != "ALLOW" || claims["mode"] != "ENFORCEMENT" || claims["org"] != x.o.ID {
			t.Fatalf("envelope claims %v", claims)
		}
	}
	if r := x.bind(t, jws, map[string]string{"User-Agent": "-"}); r.str("execution_token") != first.str("execution_token") {
		t.Fatalf("the envelope changes nothing else: %s", r)
	}
	// A non-authorizing answer gets an envelope too, without a grant id.
	s, _ := x.intent(t, intentSpec{amount: 20000})
	r := x.bind(t, s, map[string]string{"User-Agent": "agent-safe-pipeline/0.10.0"}).want(t, http.StatusOK)
	claims, _ := verifyOffline(t, r.str("verification_envelope"), grant.TypDecision, set)
	if claims["outcome"] != "BLOCK" || claims["grant_id"] != nil {
		t.Fatalf("BLOCK envelope %v", claims)
	}
	x.ledgerOK(t)
}

// TestVerificationEnvelopeOnEveryDecisionRoute: the spec gives the envelope
// to any decision for a qualifying client, not only to enforce-and-bind; it
// states the recorded decision, and a replay answers the same envelope.
func TestVerificationEnvelopeOnEveryDecisionRoute(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	set := x.fetchJWKS(t)
	body := map[string]any{"decision_type": "PAYMENT", "workflow_key": "ap.invoice", "amount": 20000}
	ua := map[string]string{"User-Agent": "agent-safe-pipeline/0.2.0+build.7", "Idempotency-Key": "env-1"}
	r := x.req(t, "POST", "/v1/protocol/evaluate-decision", x.o.Key, body, ua).want(t, http.StatusOK)
	claims, _ := verifyOffline(t, r.str("verification_envelope"), grant.TypDecision, set)
	if claims["decision_id"] != r.str("decision_id") || claims["dossier_id"] != r.str("dossier_id") ||
		claims["outcome"] != r.str("outcome") || claims["mode"] != r.str("mode") || claims["org"] != x.o.ID ||
		claims["intent_hash"] != nil || claims["grant_id"] != nil || claims["aud"] != grant.AudDecision {
		t.Fatalf("evaluate-decision envelope %v for %s", claims, r)
	}
	replay := x.req(t, "POST", "/v1/protocol/evaluate-decision", x.o.Key, body, ua).want(t, http.StatusOK)
	if replay.str("verification_envelope") != r.str("verification_envelope") {
		t.Fatal("a replay answers another envelope")
	}
	plain := x.req(t, "POST", "/v1/protocol/evaluate-decision", x.o.Key, body, map[string]string{"Idempotency-Key": "env-1"}).want(t, http.StatusOK)
	if _, ok := plain.JSON["verification_envelope"]; ok || plain.str("decision_id") != r.str("decision_id") {
		t.Fatalf("a client that does not qualify gets an envelope, or another decision: %s", plain)
	}
	gate := x.req(t, "POST", "/v1/action-gate/evaluate", x.o.Key, body, map[string]string{"User-Agent": pipelineUA}).want(t, http.StatusOK)
	d, _ := gate.JSON["decision"].(map[string]any)
	env, _ := d["verification_envelope"].(string)
	if claims, _ := verifyOffline(t, env, grant.TypDecision, set); claims["decision_id"] != d["decision_id"] {
		t.Fatalf("action-gate envelope %v for %s", claims, gate)
	}
}

// ---------------------------------------------------------------------------
// Token attacks

func TestExecTokenAttacks(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	g := x.grantFor(t, intentSpec{})
	payload := payloadOf(t, g.token)
	active := x.ring.Active()
	attacker := mustKey(t, 66)
	attackerJWK := attacker.PublicJWK()
	edSign := func(k grant.Key) func([]byte) []byte {
		return func(in []byte) []byte { sig, _ := k.Sign(in); return sig }
	}
	hs256 := func(secret []byte) func([]byte) []byte {
		return func(in []byte) []byte { m := hmac.New(sha256.New, secret); m.Write(in); return m.Sum(nil) }
	}
	hdr := func(extra map[string]any) map[string]any {
		h := map[string]any{"alg": "EdDSA", "kid": active.KID(), "typ": grant.TypGrant}
		for k, v := range extra {
			if v == nil {
				delete(h, k)
				continue
			}
			h[k] = v
		}
		return h
	}
	// The envelope of this very decision, and an attestation of another
	// grant, are real tokens signed by the same key.
	withEnvelope := x.bind(t, func() string { s, _ := x.intent(t, intentSpec{}); return s }(),
		map[string]string{"User-Agent": pipelineUA}).want(t, http.StatusOK)
	other := issued{token: withEnvelope.str("execution_token"), hash: withEnvelope.str("intent_hash")}
	otherClaim := x.claimed(t, other)
	intentJWS, _ := x.intent(t, intentSpec{})
	attackerGrant, err := grant.Mint(attacker, func() grant.Claims {
		var c grant.Claims
		if err := json.Unmarshal(payload, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}

	attacks := map[string]string{
		"claim attestation":     otherClaim.str("claim_attestation"),
		"verification envelope": withEnvelope.str("verification_envelope"),
		"signed intent":         intentJWS,
		"alg none":              compact(t, hdr(map[string]any{"alg": "none"}), payload, func([]byte) []byte { return nil }),
		"alg none, no kid":      compact(t, map[string]any{"alg": "none", "typ": grant.TypGrant}, payload, func([]byte) []byte { return nil }),
		"alg NONE":              compact(t, hdr(map[string]any{"alg": "NONE"}), payload, func([]byte) []byte { return nil }),
		"HS256 with public key": compact(t, hdr(map[string]any{"alg": "HS256"}), payload, hs256(active.Public())),
		"HS256 with JWK x":      compact(t, hdr(map[string]any{"alg": "HS256"}), payload, hs256([]byte(b64(active.Public())))),
		"jku to attacker keys": compact(t, hdr(map[string]any{"kid": attacker.KID(), "jku": x.srv.URL + "/attacker-jwks.json"}),
			payload, edSign(attacker)),
		"jku with real kid":      compact(t, hdr(map[string]any{"jku": x.srv.URL + pathJWKS}), payload, edSign(active)),
		"embedded jwk":           compact(t, hdr(map[string]any{"kid": attacker.KID(), "jwk": attackerJWK}), payload, edSign(attacker)),
		"embedded jwk, real kid": compact(t, hdr(map[string]any{"jwk": attackerJWK}), payload, edSign(attacker)),
		"x5u header":             compact(t, hdr(map[string]any{"x5u": "https://attacker.example/cert"}), payload, edSign(active)),
		"crit header":            compact(t, hdr(map[string]any{"crit": []string{"exp"}}), payload, edSign(active)),
		"attacker key, real kid": compact(t, hdr(nil), payload, edSign(attacker)),
		"attacker-minted grant":  attackerGrant,
		"wrong typ":              compact(t, hdr(map[string]any{"typ": "JWT"}), payload, edSign(active)),
		"no typ":                 compact(t, hdr(map[string]any{"typ": nil}), payload, edSign(active)),
		"JSON serialization": fmt.Sprintf(`{"protected":%q,"payload":%q,"signature":%q}`,
			strings.Split(g.token, ".")[0], strings.Split(g.token, ".")[1], strings.Split(g.token, ".")[2]),
		"padded signature":  g.token + "==",
		"trailing dot":      g.token + ".",
		"whitespace":        " " + g.token,
		"truncated":         g.token[:len(g.token)-2],
		"signature removed": g.token[:strings.LastIndexByte(g.token, '.')+1],
	}
	names := make([]string, 0, len(attacks))
	for n := range attacks {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		tok := attacks[n]
		for _, p := range []string{pathClaim, pathConsume} {
			r := x.claim(t, p, tok, g.hash)
			neverExecutes(t, r)
			if r.Status != http.StatusConflict {
				t.Errorf("%s on %s: want 409: %s", n, p, r)
			}
		}
		if r := x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": tok, "intent_hash": g.hash}, nil); r.Status != http.StatusConflict {
			t.Errorf("%s on verify-token: want 409: %s", n, r)
		}
	}

	// One flipped bit at ~40 positions spread over the token.
	for i := range 40 {
		pos := i * (len(g.token) - 1) / 39
		b := []byte(g.token)
		b[pos] ^= 0x01
		r := x.claim(t, pathClaim, string(b), g.hash)
		neverExecutes(t, r)
		if r.Status != http.StatusConflict {
			t.Errorf("byte %d flipped: want 409: %s", pos, r)
		}
	}

	// Another org's valid grant.
	o2 := x.createOrg("Other")
	x.registerKey(t, pathAgentKeys, o2.Key, x.agent, "").want(t, http.StatusCreated)
	if r := x.publish(o2.Key, bandsBundle); r.Status >= 300 {
		t.Fatalf("publish: %s", r)
	}
	s2, _ := x.intent(t, intentSpec{org: o2.ID})
	b2 := x.req(t, "POST", pathBind, o2.Key, map[string]any{"signed_intent": s2}, nil).want(t, http.StatusOK)
	wantFailedClaim(t, x.claim(t, pathClaim, b2.str("execution_token"), b2.str("intent_hash")), "GRANT_INVALID")

	// None of it consumed the real grant.
	c := x.claimed(t, g)
	// Finalization checks the grant's signature too.
	for _, n := range []string{"alg none", "HS256 with public key", "attacker key, real kid", "embedded jwk, real kid"} {
		r := x.finalize(t, attacks[n], c.str("claim_token"), "COMMITTED", nil)
		if r.Status != http.StatusConflict || r.str("code") != "GRANT_INVALID" {
			t.Fatalf("finalize with %s: %s", n, r)
		}
	}
	x.finalize(t, b2.str("execution_token"), c.str("claim_token"), "COMMITTED", nil).wantProblem(t, http.StatusConflict, "GRANT_INVALID")
	x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	x.ledgerOK(t)
}

// ---------------------------------------------------------------------------
// Concurrency

func TestExecConcurrentHTTPClaimsOneWinner(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	g := x.grantFor(t, intentSpec{})
	const n = 64
	results := make([]*result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		path := pathClaim
		if i%2 == 1 {
			path = pathConsume
		}
		wg.Go(func() {
			<-start
			results[i], errs[i] = x.send("POST", path, x.o.Key, map[string]any{"execution_token": g.token, "intent_hash": g.hash}, nil)
		})
	}
	close(start)
	wg.Wait()
	wins, losses := 0, 0
	var winner *result
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		switch {
		case r.Status == http.StatusOK && lookup(r.JSON, "should_execute") == true:
			wins++
			winner = r
		case r.Status == http.StatusConflict:
			wantFailedClaim(t, r, "")
			if c := r.str("code"); c != "CLAIM_REPLAY" {
				t.Errorf("loser code %s: %s", c, r)
			}
			losses++
		default:
			t.Errorf("unexpected: %s", r)
		}
	}
	if wins != 1 || losses != n-1 {
		t.Fatalf("wins %d losses %d", wins, losses)
	}
	x.finalize(t, g.token, winner.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	x.ledgerOK(t)
}

// ---------------------------------------------------------------------------
// Signing key rotation

func TestExecKeyRotation(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	kidA := x.ring.Active().KID()
	if kids := jwksKIDs(x.fetchJWKS(t)); !slices.Equal(kids, []string{kidA}) {
		t.Fatalf("JWKS %v", kids)
	}
	old := x.grantFor(t, intentSpec{})
	late := x.grantFor(t, intentSpec{})
	never := x.grantFor(t, intentSpec{})
	x.ledgerOK(t)

	// Rotate and restart the server on the same data.
	keyB := mustKey(t, 9)
	const drain = 150 * time.Second
	x.reopen(x.ring.Rotate(keyB, x.clock(), drain))
	set := x.fetchJWKS(t)
	if kids := jwksKIDs(set); !slices.Equal(kids, []string{keyB.KID(), kidA}) {
		t.Fatalf("JWKS after rotation %v, want [%s %s]", kids, keyB.KID(), kidA)
	}
	// A grant signed by A still verifies (offline too) and claims.
	if _, kid := verifyOffline(t, old.token, grant.TypGrant, set); kid != kidA {
		t.Fatalf("old grant kid %q", kid)
	}
	x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": old.token, "intent_hash": old.hash}, nil).
		want(t, http.StatusOK)
	c := x.claimed(t, old)
	if _, kid := verifyOffline(t, c.str("claim_attestation"), grant.TypAttestation, set); kid != keyB.KID() {
		t.Fatalf("attestation after rotation signed by %q", kid)
	}
	x.finalize(t, old.token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	// New grants are signed by B.
	fresh := x.grantFor(t, intentSpec{})
	if _, kid := verifyOffline(t, fresh.token, grant.TypGrant, set); kid != keyB.KID() {
		t.Fatalf("new grant kid %q", kid)
	}
	// Just before A's grants expire, one still claims and finalizes.
	x.advance(119 * time.Second)
	cl := x.claimed(t, late)
	if kids := jwksKIDs(x.fetchJWKS(t)); !slices.Equal(kids, []string{keyB.KID(), kidA}) {
		t.Fatalf("JWKS while draining %v", kids)
	}
	x.advance(20 * time.Second)
	x.finalize(t, late.token, cl.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)

	// After the drain only B is published.
	x.advance(drain - 139*time.Second)
	if kids := jwksKIDs(x.fetchJWKS(t)); !slices.Equal(kids, []string{keyB.KID()}) {
		t.Fatalf("JWKS after the drain %v, want [%s]", kids, keyB.KID())
	}
	// Past its keep-until A verifies nothing, pruned or not.
	wantFailedClaim(t, x.claim(t, pathClaim, never.token, never.hash), "GRANT_INVALID")
	x.reopen(x.ring.Prune(x.clock()))
	x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": never.token, "intent_hash": never.hash}, nil).
		wantProblem(t, http.StatusConflict, "GRANT_INVALID")
	g := x.grantFor(t, intentSpec{})
	x.claimed(t, g)
	x.ledgerOK(t)
}

// A running server takes a new key ring at once, without a restart: after a
// rotation it signs with the new key and still accepts the old one while it
// drains; once the old key is revoked, its grants are refused at every
// route, and the JWKS and health say which keys are in use.
func TestExecKeyRingSwapWithoutRestart(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	keyA, keyB, keyC := x.ring.Active(), mustKey(t, 9), mustKey(t, 10)
	healthKID := func() string {
		t.Helper()
		return x.req(t, "GET", pathHealth, "", nil, nil).want(t, http.StatusOK).str("keys.grant")
	}
	if got := healthKID(); got != keyA.KID() {
		t.Fatalf("health grant kid %q, want %s", got, keyA.KID())
	}
	byA1, byA2, byA3 := x.grantFor(t, intentSpec{}), x.grantFor(t, intentSpec{}), x.grantFor(t, intentSpec{})

	rotated := x.ring.Rotate(keyB, x.clock(), 150*time.Second)
	x.engine.SetGrantKeys(rotated)
	if kids := jwksKIDs(x.fetchJWKS(t)); !slices.Equal(kids, []string{keyB.KID(), keyA.KID()}) {
		t.Fatalf("JWKS after the swap %v, want [%s %s]", kids, keyB.KID(), keyA.KID())
	}
	if got := healthKID(); got != keyB.KID() {
		t.Fatalf("health grant kid after the swap %q, want %s", got, keyB.KID())
	}
	fresh := x.grantFor(t, intentSpec{})
	if _, kid := verifyOffline(t, fresh.token, grant.TypGrant, x.fetchJWKS(t)); kid != keyB.KID() {
		t.Fatalf("grant after the swap signed by %q, want %s", kid, keyB.KID())
	}
	x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": byA1.token, "intent_hash": byA1.hash}, nil).
		want(t, http.StatusOK)
	claimedByA := x.claimed(t, byA2)

	// A leaked: revoked, refused at once though its drain has not ended.
	revoked, err := rotated.Revoke(keyA.KID(), x.clock())
	if err != nil {
		t.Fatal(err)
	}
	x.engine.SetGrantKeys(revoked)
	if kids := jwksKIDs(x.fetchJWKS(t)); !slices.Equal(kids, []string{keyB.KID()}) {
		t.Fatalf("JWKS after revoking A %v, want [%s]", kids, keyB.KID())
	}
	x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": byA1.token, "intent_hash": byA1.hash}, nil).
		wantProblem(t, http.StatusConflict, "GRANT_INVALID")
	wantFailedClaim(t, x.claim(t, pathClaim, byA3.token, byA3.hash), "GRANT_INVALID")
	wantFailedClaim(t, x.claim(t, pathConsume, byA3.token, byA3.hash), "GRANT_INVALID")
	fin := x.finalize(t, byA2.token, claimedByA.str("claim_token"), "COMMITTED", nil)
	fin.wantProblem(t, http.StatusConflict, "GRANT_INVALID")
	neverExecutes(t, fin)
	x.claimed(t, fresh)

	// B leaked too, while active: C becomes active and B is refused.
	leaked, err := revoked.Rotate(keyC, x.clock(), 0).Revoke(keyB.KID(), x.clock())
	if err != nil {
		t.Fatal(err)
	}
	x.engine.SetGrantKeys(leaked)
	if kids := jwksKIDs(x.fetchJWKS(t)); !slices.Equal(kids, []string{keyC.KID()}) {
		t.Fatalf("JWKS after revoking the active key %v, want [%s]", kids, keyC.KID())
	}
	if got := healthKID(); got != keyC.KID() {
		t.Fatalf("health grant kid %q, want %s", got, keyC.KID())
	}
	late := x.grantFor(t, intentSpec{})
	x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": fresh.token, "intent_hash": fresh.hash}, nil).
		wantProblem(t, http.StatusConflict, "GRANT_INVALID")
	c := x.claimed(t, late)
	if _, kid := verifyOffline(t, c.str("claim_attestation"), grant.TypAttestation, x.fetchJWKS(t)); kid != keyC.KID() {
		t.Fatalf("attestation signed by %q, want %s", kid, keyC.KID())
	}
	x.finalize(t, late.token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	x.ledgerOK(t)
}

// A revocation written to the store reaches a server whose own copy of the
// key file still holds the key, without a restart: once the server rereads
// the revocations, a retired revoked key verifies nothing and leaves the
// JWKS, and a revoked ACTIVE key signs nothing (503 SIGNING_KEY_REVOKED,
// health degraded) until the server's ring is rotated to a fresh key.
func TestExecStoreRevocationReachesEveryServer(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	keyA, keyB, keyC := x.ring.Active(), mustKey(t, 9), mustKey(t, 10)
	byA := x.grantFor(t, intentSpec{})
	// This server's copy of the file: B active, A retired and draining.
	rotated := x.ring.Rotate(keyB, x.clock(), 150*time.Second)
	x.engine.SetGrantKeys(rotated)
	byB := x.grantFor(t, intentSpec{})
	verify := func(g issued) *result {
		t.Helper()
		return x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": g.token, "intent_hash": g.hash}, nil)
	}
	verify(byA).want(t, http.StatusOK)

	// Another server on the same database (its own copy of the file)
	// revokes the retired key A there.
	peer, err := clearance.Open(x.store, clearance.Options{Now: x.clock, GrantKeys: rotated})
	if err != nil {
		t.Fatal(err)
	}
	if err := peer.Admin.RevokeGrantKey(t.Context(), keyA.KID()); err != nil {
		t.Fatal(err)
	}
	if err := x.engine.Admin.RefreshKeyRevocations(t.Context()); err != nil {
		t.Fatal(err)
	}
	verify(byA).wantProblem(t, http.StatusConflict, "GRANT_INVALID")
	wantFailedClaim(t, x.claim(t, pathClaim, byA.token, byA.hash), "GRANT_INVALID")
	if kids := jwksKIDs(x.fetchJWKS(t)); !slices.Equal(kids, []string{keyB.KID()}) {
		t.Fatalf("JWKS after revoking A in the store %v, want [%s]", kids, keyB.KID())
	}
	x.claimed(t, byB)
	byB2 := x.grantFor(t, intentSpec{})

	// The active key B leaks: revoked in the store while this server's
	// file still names it active.
	if err := peer.Admin.RevokeGrantKey(t.Context(), keyB.KID()); err != nil {
		t.Fatal(err)
	}
	if err := x.engine.Admin.RefreshKeyRevocations(t.Context()); err != nil {
		t.Fatal(err)
	}
	head := x.head(x.o.Key)
	jws, _ := x.intent(t, intentSpec{})
	refused := x.bind(t, jws, nil).wantProblem(t, http.StatusServiceUnavailable, clearance.CodeSigningKeyRevoked)
	if refused.str("execution_token") != "" || refused.str("grant_id") != "" {
		t.Fatalf("a refused bind carries a grant: %s", refused)
	}
	x.req(t, "POST", "/v1/protocol/evaluate-decision", x.o.Key, map[string]any{"decision_type": "PAYMENT", "amount": 1},
		map[string]string{"User-Agent": pipelineUA}).wantProblem(t, http.StatusServiceUnavailable, clearance.CodeSigningKeyRevoked)
	if got := x.head(x.o.Key); got != head {
		t.Fatalf("refused requests recorded %d ledger entries", got-head)
	}
	verify(byB2).wantProblem(t, http.StatusConflict, "GRANT_INVALID")
	wantFailedClaim(t, x.claim(t, pathClaim, byB2.token, byB2.hash), "GRANT_INVALID")
	if kids := jwksKIDs(x.fetchJWKS(t)); len(kids) != 0 {
		t.Fatalf("JWKS with every key revoked %v, want none", kids)
	}
	h := x.req(t, "GET", pathHealth, "", nil, nil).want(t, http.StatusServiceUnavailable)
	if h.str("status") != "degraded" || h.str("grant_key") != "revoked" {
		t.Fatalf("health with the active key revoked: %s", h)
	}
	// Reloading a stale copy of the file changes nothing: still revoked.
	x.engine.SetGrantKeys(rotated)
	x.bind(t, jws, nil).wantProblem(t, http.StatusServiceUnavailable, clearance.CodeSigningKeyRevoked)

	// The file is rotated to C: this server signs again, and neither A
	// nor B comes back though the ring still lists B as retired.
	x.engine.SetGrantKeys(rotated.Rotate(keyC, x.clock(), 150*time.Second))
	if h := x.req(t, "GET", pathHealth, "", nil, nil).want(t, http.StatusOK); h.str("status") != "ok" || h.str("grant_key") != "" {
		t.Fatalf("health after the rotation: %s", h)
	}
	set := x.fetchJWKS(t)
	if kids := jwksKIDs(set); !slices.Equal(kids, []string{keyC.KID()}) {
		t.Fatalf("JWKS after rotating to C %v, want [%s]", kids, keyC.KID())
	}
	byC := x.grantFor(t, intentSpec{})
	if _, kid := verifyOffline(t, byC.token, grant.TypGrant, set); kid != keyC.KID() {
		t.Fatalf("grant after the rotation signed by %q, want %s", kid, keyC.KID())
	}
	x.claimed(t, byC)
	verify(byB2).wantProblem(t, http.StatusConflict, "GRANT_INVALID")
	x.ledgerOK(t)
}

// ---------------------------------------------------------------------------
// Provider (and agent) key registries

func TestExecProviderKeys(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	kid := x.provider.KID()
	list := func() *result {
		r := x.req(t, "GET", pathProvKeys, x.o.Key, nil, nil).want(t, http.StatusOK)
		if strings.Contains(string(r.Raw), `"d"`) || r.str("org_id") != x.o.ID {
			t.Fatalf("provider key list: %s", r)
		}
		return r
	}
	keyOf := func(r *result, kid string) map[string]any {
		for _, k := range lookup(r.JSON, "keys").([]any) {
			if m := k.(map[string]any); m["kid"] == kid {
				return m
			}
		}
		t.Fatalf("kid %s not listed: %s", kid, r)
		return nil
	}
	k := keyOf(list(), kid)
	if k["status"] != "ACTIVE" || k["iss"] != "psp.example" || k["revoked_at"] != nil || k["kind"] != "provider" {
		t.Fatalf("registered key %v", k)
	}
	// The same registration again is harmless; another key under an ACTIVE kid is not.
	x.registerKey(t, pathProvKeys, x.o.Key, x.provider, "psp.example").want(t, http.StatusOK)
	other := mustKey(t, 4)
	x.req(t, "POST", pathProvKeys, x.o.Key, map[string]any{"kid": kid, "iss": "psp.example", "public_jwk": bareJWK(other)}, nil).
		wantProblem(t, http.StatusConflict, "KID_IN_USE")

	d := x.req(t, "DELETE", pathProvKeys+"/"+kid, x.o.Key, nil, nil).want(t, http.StatusOK)
	if d.str("status") != "REVOKED" || d.str("revoked_at") == "" {
		t.Fatalf("revoke: %s", d)
	}
	k = keyOf(list(), kid)
	if k["status"] != "REVOKED" || k["revoked_at"] == nil || k["public_jwk"] == nil {
		t.Fatalf("revoked key listed %v", k)
	}
	x.req(t, "DELETE", pathProvKeys+"/"+kid, x.o.Key, nil, nil).want(t, http.StatusOK)
	x.req(t, "DELETE", pathProvKeys+"/no-such-kid", x.o.Key, nil, nil).wantProblem(t, http.StatusNotFound, "KEY_NOT_FOUND")

	// Registering the revoked kid again (with a new key) reactivates it.
	re := x.req(t, "POST", pathProvKeys, x.o.Key, map[string]any{"kid": kid, "iss": "psp.example", "public_jwk": bareJWK(other)}, nil).
		want(t, http.StatusCreated)
	if re.str("status") != "ACTIVE" || lookup(re.JSON, "revoked_at") != nil {
		t.Fatalf("re-registered key: %s", re)
	}
	if k = keyOf(list(), kid); k["status"] != "ACTIVE" || k["revoked_at"] != nil {
		t.Fatalf("re-registered key listed %v", k)
	}

	// Refused JWKs.
	pub := other.Public()
	low := make([]byte, 32)
	low[0] = 0x01
	for _, c := range []struct {
		name string
		jwk  any
		code string
	}{
		{"private d", map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(pub), "d": b64(testSeed(4))}, "PRIVATE_KEY_MATERIAL"},
		{"private D", map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(pub), "D": b64(testSeed(4))}, "PRIVATE_KEY_MATERIAL"},
		{"31 bytes", map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(pub[:31])}, "INVALID_PUBLIC_KEY"},
		{"33 bytes", map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(append(slices.Clone(pub), 0))}, "INVALID_PUBLIC_KEY"},
		{"low order", map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(low)}, "WEAK_PUBLIC_KEY"},
		{"X25519", map[string]any{"kty": "OKP", "crv": "X25519", "x": b64(pub)}, "INVALID_PUBLIC_KEY"},
		{"not an object", "key", "INVALID_PUBLIC_KEY"},
	} {
		r := x.req(t, "POST", pathProvKeys, x.o.Key, map[string]any{"kid": "bad-" + strings.ReplaceAll(c.name, " ", "-"), "public_jwk": c.jwk}, nil)
		r.wantProblem(t, http.StatusBadRequest, c.code)
	}
	x.req(t, "POST", pathProvKeys, x.o.Key, map[string]any{"kid": "", "public_jwk": pub}, nil).want(t, http.StatusBadRequest)

	// Scopes: registering needs policy:write (or org:*).
	writer := x.createKey(x.o, "decision:write")
	x.req(t, "POST", pathProvKeys, writer, map[string]any{"kid": "w", "public_jwk": bareJWK(mustKey(t, 5))}, nil).
		wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.req(t, "POST", pathAgentKeys, writer, map[string]any{"kid": "w", "public_jwk": bareJWK(mustKey(t, 5))}, nil).
		wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.req(t, "DELETE", pathProvKeys+"/"+kid, writer, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.req(t, "GET", pathProvKeys, writer, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	reader := x.createKey(x.o, "policy:read")
	x.req(t, "GET", pathProvKeys, reader, nil, nil).want(t, http.StatusOK)
	x.req(t, "POST", pathProvKeys, reader, map[string]any{"kid": "r", "public_jwk": bareJWK(mustKey(t, 5))}, nil).
		wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	policyWriter := x.createKey(x.o, "policy:write")
	x.req(t, "POST", pathProvKeys, policyWriter, map[string]any{"kid": "pw", "public_jwk": bareJWK(mustKey(t, 5))}, nil).
		want(t, http.StatusCreated)
	x.req(t, "GET", pathProvKeys, "", nil, nil).want(t, http.StatusUnauthorized)

	// Registries are per org.
	o2 := x.createOrg("Other")
	if r := x.req(t, "GET", pathProvKeys, o2.Key, nil, nil).want(t, http.StatusOK); len(lookup(r.JSON, "keys").([]any)) != 0 {
		t.Fatalf("another org sees keys: %s", r)
	}
	x.req(t, "DELETE", pathProvKeys+"/"+kid, o2.Key, nil, nil).wantProblem(t, http.StatusNotFound, "KEY_NOT_FOUND")
	x.ledgerOK(t)
}

// ---------------------------------------------------------------------------
// Receipts at finalization

func TestExecReceipts(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	effect := effectDigestOf("refund-77")
	receipt := func(t *testing.T, k grant.Key, g issued, digest string) map[string]any {
		t.Helper()
		s, err := grant.SignReceipt(k, grant.ReceiptClaims{Issuer: "psp.example", GrantID: g.grantID, IntentHash: g.hash,
			EffectDigest: digest, Outcome: "COMMITTED", IssuedAt: x.clock().Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return map[string]any{"profile": "VP-3", "receipt": s}
	}
	claimedGrant := func(t *testing.T) (issued, string) {
		g := x.grantFor(t, intentSpec{effect: effect})
		return g, x.claimed(t, g).str("claim_token")
	}

	t.Run("verified receipt confirms", func(t *testing.T) {
		g, ct := claimedGrant(t)
		r := x.finalize(t, g.token, ct, "COMMITTED", map[string]any{"effect_receipt": receipt(t, x.provider, g, effect)}).want(t, http.StatusOK)
		if lookup(r.JSON, "effect_confirmed") != true || r.str("evidence.kind") != "SIGNED_RECEIPT" || r.str("evidence.status") != "CONFIRMED" ||
			r.str("evidence.effect_digest") != effect || lookup(r.JSON, "receipt_verification.verified") != true ||
			r.str("receipt_verification.kid") != x.provider.KID() || r.str("receipt_verification.iss") != "psp.example" {
			t.Fatalf("finalize with a verified receipt: %s", r)
		}
	})
	t.Run("unregistered provider key", func(t *testing.T) {
		g, ct := claimedGrant(t)
		r := x.finalize(t, g.token, ct, "COMMITTED", map[string]any{"effect_receipt": receipt(t, mustKey(t, 77), g, effect)}).want(t, http.StatusOK)
		if lookup(r.JSON, "effect_confirmed") != false || lookup(r.JSON, "receipt_verification.verified") != false ||
			r.str("receipt_verification.reason") == "" || lookup(r.JSON, "evidence") != nil {
			t.Fatalf("finalize with an unverifiable receipt: %s", r)
		}
	})
	t.Run("receipt for another grant", func(t *testing.T) {
		g, ct := claimedGrant(t)
		h, _ := x.claimedGrantOther(t, effect)
		r := x.finalize(t, g.token, ct, "COMMITTED", map[string]any{"effect_receipt": receipt(t, x.provider, h, effect)}).want(t, http.StatusOK)
		if lookup(r.JSON, "effect_confirmed") != false || lookup(r.JSON, "receipt_verification.verified") != false {
			t.Fatalf("a receipt naming another grant confirmed: %s", r)
		}
	})
	t.Run("digest mismatch", func(t *testing.T) {
		g, ct := claimedGrant(t)
		r := x.finalize(t, g.token, ct, "COMMITTED", map[string]any{"effect_receipt": receipt(t, x.provider, g, effectDigestOf("other"))}).
			want(t, http.StatusOK)
		if lookup(r.JSON, "effect_confirmed") != false || r.str("evidence.status") != "DIGEST_MISMATCH" {
			t.Fatalf("digest mismatch: %s", r)
		}
	})
	t.Run("explicit evidence wins", func(t *testing.T) {
		g, ct := claimedGrant(t)
		r := x.finalize(t, g.token, ct, "COMMITTED", map[string]any{
			"effect_receipt":  receipt(t, x.provider, g, effect),
			"effect_evidence": map[string]any{"kind": "PROVIDER_API", "status": "PENDING", "effect_digest": effect},
		}).want(t, http.StatusOK)
		if lookup(r.JSON, "effect_confirmed") != false || r.str("evidence.kind") != "PROVIDER_API" || r.str("evidence.source") != "effect_evidence" ||
			lookup(r.JSON, "receipt_verification.verified") != true {
			t.Fatalf("explicit evidence must take precedence: %s", r)
		}
	})
	t.Run("profile other than VP-3", func(t *testing.T) {
		// Never a reason to refuse finalization: recorded as presented, unverified.
		for _, p := range []string{"VP-2", "vp-3", ""} {
			g, ct := claimedGrant(t)
			rc := receipt(t, x.provider, g, effect)
			rc["profile"] = p
			r := x.finalize(t, g.token, ct, "COMMITTED", map[string]any{"effect_receipt": rc}).want(t, http.StatusOK)
			if r.str("outcome") != "COMMITTED" || lookup(r.JSON, "effect_confirmed") != false || lookup(r.JSON, "evidence") != nil ||
				lookup(r.JSON, "receipt_verification.verified") != false || r.str("receipt_verification.profile") != p ||
				r.str("receipt_verification.receipt") != rc["receipt"] || !strings.Contains(r.str("receipt_verification.reason"), "profile") {
				t.Fatalf("finalize with a %q receipt: %s", p, r)
			}
		}
	})
	t.Run("revoked provider key", func(t *testing.T) {
		g, ct := claimedGrant(t)
		x.req(t, "DELETE", pathProvKeys+"/"+x.provider.KID(), x.o.Key, nil, nil).want(t, http.StatusOK)
		r := x.finalize(t, g.token, ct, "COMMITTED", map[string]any{"effect_receipt": receipt(t, x.provider, g, effect)}).want(t, http.StatusOK)
		if lookup(r.JSON, "effect_confirmed") != false || lookup(r.JSON, "receipt_verification.verified") != false {
			t.Fatalf("a revoked key's receipt verified: %s", r)
		}
	})
	x.ledgerOK(t)
}

// claimedGrantOther is a claimed grant with an expected effect (for
// receipts that name it).
func (x *execEnv) claimedGrantOther(t testing.TB, effect string) (issued, string) {
	t.Helper()
	g := x.grantFor(t, intentSpec{effect: effect})
	return g, x.claimed(t, g).str("claim_token")
}

// ---------------------------------------------------------------------------
// Reconciliation

func TestExecReconciliation(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	effect := effectDigestOf("refund-9")
	list := func() []any {
		r := x.req(t, "GET", pathReconcile, x.o.Key, nil, nil).want(t, http.StatusOK)
		l, _ := lookup(r.JSON, "executions").([]any)
		return l
	}
	if l := list(); len(l) != 0 {
		t.Fatalf("nothing to reconcile yet: %v", l)
	}
	g := x.grantFor(t, intentSpec{effect: effect})
	c := x.claimed(t, g)
	x.advance(30 * time.Second)
	r := x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil)
	if r.Status != http.StatusConflict || r.str("outcome") != "INDETERMINATE" || r.str("code") != "CLAIM_LEASE_EXPIRED" {
		t.Fatalf("lease-expired finalize: %s", r)
	}
	l := list()
	if len(l) != 1 || lookup(l[0], "grant_id") != g.grantID || lookup(l[0], "state") != "INDETERMINATE" ||
		lookup(l[0], "final_code") != "CLAIM_LEASE_EXPIRED" {
		t.Fatalf("reconciliation list: %v", l)
	}
	// Reconciling needs audit:write or decision:write; listing audit:read or decision:read.
	auditReader := x.createKey(x.o, "audit:read")
	x.req(t, "GET", pathReconcile, auditReader, nil, nil).want(t, http.StatusOK)
	x.req(t, "POST", pathReconcile+"/"+g.grantID, auditReader, map[string]any{"resolution": "COMMITTED"}, nil).
		wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")

	x.req(t, "POST", pathReconcile+"/"+g.grantID, x.o.Key, map[string]any{"resolution": "INDETERMINATE"}, nil).
		wantProblem(t, http.StatusBadRequest, "INVALID_FINALIZATION")
	x.req(t, "POST", pathReconcile+"/no-such-grant", x.o.Key, map[string]any{"resolution": "COMMITTED"}, nil).
		wantProblem(t, http.StatusNotFound, "GRANT_NOT_FOUND")
	rec := x.req(t, "POST", pathReconcile+"/"+g.grantID, x.o.Key, map[string]any{
		"resolution":      "COMMITTED",
		"effect_evidence": map[string]any{"kind": "PROVIDER_API", "status": "CONFIRMED", "effect_digest": effect},
		"note":            "provider confirmed by phone",
	}, nil).want(t, http.StatusOK)
	if rec.str("state") != "COMMITTED" || rec.str("reconciliation.resolution") != "COMMITTED" ||
		lookup(rec.JSON, "reconciliation.effect_confirmed") != true || rec.str("final_code") != "CLAIM_LEASE_EXPIRED" {
		t.Fatalf("reconcile: %s", rec)
	}
	for _, secret := range []string{g.token, c.str("claim_token"), `"execution_token"`, `"claim_token"`, `"claim_attestation"`} {
		if strings.Contains(string(rec.Raw), secret) {
			t.Fatalf("a reconciliation answer carries a token (%.20s…): %s", secret, rec)
		}
	}
	if l := list(); len(l) != 0 {
		t.Fatalf("reconciled grant still listed: %v", l)
	}
	// Reconciliation never re-authorizes.
	wantFailedClaim(t, x.claim(t, pathClaim, g.token, g.hash), "CLAIM_REPLAY")
	x.req(t, "POST", pathReconcile+"/"+g.grantID, x.o.Key, map[string]any{"resolution": "FAILED"}, nil).
		wantProblem(t, http.StatusConflict, "NOT_INDETERMINATE")

	// A grant finalized COMMITTED (or still claimed, or issued) is not reconcilable.
	h := x.grantFor(t, intentSpec{})
	x.req(t, "POST", pathReconcile+"/"+h.grantID, x.o.Key, map[string]any{"resolution": "COMMITTED"}, nil).
		wantProblem(t, http.StatusConflict, "NOT_INDETERMINATE")
	ch := x.claimed(t, h)
	x.req(t, "POST", pathReconcile+"/"+h.grantID, x.o.Key, map[string]any{"resolution": "COMMITTED"}, nil).
		wantProblem(t, http.StatusConflict, "NOT_INDETERMINATE")
	x.finalize(t, h.token, ch.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	x.req(t, "POST", pathReconcile+"/"+h.grantID, x.o.Key, map[string]any{"resolution": "COMMITTED"}, nil).
		wantProblem(t, http.StatusConflict, "NOT_INDETERMINATE")
	// Another org cannot see or settle this org's executions.
	o2 := x.createOrg("Other")
	if r := x.req(t, "GET", pathReconcile, o2.Key, nil, nil).want(t, http.StatusOK); len(lookup(r.JSON, "executions").([]any)) != 0 {
		t.Fatalf("another org lists executions: %s", r)
	}
	x.ledgerOK(t)
}

// TestExecReconciliationListingDoesNotWrite: the GET lists a lapsed claim
// as it will be recorded (finalized at its lease end) without recording
// it; ExpireLapsed records it with one ledger entry and the listing stays
// the same. Neither answer carries the stored token digest.
func TestExecReconciliationListingDoesNotWrite(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	g := x.grantFor(t, intentSpec{})
	leaseEnd, err := time.Parse(time.RFC3339Nano, x.claimed(t, g).str("claim_lease_expires_at"))
	if err != nil {
		t.Fatal(err)
	}
	x.advance(45 * time.Second) // the executor never finalizes
	head := x.head(x.o.Key)
	first := x.req(t, "GET", pathReconcile, x.o.Key, nil, nil).want(t, http.StatusOK)
	at, _ := time.Parse(time.RFC3339Nano, first.str("executions.0.finalized_at"))
	if first.str("executions.0.grant_id") != g.grantID || first.str("executions.0.state") != "INDETERMINATE" ||
		first.str("executions.0.final_code") != "CLAIM_LEASE_EXPIRED" || lookup(first.JSON, "executions.0.lapsed") != true ||
		!at.Equal(leaseEnd) {
		t.Fatalf("lapsed claim listed as %s; want INDETERMINATE, finalized at the lease end %s", first, leaseEnd)
	}
	if h := x.head(x.o.Key); h != head {
		t.Fatalf("the listing moved the ledger head %d -> %d", head, h)
	}
	if st, err := x.store.GrantOf(t.Context(), x.o.ID, g.grantID); err != nil || st.State != "CLAIMED" {
		t.Fatalf("the listing changed the grant: %s %v", st.State, err)
	}
	o2 := x.createOrg("Other")
	if r := x.req(t, "GET", pathReconcile, o2.Key, nil, nil).want(t, http.StatusOK); len(lookup(r.JSON, "executions").([]any)) != 0 {
		t.Fatalf("another org lists this org's lapsed claim: %s", r)
	}

	if n, err := x.engine.Execution.ExpireLapsed(t.Context(), x.o.ID); err != nil || n != 1 {
		t.Fatalf("ExpireLapsed = %d, %v", n, err)
	}
	if h := x.head(x.o.Key); h != head+1 {
		t.Fatalf("ExpireLapsed moved the ledger head %d -> %d, want one entry", head, h)
	}
	if e := x.entries(x.o.Key); e[len(e)-1]["kind"] != "execution.finalized" || e[len(e)-1]["subject_id"] != g.grantID {
		t.Fatalf("last entry %v, want the grant's finalization", e[len(e)-1])
	}
	second := x.req(t, "GET", pathReconcile, x.o.Key, nil, nil).want(t, http.StatusOK)
	if !reflect.DeepEqual(first.JSON["executions"], second.JSON["executions"]) {
		t.Fatalf("the listing changed once the lapse was recorded:\nbefore %s\nafter  %s", first, second)
	}
	rec := x.req(t, "POST", pathReconcile+"/"+g.grantID, x.o.Key, map[string]any{"resolution": "FAILED"}, nil).want(t, http.StatusOK)
	for _, r := range []*result{first, rec} {
		if strings.Contains(string(r.Raw), `"token_digest"`) {
			t.Fatalf("a reconciliation answer carries the stored token digest: %s", r)
		}
	}
	x.ledgerOK(t)
}

// ---------------------------------------------------------------------------
// Bad JSON on every execution POST route

func TestExecBadJSONOnEveryPostRoute(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	jws, _ := x.intent(t, intentSpec{})
	rg := x.grantFor(t, intentSpec{}) // INDETERMINATE: reconcile bodies target it
	rc := x.claimed(t, rg).str("claim_token")
	x.advance(30 * time.Second)
	x.finalize(t, rg.token, rc, "COMMITTED", nil).want(t, http.StatusConflict)
	g := x.grantFor(t, intentSpec{})   // stays ISSUED through the attacks
	fg2 := x.grantFor(t, intentSpec{}) // claimed, lease live: finalize bodies target it
	fc2 := x.claimed(t, fg2).str("claim_token")

	tok, hash := fmt.Sprintf("%q", g.token), fmt.Sprintf("%q", g.hash)
	ftok, fclaim := fmt.Sprintf("%q", fg2.token), fmt.Sprintf("%q", fc2)
	jwk, _ := json.Marshal(mustKey(t, 50).PublicJWK())
	type route struct {
		name, path string
		bodies     map[string]string // kind -> body
	}
	tokenBodies := map[string]string{
		"duplicate member":    `{"execution_token":` + tok + `,"intent_hash":` + hash + `,"intent_hash":` + hash + `}`,
		"duplicate token":     `{"execution_token":"x","intent_hash":` + hash + `,"execution_token":` + tok + `}`,
		"case-variant member": `{"execution_token":"x","intent_hash":` + hash + `,"EXECUTION_TOKEN":` + tok + `}`,
		"unknown member":      `{"execution_token":` + tok + `,"intent_hash":` + hash + `,"force":true}`,
		"wrong type":          `{"execution_token":` + tok + `,"intent_hash":5}`,
		"wrong type token":    `{"execution_token":[` + tok + `],"intent_hash":` + hash + `}`,
		"null body":           `null`,
		"array body":          `[` + tok + `]`,
		"trailing data":       `{"execution_token":` + tok + `,"intent_hash":` + hash + `} {}`,
		"malformed":           `{"execution_token":` + tok + `,"intent_hash":`,
		"invalid utf-8":       "{\"execution_token\":" + tok + ",\"intent_hash\":" + hash + ",\"correlation_id\":\"\xff\"}",
		"empty":               ``,
	}
	routes := []route{
		{"enforce-and-bind", pathBind, map[string]string{
			"malformed":        `{"signed_intent":"` + jws,
			"duplicate member": `{"signed_intent":"` + jws + `","signed_intent":"` + jws + `"}`,
			"unknown member":   `{"signed_intent":"` + jws + `","grant":true}`,
			"wrong type":       `{"signed_intent":5}`,
			"wrong type mode":  `{"signed_intent":"` + jws + `","mode":1}`,
			"array body":       `["` + jws + `"]`,
			"null body":        `null`,
		}},
		{"verify-token", pathVerifyToken, tokenBodies},
		{"claim-token", pathClaim, tokenBodies},
		{"consume-token", pathConsume, tokenBodies},
		{"finalize-token", pathFinalize, map[string]string{
			"malformed":        `{"execution_token":` + ftok + `,"claim_token":` + fclaim,
			"duplicate member": `{"execution_token":` + ftok + `,"claim_token":` + fclaim + `,"outcome":"FAILED","outcome":"COMMITTED"}`,
			"unknown member":   `{"execution_token":` + ftok + `,"claim_token":` + fclaim + `,"outcome":"COMMITTED","effect_confirmed":true}`,
			"wrong type":       `{"execution_token":` + ftok + `,"claim_token":` + fclaim + `,"outcome":1}`,
			"wrong type evidence": `{"execution_token":` + ftok + `,"claim_token":` + fclaim +
				`,"outcome":"COMMITTED","effect_evidence":"CONFIRMED"}`,
			"nested unknown": `{"execution_token":` + ftok + `,"claim_token":` + fclaim +
				`,"outcome":"COMMITTED","effect_evidence":{"kind":"X","status":"CONFIRMED","effect_digest":"` + sha256Digest(nil) + `","confirmed":true}}`,
			"nested duplicate": `{"execution_token":` + ftok + `,"claim_token":` + fclaim +
				`,"outcome":"COMMITTED","effect_receipt":{"profile":"VP-3","profile":"VP-3","receipt":"x"}}`,
		}},
		{"agent-keys", pathAgentKeys, map[string]string{
			"malformed":        `{"kid":"k","public_jwk":` + string(jwk),
			"duplicate member": `{"kid":"k","kid":"k2","public_jwk":` + string(jwk) + `}`,
			"unknown member":   `{"kid":"k","public_jwk":` + string(jwk) + `,"status":"ACTIVE"}`,
			"wrong type":       `{"kid":5,"public_jwk":` + string(jwk) + `}`,
			"wrong type jwk":   `{"kid":"k","public_jwk":5}`,
			"jwk duplicate":    `{"kid":"k","public_jwk":{"kty":"OKP","crv":"Ed25519","x":"a","x":"b"}}`,
		}},
		{"provider-keys", pathProvKeys, map[string]string{
			"malformed":        `{"kid":"k","public_jwk":` + string(jwk),
			"duplicate member": `{"kid":"k","iss":"a","iss":"b","public_jwk":` + string(jwk) + `}`,
			"unknown member":   `{"kid":"k","public_jwk":` + string(jwk) + `,"d":"AAAA"}`,
			"wrong type":       `{"kid":"k","iss":["a"],"public_jwk":` + string(jwk) + `}`,
			"wrong type jwk":   `{"kid":"k","public_jwk":[]}`,
		}},
		{"reconcile", pathReconcile + "/" + rg.grantID, map[string]string{
			"malformed":        `{"resolution":"COMMITTED"`,
			"duplicate member": `{"resolution":"FAILED","resolution":"COMMITTED"}`,
			"unknown member":   `{"resolution":"COMMITTED","reauthorize":true}`,
			"wrong type":       `{"resolution":true}`,
			"wrong type note":  `{"resolution":"COMMITTED","note":5}`,
		}},
	}
	for _, rt := range routes {
		kinds := make([]string, 0, len(rt.bodies))
		for k := range rt.bodies {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, kind := range kinds {
			r := x.req(t, "POST", rt.path, x.o.Key, rt.bodies[kind], nil)
			if r.Status < 400 || r.Status >= 500 {
				t.Errorf("%s, %s: want 4xx: %s", rt.name, kind, r)
				continue
			}
			neverExecutes(t, r)
			if r.Status == http.StatusBadRequest && r.JSON != nil && r.str("type") != "" {
				checkProblemShape(t, r)
			}
		}
	}
	// Nothing was bound, claimed, finalized, registered or reconciled.
	if r := x.bind(t, jws, nil).want(t, http.StatusOK); r.Header.Get(server.HeaderReplayed) != "" {
		t.Fatalf("a refused body bound the intent: %s", r)
	}
	x.claimed(t, g)
	if r := x.req(t, "GET", pathAgentKeys, x.o.Key, nil, nil); len(lookup(r.JSON, "keys").([]any)) != 1 {
		t.Fatalf("a refused body registered an agent key: %s", r)
	}
	if r := x.req(t, "GET", pathProvKeys, x.o.Key, nil, nil); len(lookup(r.JSON, "keys").([]any)) != 1 {
		t.Fatalf("a refused body registered a provider key: %s", r)
	}
	if f := x.finalize(t, fg2.token, fc2, "FAILED", nil).want(t, http.StatusOK); f.str("outcome") != "FAILED" {
		t.Fatalf("finalize after refused bodies: %s", f)
	}
	x.req(t, "POST", pathReconcile+"/"+rg.grantID, x.o.Key, map[string]any{"resolution": "FAILED"}, nil).want(t, http.StatusOK)
	x.ledgerOK(t)
}

// ---------------------------------------------------------------------------
// Fail-closed paths that need the store changed underneath

// tamperExec stops the server, lets fn edit the database behind the store's
// back (see rawDB) and starts it again with the same key ring.
func (x *execEnv) tamperExec(fn func(db rawDB)) {
	x.t.Helper()
	x.stop()
	withRawDB(x.t, x.dbDir, fn)
	x.open(x.ring)
}

func TestExecTamperedStateFailsClosed(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	// A dossier edited after its grant was issued.
	g := x.grantFor(t, intentSpec{})
	// A claimed grant whose scope record disappears.
	h := x.grantFor(t, intentSpec{scope: "vanishing"})
	ch := x.claimed(t, h)
	x.tamperExec(func(db rawDB) {
		id := g.bind.str("dossier_id")
		v := db.dossierBody(x.o.ID, id)
		i := strings.Index(string(v), `"outcome":"ALLOW"`)
		if i < 0 {
			t.Fatalf("stored dossier body has no ALLOW outcome: %q", v)
		}
		v[i+len(`"outcome":"`)] = 'a' // "aLLOW"
		db.putDossierBody(x.o.ID, id, v)
		db.deleteScopeClaim(x.o.ID, "vanishing")
	})
	wantFailedClaim(t, x.claim(t, pathClaim, g.token, g.hash), "DOSSIER_SIGNATURE_MISMATCH")
	r := x.finalize(t, h.token, ch.str("claim_token"), "COMMITTED", nil)
	if r.Status != http.StatusConflict || r.str("outcome") != "INDETERMINATE" || r.str("code") != "CLAIM_SCOPE_INVARIANT_VIOLATION" {
		t.Fatalf("finalize without the scope record: %s", r)
	}
	l := x.req(t, "GET", pathReconcile, x.o.Key, nil, nil).want(t, http.StatusOK)
	if l.str("executions.0.grant_id") != h.grantID {
		t.Fatalf("reconciliation list: %s", l)
	}
}

func TestExecStoreUnavailableFailsClosed(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	g := x.grantFor(t, intentSpec{})
	h := x.grantFor(t, intentSpec{})
	ch := x.claimed(t, h)
	jws, _ := x.intent(t, intentSpec{})
	if err := x.store.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{pathClaim, pathConsume} {
		r := x.claim(t, p, g.token, g.hash)
		if r.Status != http.StatusServiceUnavailable || lookup(r.JSON, "should_execute") != false || lookup(r.JSON, "claim_token") != nil ||
			r.str("code") != "STORE_UNAVAILABLE" {
			t.Fatalf("claim with a closed store: %s", r)
		}
	}
	x.bind(t, jws, nil).wantProblem(t, http.StatusServiceUnavailable, "STORE_UNAVAILABLE")
	x.finalize(t, h.token, ch.str("claim_token"), "COMMITTED", nil).wantProblem(t, http.StatusServiceUnavailable, "STORE_UNAVAILABLE")
	x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": g.token, "intent_hash": g.hash}, nil).
		wantProblem(t, http.StatusServiceUnavailable, "STORE_UNAVAILABLE")
}

func TestExecSigningNotConfigured(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	g := x.grantFor(t, intentSpec{})
	jws, _ := x.intent(t, intentSpec{})
	// The same data served by an engine without grant keys.
	e := newEnv(t, server.Options{})
	e.stop()
	e.dbDir = x.dbDir
	x.stop()
	e.start()
	e.do("GET", pathJWKS, "", nil, nil).wantProblem(t, http.StatusNotFound, "SIGNING_NOT_CONFIGURED")
	e.do("POST", pathBind, x.o.Key, map[string]any{"signed_intent": jws}, nil).
		wantProblem(t, http.StatusServiceUnavailable, "SIGNING_NOT_CONFIGURED")
	r := e.do("POST", pathClaim, x.o.Key, map[string]any{"execution_token": g.token, "intent_hash": g.hash}, nil)
	if r.Status != http.StatusServiceUnavailable || lookup(r.JSON, "should_execute") != false || r.str("code") != "SIGNING_NOT_CONFIGURED" {
		t.Fatalf("claim without signing keys: %s", r)
	}
	e.stop()
	x.open(x.ring)
	x.claimed(t, g) // nothing was consumed
}

func TestExecCorrelationReachesTheAttestation(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	jws, _ := x.intent(t, intentSpec{})
	b := x.bind(t, jws, map[string]string{server.HeaderCorrelationID: "corr-77"}).want(t, http.StatusOK)
	if b.str("correlation_id") != "corr-77" {
		t.Fatalf("bind correlation: %s", b)
	}
	g := issued{token: b.str("execution_token"), hash: b.str("intent_hash")}
	c := x.req(t, "POST", pathClaim, x.o.Key, map[string]any{"execution_token": g.token, "intent_hash": g.hash, "correlation_id": "claim-1"}, nil).
		want(t, http.StatusOK)
	att, _ := verifyOffline(t, c.str("claim_attestation"), grant.TypAttestation, x.fetchJWKS(t))
	if lookup(att, "binding.corr") != "corr-77" {
		t.Fatalf("attestation binding %v", att["binding"])
	}
	if cc := x.req(t, "GET", pathJWKS, "", nil, nil).Header.Get("Cache-Control"); cc != "public, max-age=60" {
		t.Fatalf("JWKS Cache-Control %q", cc)
	}
	x.bind(t, jws, map[string]string{server.HeaderCorrelationID: "bad corr"}).wantProblem(t, http.StatusBadRequest, "INVALID_CORRELATION_ID")
	x.ledgerOK(t)
}

// ---------------------------------------------------------------------------
// Regressions

// Every kid that registers must also be revocable: a compromised key can
// always be turned off. Kids are ASCII ([A-Za-z0-9._:-], 1 to 200), so a
// kid of 150 non-ASCII characters does not register at all.
func TestExecLongestKIDCanBeRevoked(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	kid := strings.Repeat("k", 199) + ":"
	for _, path := range []string{pathProvKeys, pathAgentKeys} {
		x.req(t, "POST", path, x.o.Key, map[string]any{"kid": kid, "public_jwk": bareJWK(mustKey(t, 21))}, nil).
			want(t, http.StatusCreated)
		r := x.req(t, "DELETE", path+"/"+url.PathEscape(kid), x.o.Key, nil, nil)
		if r.Status != http.StatusOK || r.str("status") != "REVOKED" {
			t.Errorf("%s: a registered kid of 200 characters cannot be revoked: %.300s", path, r)
		}
		x.req(t, "POST", path, x.o.Key, map[string]any{"kid": strings.Repeat("é", 150), "public_jwk": bareJWK(mustKey(t, 22))}, nil).
			wantProblem(t, http.StatusBadRequest, "INVALID_KID")
	}
}

// A provider receipt that itself says outcome FAILED never confirms the
// effect, even when the executor reports COMMITTED: both must say it
// happened.
func TestExecReceiptSayingFailedNeverConfirms(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	effect := effectDigestOf("refund-5")
	g := x.grantFor(t, intentSpec{effect: effect})
	ct := x.claimed(t, g).str("claim_token")
	rc, err := grant.SignReceipt(x.provider, grant.ReceiptClaims{Issuer: "psp.example", GrantID: g.grantID, IntentHash: g.hash,
		EffectDigest: effect, Outcome: "FAILED", IssuedAt: x.clock().Unix()})
	if err != nil {
		t.Fatal(err)
	}
	r := x.finalize(t, g.token, ct, "COMMITTED", map[string]any{"effect_receipt": map[string]any{"profile": "VP-3", "receipt": rc}}).
		want(t, http.StatusOK)
	if lookup(r.JSON, "effect_confirmed") == true {
		t.Fatalf("a receipt whose provider says FAILED confirmed the effect: %s", r)
	}
}
