package server_test

// UCP checkout authority end to end over real HTTP, on Pebble or
// PostgreSQL (see openBackend): a merchant registers its P-256 signing
// key, a platform asks whether a signed checkout may complete, gets an
// exact-action grant bound to the checkout's digest, claims it right
// before the merchant commits and finalizes it; refusals, conflicts,
// tampering, tenant isolation, scopes and the official example envelopes.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/server"
)

// UCP routes under test.
const (
	pathCheckoutAuthorize = "/v1/ucp/checkout/authorize"
	pathMerchantKeys      = "/v1/ucp/signing-keys"
)

// checkoutBundle allows checkouts up to 100.00 whose terms the org
// verified, blocks bigger ones and asks for review of unverified terms
// (and of bulk line items, through CEL).
const checkoutBundle = `{"bundle_id":"shop","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","decision_types":["UCP_CHECKOUT"],"match":[{"field":"amount","op":"gt","value":100}],"outcome":"BLOCK","reason_codes":["CHECKOUT_TOO_BIG"]},
 {"id":"terms","decision_types":["UCP_CHECKOUT"],"match":[{"field":"context.ucp_terms","op":"ne","value":"VERIFIED"}],"outcome":"REVIEW_REQUIRED","reason_codes":["TERMS_UNVERIFIED"]},
 {"id":"cel","decision_types":["UCP_CHECKOUT"],"when":"intent.checkout.line_items.exists(li, li.quantity > 10)","outcome":"BLOCK","reason_codes":["BULK"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// merchantKID is the kid the tests register merchant keys under.
const merchantKID = "merchant-2026"

// ucpExample is the official example envelope of a release, ready for
// complete and without ap2.
func ucpExample(t testing.TB, release string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "ucp", "testdata", release, "checkout-response-"+release+"-ready-for-complete.json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// ucpCheckout is the official 2026-08-25 example with the given id,
// quantity and unit price (in minor units); its totals follow.
func ucpCheckout(t testing.TB, id string, quantity, price int64) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ucpExample(t, "2026-08-25"), &m); err != nil {
		t.Fatal(err)
	}
	m["id"] = id
	li := m["line_items"].([]any)[0].(map[string]any)
	li["quantity"] = quantity
	li["item"].(map[string]any)["price"] = price
	sub := quantity * price
	li["totals"] = []any{map[string]any{"type": "subtotal", "amount": sub}, map[string]any{"type": "total", "amount": sub}}
	m["totals"] = []any{map[string]any{"type": "subtotal", "amount": sub}, map[string]any{"type": "tax", "amount": 0},
		map[string]any{"type": "total", "amount": sub}}
	return m
}

// newMerchantKey is a fresh EC signing key on c.
func newMerchantKey(t testing.TB, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// merchantJWK is k's public JWK (kty, crv, x, y).
func merchantJWK(k *ecdsa.PrivateKey) map[string]any {
	size := (k.Curve.Params().BitSize + 7) / 8
	return map[string]any{"kty": "EC", "crv": k.Curve.Params().Name,
		"x": b64(k.X.FillBytes(make([]byte, size))), "y": b64(k.Y.FillBytes(make([]byte, size)))}
}

// termsPayload is what a merchant signs: the RFC 8785 form of m without
// its ap2 member.
func termsPayload(t testing.TB, m map[string]any) []byte {
	t.Helper()
	c := make(map[string]any, len(m))
	for k, v := range m {
		if k != "ap2" {
			c[k] = v
		}
	}
	p, err := canon.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// signCheckout sets m's ap2.merchant_authorization: a detached JWS (ES256
// on P-256, ES384 on P-384) made with k under kid over termsPayload(m).
func signCheckout(t testing.TB, m map[string]any, k *ecdsa.PrivateKey, kid string) {
	t.Helper()
	alg, size := "ES256", 32
	if k.Curve == elliptic.P384() {
		alg, size = "ES384", 48
	}
	h, err := json.Marshal(map[string]string{"alg": alg, "kid": kid})
	if err != nil {
		t.Fatal(err)
	}
	input := b64(h) + "." + b64(termsPayload(t, m))
	var digest []byte
	if alg == "ES256" {
		d := sha256.Sum256([]byte(input))
		digest = d[:]
	} else {
		d := sha512.Sum384([]byte(input))
		digest = d[:]
	}
	r, s, err := ecdsa.Sign(rand.Reader, k, digest)
	if err != nil {
		t.Fatal(err)
	}
	sig := append(r.FillBytes(make([]byte, size)), s.FillBytes(make([]byte, size))...)
	m["ap2"] = map[string]any{"merchant_authorization": b64(h) + ".." + b64(sig)}
}

// checkoutBody is m as the request body.
func checkoutBody(t testing.TB, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkoutDigest is the digest a checkout's grant is bound to: sha256 of
// the RFC 8785 form of the whole envelope.
func checkoutDigest(t testing.TB, body []byte) string {
	t.Helper()
	c, err := canon.Transform(body)
	if err != nil {
		t.Fatal(err)
	}
	return canon.Digest(c)
}

// registerMerchant posts {kid, public_jwk} to the UCP signing keys.
func (x *execEnv) registerMerchant(t testing.TB, apiKey, kid string, jwk map[string]any) *result {
	t.Helper()
	return x.req(t, "POST", pathMerchantKeys, apiKey, map[string]any{"kid": kid, "public_jwk": jwk}, nil)
}

// authorizeCheckout posts body to the checkout authority.
func (x *execEnv) authorizeCheckout(t testing.TB, apiKey string, body []byte, headers map[string]string) *result {
	t.Helper()
	return x.req(t, "POST", pathCheckoutAuthorize, apiKey, body, headers)
}

// wantCheckoutAnswer checks the shape every checkout answer (200, or the
// 403 of a refusal) has, and that a grant is there exactly when the
// answer is authoritative.
func wantCheckoutAnswer(t testing.TB, r *result, status int, outcome, terms string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("want %d: %s", status, r)
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		t.Fatalf("a checkout answer is application/json, got %q: %s", r.Header.Get("Content-Type"), r)
	}
	for _, m := range []string{"ucp", "checkout_id", "checkout_digest", "authority", "terms", "mandate", "messages"} {
		if _, ok := r.JSON[m]; !ok {
			t.Fatalf("the answer lacks %s: %s", m, r)
		}
	}
	if r.str("authority.outcome") != outcome || r.str("terms.status") != terms || r.str("authority.decision_id") == "" ||
		r.str("authority.dossier_id") == "" || !strings.HasPrefix(r.str("authority.dossier_digest"), "sha256:") ||
		r.str("authority.policy_snapshot.policy_version") == "" || !strings.HasPrefix(r.str("checkout_digest"), "sha256:") {
		t.Fatalf("want %s with terms %s: %s", outcome, terms, r)
	}
	authoritative := lookup(r.JSON, "authority.authoritative") == true
	_, hasGrant := lookup(r.JSON, "authority").(map[string]any)["grant"]
	wantAuth := status == http.StatusOK && outcome == "ALLOW" && r.str("authority.mode") == "ENFORCEMENT"
	if authoritative != wantAuth || hasGrant != wantAuth {
		t.Fatalf("authoritative %v, grant %v, want both %v: %s", authoritative, hasGrant, wantAuth, r)
	}
	if hasGrant && (r.str("authority.grant.execution_token") == "" || r.str("authority.grant.grant_id") == "" ||
		r.str("authority.grant.expires_at") == "" || r.str("authority.grant.intent_hash") != r.str("checkout_digest")) {
		t.Fatalf("the grant is not bound to the checkout: %s", r)
	}
	msgs, _ := r.JSON["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("want one UCP message: %s", r)
	}
	wantCode := map[bool]string{true: "authority_granted", false: "authority_refused"}[wantAuth]
	switch {
	case !wantAuth && r.str("authority.mode") == "SHADOW":
		wantCode = "authority_not_enforced"
	case !wantAuth && (outcome == "REVIEW_REQUIRED" || outcome == "ESCALATE"):
		wantCode = "authority_review_required"
	}
	if r.str("messages.0.code") != wantCode || r.str("messages.0.content") == "" {
		t.Fatalf("want message %s: %s", wantCode, r)
	}
	if typ := r.str("messages.0.type"); (typ == "info") != (wantCode == "authority_granted" || wantCode == "authority_not_enforced") ||
		(typ == "error") != (r.str("messages.0.severity") != "") {
		t.Fatalf("message type and severity disagree with %s: %s", wantCode, r)
	}
}

// wantNoWrite fails when the org's ledger head moved from head.
func (x *execEnv) wantNoWrite(t testing.TB, key string, head uint64, what string) {
	t.Helper()
	if got := x.head(key); got != head {
		t.Fatalf("%s: the ledger head moved %d -> %d", what, head, got)
	}
}

func TestCheckoutE2EAuthorizeClaimFinalize(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, checkoutBundle)
	a := x.o

	// The merchant's key: 201, then 200 for the same key again.
	merchant := newMerchantKey(t, elliptic.P256())
	reg := x.registerMerchant(t, a.Key, merchantKID, merchantJWK(merchant)).want(t, http.StatusCreated)
	if reg.str("kind") != "merchant" || reg.str("kid") != merchantKID || reg.str("status") != "ACTIVE" ||
		reg.str("public_jwk.kty") != "EC" || reg.str("public_jwk.crv") != "P-256" || reg.str("public_jwk.x") != merchantJWK(merchant)["x"] ||
		reg.str("org_id") != a.ID || strings.Contains(string(reg.Raw), `"d"`) {
		t.Fatalf("register: %s", reg)
	}
	x.registerMerchant(t, a.Key, merchantKID, merchantJWK(merchant)).want(t, http.StatusOK)
	list := x.req(t, "GET", pathMerchantKeys, a.Key, nil, nil).want(t, http.StatusOK)
	if list.str("org_id") != a.ID || list.str("keys.0.kid") != merchantKID || len(list.JSON["keys"].([]any)) != 1 {
		t.Fatalf("list: %s", list)
	}
	// The merchant keys are a registry of their own.
	if r := x.req(t, "GET", pathProvKeys, a.Key, nil, nil).want(t, http.StatusOK); strings.Contains(string(r.Raw), merchantKID) {
		t.Fatalf("the merchant key is listed with the provider keys: %s", r)
	}

	// A signed checkout of 50.00: authoritative, with a grant bound to the
	// checkout's digest.
	m := ucpCheckout(t, "chk_e2e_1", 2, 2500)
	signCheckout(t, m, merchant, merchantKID)
	body := checkoutBody(t, m)
	ok := x.authorizeCheckout(t, a.Key, body, map[string]string{server.HeaderCorrelationID: "corr-chk-1"})
	wantCheckoutAnswer(t, ok, http.StatusOK, "ALLOW", "VERIFIED")
	digest := checkoutDigest(t, body)
	if ok.str("ucp.version") != "2026-08-25" || ok.str("checkout_id") != "chk_e2e_1" || ok.str("checkout_digest") != digest ||
		ok.str("terms.kid") != merchantKID || ok.str("mandate") != "ABSENT" || ok.str("authority.mode") != "ENFORCEMENT" ||
		!slices.Contains(ok.strs("authority.reason_codes"), "OK") || ok.Header.Get(server.HeaderCorrelationID) != "corr-chk-1" ||
		ok.Header.Get(server.HeaderReplayed) != "" {
		t.Fatalf("authorize: %s %v", ok, ok.Header)
	}
	token, grantID := ok.str("authority.grant.execution_token"), ok.str("authority.grant.grant_id")
	if !strings.HasSuffix(ok.str("authority.dossier_url"), ok.str("authority.dossier_id")) {
		t.Fatalf("dossier_url %q does not name the dossier", ok.str("authority.dossier_url"))
	}

	// The dossier records the checkout as its intent, and its verification.
	d := x.req(t, "GET", pathDossiers+ok.str("authority.dossier_id"), a.Key, nil, nil).want(t, http.StatusOK)
	if d.str("route") != "ucp.checkout.authorize" || d.str("intent_digest") != digest || d.str("grant_id") != grantID ||
		d.str("outcome") != "ALLOW" || d.str("correlation_id") != "corr-chk-1" || d.str("intent.id") != "chk_e2e_1" ||
		d.str("intent_as_received") != string(body) {
		t.Fatalf("dossier: %s", d)
	}
	if d.str("checkout.release") != "2026-08-25" || d.str("checkout.checkout_id") != "chk_e2e_1" || d.str("checkout.terms") != "VERIFIED" ||
		d.str("checkout.merchant_kid") != merchantKID || d.str("checkout.mandate") != "ABSENT" ||
		lookup(d.JSON, "checkout.evaluated_intent.action.type") != "ucp.checkout.complete" ||
		lookup(d.JSON, "checkout.evaluated_intent.decision_type") != "UCP_CHECKOUT" {
		t.Fatalf("dossier checkout: %s", d)
	}
	if sha256Digest(d.Raw) != ok.str("authority.dossier_digest") {
		t.Fatalf("the dossier does not hash to the answer's dossier_digest")
	}

	// The same checkout again: the retained authority, not a second grant.
	again := x.authorizeCheckout(t, a.Key, body, nil)
	wantCheckoutAnswer(t, again, http.StatusOK, "ALLOW", "VERIFIED")
	if again.Header.Get(server.HeaderReplayed) != "true" || again.str("authority.grant.grant_id") != grantID ||
		again.str("authority.decision_id") != ok.str("authority.decision_id") {
		t.Fatalf("the same checkout again: %s %v", again, again.Header)
	}
	// Another exact checkout under the same id while it retains authority.
	other := ucpCheckout(t, "chk_e2e_1", 3, 2500)
	signCheckout(t, other, merchant, merchantKID)
	head := x.head(a.Key)
	x.authorizeCheckout(t, a.Key, checkoutBody(t, other), nil).wantProblem(t, http.StatusConflict, "UCP_AUTHORITY_CONFLICT")
	x.wantNoWrite(t, a.Key, head, "a conflicting checkout")

	// Claim right before the merchant commits, then finalize.
	c := x.claim(t, pathClaim, token, ok.str("checkout_digest")).want(t, http.StatusOK)
	if lookup(c.JSON, "should_execute") != true || c.str("claim_token") == "" || c.str("grant_id") != grantID {
		t.Fatalf("claim: %s", c)
	}
	f := x.finalize(t, token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	if f.str("outcome") != "COMMITTED" {
		t.Fatalf("finalize: %s", f)
	}
	// Committed: the checkout keeps its authority.
	x.authorizeCheckout(t, a.Key, checkoutBody(t, other), nil).wantProblem(t, http.StatusConflict, "UCP_AUTHORITY_CONFLICT")
	committed := x.authorizeCheckout(t, a.Key, body, nil)
	if committed.Status != http.StatusOK || committed.str("authority.grant.grant_id") != grantID || committed.Header.Get(server.HeaderReplayed) != "true" {
		t.Fatalf("the committed checkout again: %s", committed)
	}
	// The grant is spent.
	wantFailedClaim(t, x.claim(t, pathClaim, token, ok.str("checkout_digest")), "")

	// The ledger verifies, with the decision, the grant, the claim and the
	// finalization recorded.
	x.ledgerOK(t)
	kinds := map[string]bool{}
	for _, e := range x.entries(a.Key) {
		kinds[e["kind"].(string)] = true
	}
	for _, k := range []string{"key.registered", "decision.recorded", "grant.issued", "execution.claimed", "execution.finalized"} {
		if !kinds[k] {
			t.Errorf("no %s entry in the ledger: %v", k, kinds)
		}
	}
}

func TestCheckoutE2ERefusals(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, checkoutBundle)
	a := x.o
	merchant := newMerchantKey(t, elliptic.P256())
	x.registerMerchant(t, a.Key, merchantKID, merchantJWK(merchant)).want(t, http.StatusCreated)

	// Over the limit: 403 with the answer itself, not a problem.
	big := ucpCheckout(t, "chk_e2e_big", 1, 10001)
	signCheckout(t, big, merchant, merchantKID)
	bigBody := checkoutBody(t, big)
	headers := map[string]string{server.HeaderIdempotencyKey: "chk-big-1", server.HeaderCorrelationID: "corr-big"}
	refused := x.authorizeCheckout(t, a.Key, bigBody, headers)
	wantCheckoutAnswer(t, refused, http.StatusForbidden, "BLOCK", "VERIFIED")
	if !slices.Contains(refused.strs("authority.reason_codes"), "CHECKOUT_TOO_BIG") || refused.str("code") != "" ||
		refused.str("messages.0.severity") != "unrecoverable" || refused.Header.Get(server.HeaderCorrelationID) != "corr-big" ||
		refused.Header.Get(server.HeaderReplayed) != "" {
		t.Fatalf("over the limit: %s %v", refused, refused.Header)
	}
	d := x.req(t, "GET", pathDossiers+refused.str("authority.dossier_id"), a.Key, nil, nil).want(t, http.StatusOK)
	if d.str("outcome") != "BLOCK" || d.str("route") != "ucp.checkout.authorize" || d.str("grant_id") != "" {
		t.Fatalf("the refusal's dossier: %s", d)
	}
	// The same checkout under the same key: the recorded answer again.
	head := x.head(a.Key)
	replay := x.authorizeCheckout(t, a.Key, bigBody, headers)
	wantCheckoutAnswer(t, replay, http.StatusForbidden, "BLOCK", "VERIFIED")
	if replay.str("authority.decision_id") != refused.str("authority.decision_id") {
		t.Fatalf("replay: %s", replay)
	}
	x.wantNoWrite(t, a.Key, head, "a replayed refusal")
	if replay.Header.Get(server.HeaderReplayed) != "true" {
		t.Errorf("a replayed refusal must say %s: true: %v", server.HeaderReplayed, replay.Header)
	}
	// Another checkout under the used key.
	small := ucpCheckout(t, "chk_e2e_small", 1, 100)
	signCheckout(t, small, merchant, merchantKID)
	x.authorizeCheckout(t, a.Key, checkoutBody(t, small), headers).wantProblem(t, http.StatusConflict, "IDEMPOTENCY_KEY_REUSED")
	x.wantNoWrite(t, a.Key, head, "another checkout under a used key")

	// Unsigned terms, or signed by a key the org does not have: the
	// policy decides (review).
	unsigned := x.authorizeCheckout(t, a.Key, checkoutBody(t, ucpCheckout(t, "chk_e2e_unsigned", 1, 100)), nil)
	wantCheckoutAnswer(t, unsigned, http.StatusForbidden, "REVIEW_REQUIRED", "ABSENT")
	if unsigned.str("messages.0.severity") != "requires_buyer_review" {
		t.Fatalf("unsigned: %s", unsigned)
	}
	stranger := ucpCheckout(t, "chk_e2e_stranger", 1, 100)
	signCheckout(t, stranger, newMerchantKey(t, elliptic.P256()), "someone-else")
	s := x.authorizeCheckout(t, a.Key, checkoutBody(t, stranger), nil)
	wantCheckoutAnswer(t, s, http.StatusForbidden, "REVIEW_REQUIRED", "UNKNOWN_KEY")
	if s.str("terms.kid") != "someone-else" {
		t.Fatalf("stranger: %s", s)
	}
	// CEL sees the line items.
	bulk := ucpCheckout(t, "chk_e2e_bulk", 11, 1)
	signCheckout(t, bulk, merchant, merchantKID)
	wantCheckoutAnswer(t, x.authorizeCheckout(t, a.Key, checkoutBody(t, bulk), nil), http.StatusForbidden, "BLOCK", "VERIFIED")

	// Tampered after signing, or signed under the org's kid with another
	// key: refused before any policy, nothing written.
	head = x.head(a.Key)
	tampered := ucpCheckout(t, "chk_e2e_tampered", 1, 100)
	signCheckout(t, tampered, merchant, merchantKID)
	tampered["totals"].([]any)[2].(map[string]any)["amount"] = 1
	forged := ucpCheckout(t, "chk_e2e_forged", 1, 100)
	signCheckout(t, forged, newMerchantKey(t, elliptic.P256()), merchantKID)
	for name, m := range map[string]map[string]any{"tampered": tampered, "forged": forged} {
		r := x.authorizeCheckout(t, a.Key, checkoutBody(t, m), nil).wantProblem(t, http.StatusBadRequest, "UCP_MERCHANT_AUTHORIZATION_INVALID")
		if r.str("errors.0.field") != "/ap2/merchant_authorization" || authorizes(r.JSON) {
			t.Fatalf("%s: %s", name, r)
		}
	}
	x.wantNoWrite(t, a.Key, head, "tampered terms")

	// A P-384 key verifies ES384 terms.
	p384 := newMerchantKey(t, elliptic.P384())
	x.registerMerchant(t, a.Key, "merchant-p384", merchantJWK(p384)).want(t, http.StatusCreated)
	m384 := ucpCheckout(t, "chk_e2e_p384", 1, 100)
	signCheckout(t, m384, p384, "merchant-p384")
	wantCheckoutAnswer(t, x.authorizeCheckout(t, a.Key, checkoutBody(t, m384), nil), http.StatusOK, "ALLOW", "VERIFIED")

	// A revoked key verifies nothing: the same terms are then unverified,
	// and its metadata stays listed.
	x.req(t, "DELETE", pathMerchantKeys+"/merchant-p384", a.Key, nil, nil).want(t, http.StatusOK)
	again := ucpCheckout(t, "chk_e2e_p384_again", 1, 100)
	signCheckout(t, again, p384, "merchant-p384")
	wantCheckoutAnswer(t, x.authorizeCheckout(t, a.Key, checkoutBody(t, again), nil), http.StatusForbidden, "REVIEW_REQUIRED", "UNKNOWN_KEY")
	list := x.req(t, "GET", pathMerchantKeys, a.Key, nil, nil).want(t, http.StatusOK)
	if !strings.Contains(string(list.Raw), `"kid":"merchant-p384"`) || !strings.Contains(string(list.Raw), `"REVOKED"`) {
		t.Fatalf("the revoked key is not listed as REVOKED: %s", list)
	}
	x.ledgerOK(t)

	// Every recorded decision is counted, refusals included; replays and
	// refused envelopes are not.
	page := x.metrics()
	for outcome, want := range map[string]float64{"ALLOW": 1, "BLOCK": 2, "REVIEW_REQUIRED": 3} {
		got := metricSum(page, "clearance_decisions_total", map[string]string{"route": "ucp.checkout.authorize", "outcome": outcome})
		if got != want {
			t.Errorf("clearance_decisions_total of %s checkouts is %v, want %v (the recorded decisions)", outcome, got, want)
		}
	}
}

// A grant's claim evaluates the checkout again: the merchant key revoked
// in between leaves its terms unverified, and the claim is refused.
func TestCheckoutE2EClaimReverifiesTerms(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, checkoutBundle)
	merchant := newMerchantKey(t, elliptic.P256())
	x.registerMerchant(t, x.o.Key, merchantKID, merchantJWK(merchant)).want(t, http.StatusCreated)
	m := ucpCheckout(t, "chk_e2e_revoked", 1, 100)
	signCheckout(t, m, merchant, merchantKID)
	ok := x.authorizeCheckout(t, x.o.Key, checkoutBody(t, m), nil)
	wantCheckoutAnswer(t, ok, http.StatusOK, "ALLOW", "VERIFIED")
	x.req(t, "DELETE", pathMerchantKeys+"/"+merchantKID, x.o.Key, nil, nil).want(t, http.StatusOK)
	wantFailedClaim(t, x.claim(t, pathClaim, ok.str("authority.grant.execution_token"), ok.str("checkout_digest")), "STALE_AUTHORIZATION")
	// Bound to the checkout's digest, not another's.
	other := ucpCheckout(t, "chk_e2e_other", 1, 100)
	r := x.claim(t, pathClaim, ok.str("authority.grant.execution_token"), checkoutDigest(t, checkoutBody(t, other)))
	if r.Status < 400 || lookup(r.JSON, "should_execute") == true {
		t.Fatalf("a claim under another digest: %s", r)
	}
}

func TestCheckoutE2ETenantIsolation(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, checkoutBundle)
	a, b := x.o, x.createOrg("Other shop")
	if r := x.publish(b.Key, checkoutBundle); r.Status >= 300 {
		t.Fatalf("publish for b: %s", r)
	}
	merchant := newMerchantKey(t, elliptic.P256())
	x.registerMerchant(t, a.Key, merchantKID, merchantJWK(merchant)).want(t, http.StatusCreated)

	// B sees none of A's merchant keys and cannot revoke them.
	list := x.req(t, "GET", pathMerchantKeys, b.Key, nil, nil).want(t, http.StatusOK)
	if keys, _ := list.JSON["keys"].([]any); list.str("org_id") != b.ID || len(keys) != 0 {
		t.Fatalf("b's list: %s", list)
	}
	x.req(t, "DELETE", pathMerchantKeys+"/"+merchantKID, b.Key, nil, nil).wantProblem(t, http.StatusNotFound, "KEY_NOT_FOUND")
	x.req(t, "GET", pathMerchantKeys+"?org_id="+a.ID, b.Key, nil, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	x.req(t, "DELETE", pathMerchantKeys+"/"+merchantKID+"?org_id="+a.ID, b.Key, nil, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	if r := x.req(t, "GET", pathMerchantKeys, a.Key, nil, nil).want(t, http.StatusOK); r.str("keys.0.status") != "ACTIVE" {
		t.Fatalf("a's key after b's attempts: %s", r)
	}

	// A's grant: B cannot claim it, nor verify it; A still can claim it.
	m := ucpCheckout(t, "chk_e2e_tenant", 1, 100)
	signCheckout(t, m, merchant, merchantKID)
	body := checkoutBody(t, m)
	ok := x.authorizeCheckout(t, a.Key, body, nil)
	wantCheckoutAnswer(t, ok, http.StatusOK, "ALLOW", "VERIFIED")
	token, digest := ok.str("authority.grant.execution_token"), ok.str("checkout_digest")
	stolen := x.req(t, "POST", pathClaim, b.Key, map[string]any{"execution_token": token, "intent_hash": digest}, nil)
	wantFailedClaim(t, stolen, "GRANT_INVALID")
	x.req(t, "GET", pathDossiers+ok.str("authority.dossier_id"), b.Key, nil, nil).wantProblem(t, http.StatusNotFound, "DOSSIER_NOT_FOUND")
	if c := x.claim(t, pathClaim, token, digest).want(t, http.StatusOK); lookup(c.JSON, "should_execute") != true {
		t.Fatalf("a's claim after b's attempt: %s", c)
	}

	// A's merchant key verifies no terms for B: the same signed checkout
	// is UNKNOWN_KEY there, and B's policy asks for review.
	theirs := x.authorizeCheckout(t, b.Key, body, nil)
	wantCheckoutAnswer(t, theirs, http.StatusForbidden, "REVIEW_REQUIRED", "UNKNOWN_KEY")
	if theirs.str("terms.kid") != merchantKID {
		t.Fatalf("b's answer: %s", theirs)
	}
	// The platform key acts for the org it names, with A's keys for A.
	plat := x.authorizeCheckout(t, x.platform, body, nil)
	plat.wantProblem(t, http.StatusBadRequest, "ORG_ID_REQUIRED")
	viaPlat := x.req(t, "POST", pathCheckoutAuthorize+"?org_id="+a.ID, x.platform, body, nil)
	wantCheckoutAnswer(t, viaPlat, http.StatusOK, "ALLOW", "VERIFIED")
	if viaPlat.str("authority.grant.grant_id") != ok.str("authority.grant.grant_id") {
		t.Fatalf("the platform key's answer for a is not a's retained authority: %s", viaPlat)
	}
	x.ledgerOK(t)
}

// The merchant key registry keeps the provider keys' rules: public EC
// keys on P-256 or P-384 only, private material refused in any letter
// case (as PRIVATE_KEY_MATERIAL), a live kid never replaced in place, a
// revoked one reactivated.
func TestCheckoutE2EMerchantKeyRules(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, checkoutBundle)
	a := x.o
	k := newMerchantKey(t, elliptic.P256())
	jwk := func(edit func(m map[string]any)) map[string]any {
		m := merchantJWK(k)
		edit(m)
		return m
	}
	head := x.head(a.Key)
	p521 := newMerchantKey(t, elliptic.P521())
	for _, c := range []struct {
		name string
		jwk  map[string]any
		code string
	}{
		{"private d", jwk(func(m map[string]any) { m["d"] = b64(k.D.FillBytes(make([]byte, 32))) }), "PRIVATE_KEY_MATERIAL"},
		{"symmetric k", jwk(func(m map[string]any) { m["k"] = "AAAA" }), "PRIVATE_KEY_MATERIAL"},
		{"P-521", merchantJWK(p521), "INVALID_PUBLIC_KEY"},
		{"secp256k1", jwk(func(m map[string]any) { m["crv"] = "secp256k1" }), "INVALID_PUBLIC_KEY"},
		{"off the curve", jwk(func(m map[string]any) { m["y"] = m["x"] }), "INVALID_PUBLIC_KEY"},
		{"short x", jwk(func(m map[string]any) { m["x"] = b64(make([]byte, 31)) }), "INVALID_PUBLIC_KEY"},
		{"alg of another curve", jwk(func(m map[string]any) { m["alg"] = "ES384" }), "INVALID_PUBLIC_KEY"},
		{"encryption key", jwk(func(m map[string]any) { m["use"] = "enc" }), "INVALID_PUBLIC_KEY"},
		{"Ed25519", bareJWK(mustKey(t, 90)), "INVALID_PUBLIC_KEY"},
		{"RSA", map[string]any{"kty": "RSA", "n": "AQAB", "e": "AQAB"}, "INVALID_PUBLIC_KEY"},
		{"another kid inside", jwk(func(m map[string]any) { m["kid"] = "other" }), "KID_MISMATCH"},
	} {
		x.registerMerchant(t, a.Key, "rules-1", c.jwk).wantProblem(t, http.StatusBadRequest, c.code)
	}
	x.wantNoWrite(t, a.Key, head, "refused merchant keys")
	// Private members in another letter case: refused as the provider
	// keys refuse them, never registered as if public.
	for _, name := range []string{"D", "Dp", "priv"} {
		r := x.registerMerchant(t, a.Key, "rules-case", jwk(func(m map[string]any) { m[name] = "AAAA" }))
		if r.Status != http.StatusBadRequest || r.str("code") != "PRIVATE_KEY_MATERIAL" {
			t.Errorf("a merchant JWK with private member %q: want 400 PRIVATE_KEY_MATERIAL as on the provider keys: %s", name, r)
		}
		if r.Status == http.StatusCreated {
			x.req(t, "DELETE", pathMerchantKeys+"/rules-case", a.Key, nil, nil).want(t, http.StatusOK)
		}
	}

	reg := x.registerMerchant(t, a.Key, "rules-1", jwk(func(m map[string]any) { m["kid"] = "rules-1"; m["alg"] = "ES256"; m["use"] = "sig" }))
	reg.want(t, http.StatusCreated)
	if reg.str("public_jwk.kid") != "rules-1" || reg.str("public_jwk.alg") != "ES256" || reg.str("public_jwk.use") != "sig" {
		t.Fatalf("register: %s", reg)
	}
	other := newMerchantKey(t, elliptic.P256())
	x.registerMerchant(t, a.Key, "rules-1", merchantJWK(other)).wantProblem(t, http.StatusConflict, "KID_IN_USE")
	x.req(t, "DELETE", pathMerchantKeys+"/rules-1", a.Key, nil, nil).want(t, http.StatusOK)
	if r := x.req(t, "DELETE", pathMerchantKeys+"/rules-1", a.Key, nil, nil).want(t, http.StatusOK); r.str("status") != "REVOKED" {
		t.Fatalf("revoked again: %s", r)
	}
	x.req(t, "DELETE", pathMerchantKeys+"/never-registered", a.Key, nil, nil).wantProblem(t, http.StatusNotFound, "KEY_NOT_FOUND")
	x.req(t, "DELETE", pathMerchantKeys+"/"+strings.Repeat("k", 201), a.Key, nil, nil).wantProblem(t, http.StatusBadRequest, "INVALID_KID")
	// A revoked kid registered again takes the new key.
	if r := x.registerMerchant(t, a.Key, "rules-1", merchantJWK(other)).want(t, http.StatusCreated); r.str("status") != "ACTIVE" ||
		r.str("public_jwk.x") != merchantJWK(other)["x"] {
		t.Fatalf("reactivated: %s", r)
	}
	// The agent and provider registries are not the merchant one.
	x.req(t, "DELETE", pathProvKeys+"/rules-1", a.Key, nil, nil).wantProblem(t, http.StatusNotFound, "KEY_NOT_FOUND")
	x.registerKey(t, pathProvKeys, a.Key, mustKey(t, 91), "").want(t, http.StatusCreated)
	x.req(t, "POST", pathProvKeys, a.Key, map[string]any{"kid": "rules-ec", "public_jwk": merchantJWK(k)}, nil).
		wantProblem(t, http.StatusBadRequest, "INVALID_PUBLIC_KEY")
	x.ledgerOK(t)
}

func TestCheckoutE2EScopes(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, checkoutBundle)
	a := x.o
	merchant := newMerchantKey(t, elliptic.P256())
	readOnly := x.createKey(a, "decision:read")
	decisionWrite := x.createKey(a, "decision:write")
	policyRead := x.createKey(a, "policy:read")
	policyWrite := x.createKey(a, "policy:write")
	m := ucpCheckout(t, "chk_e2e_scopes", 1, 100)
	signCheckout(t, m, merchant, merchantKID)
	body := checkoutBody(t, m)

	head := x.head(a.Key)
	x.authorizeCheckout(t, readOnly, body, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.authorizeCheckout(t, policyWrite, body, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	for _, k := range []string{readOnly, decisionWrite, policyRead} {
		x.registerMerchant(t, k, merchantKID, merchantJWK(merchant)).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	}
	x.req(t, "GET", pathMerchantKeys, readOnly, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.wantNoWrite(t, a.Key, head, "refused scopes")

	x.registerMerchant(t, policyWrite, merchantKID, merchantJWK(merchant)).want(t, http.StatusCreated)
	x.req(t, "GET", pathMerchantKeys, policyRead, nil, nil).want(t, http.StatusOK)
	x.req(t, "DELETE", pathMerchantKeys+"/"+merchantKID, policyRead, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	wantCheckoutAnswer(t, x.authorizeCheckout(t, decisionWrite, body, nil), http.StatusOK, "ALLOW", "VERIFIED")
}

// The official example envelopes of each release, without ap2, are
// checkouts the policy decides: never a 400.
func TestCheckoutE2EOfficialExamples(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, checkoutBundle)
	shadow := x.createOrg("Shadow shop") // the starter policy: SHADOW
	var n int
	for _, release := range []string{"2026-04-08", "2026-08-25"} {
		files, err := filepath.Glob(filepath.Join("..", "ucp", "testdata", release, "checkout-response-*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.Contains(filepath.Base(f), "-ap2") {
				continue // generated fixtures, signed by the ucp package's test key
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			n++
			name := filepath.Base(f)
			// Enforcement: unsigned terms ask for review.
			r := x.authorizeCheckout(t, x.o.Key, raw, nil)
			wantCheckoutAnswer(t, r, http.StatusForbidden, "REVIEW_REQUIRED", "ABSENT")
			if r.str("ucp.version") != release || r.str("checkout_digest") != checkoutDigest(t, raw) {
				t.Fatalf("%s: %s", name, r)
			}
			// Shadow: evaluated, never authoritative.
			s := x.authorizeCheckout(t, shadow.Key, raw, nil)
			if s.Status != http.StatusOK || s.str("authority.mode") != "SHADOW" || lookup(s.JSON, "authority.authoritative") != false ||
				s.str("messages.0.code") != "authority_not_enforced" || s.str("ucp.version") != release {
				t.Fatalf("%s in SHADOW: %s", name, s)
			}
			if _, has := lookup(s.JSON, "authority").(map[string]any)["grant"]; has {
				t.Fatalf("%s in SHADOW has a grant: %s", name, s)
			}
		}
	}
	if n < 3 {
		t.Fatalf("found %d official examples, want the two of 2026-04-08 and the one of 2026-08-25", n)
	}
	// 2026-04-08 keeps ucp.payment_handlers optional, 2026-08-25 requires it.
	for release, status := range map[string]int{"2026-04-08": http.StatusForbidden, "2026-08-25": http.StatusBadRequest} {
		var m map[string]any
		if err := json.Unmarshal(ucpExample(t, release), &m); err != nil {
			t.Fatal(err)
		}
		delete(m["ucp"].(map[string]any), "payment_handlers")
		m["id"] = "chk_no_handlers_" + release
		r := x.authorizeCheckout(t, x.o.Key, checkoutBody(t, m), nil)
		if status == http.StatusBadRequest {
			r.wantProblem(t, status, "UCP_ENVELOPE_INVALID")
			if r.str("errors.0.field") != "/ucp/payment_handlers" {
				t.Fatalf("%s without payment handlers: %s", release, r)
			}
			continue
		}
		wantCheckoutAnswer(t, r, status, "REVIEW_REQUIRED", "ABSENT")
	}
}

// Concurrent authorizations of one checkout over HTTP bind at most one
// grant, and every answer names it.
func TestCheckoutE2EConcurrentOneGrant(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, checkoutBundle)
	merchant := newMerchantKey(t, elliptic.P256())
	x.registerMerchant(t, x.o.Key, merchantKID, merchantJWK(merchant)).want(t, http.StatusCreated)
	m := ucpCheckout(t, "chk_e2e_race", 1, 100)
	signCheckout(t, m, merchant, merchantKID)
	body := checkoutBody(t, m)
	const n = 8
	results := make([]*result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = x.send("POST", pathCheckoutAuthorize, x.o.Key, body, nil)
		}()
	}
	wg.Wait()
	grants := map[string]bool{}
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if r.Status != http.StatusOK || r.str("authority.grant.grant_id") == "" {
			t.Fatalf("a concurrent authorization: %s", r)
		}
		grants[r.str("authority.grant.grant_id")] = true
	}
	if len(grants) != 1 {
		t.Fatalf("%d grants for one checkout: %v", len(grants), grants)
	}
	issued := 0
	for _, e := range x.entries(x.o.Key) {
		if e["kind"] == "grant.issued" {
			issued++
		}
	}
	if issued != 1 {
		t.Fatalf("%d grant.issued entries for one checkout", issued)
	}
	x.ledgerOK(t)
}

// The names only checkout decisions carry are refused on every other
// decision route, so that no request passes itself off as a verified
// checkout to a policy that trusts them, or squats a checkout's scope.
func TestCheckoutE2EReservedNames(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, checkoutBundle)
	head := x.head(x.o.Key)
	for _, body := range []string{
		`{"amount":5,"decision_type":"UCP_CHECKOUT"}`,
		`{"amount":5,"surface":"ucp"}`,
		`{"amount":5,"action":{"type":"ucp.checkout.complete","amount":5}}`,
		`{"amount":5,"context":{"ucp_terms":"VERIFIED"}}`,
	} {
		for _, path := range []string{pathEvaluate, "/v1/action-gate/evaluate"} {
			x.req(t, "POST", path, x.o.Key, body, nil).wantProblem(t, http.StatusBadRequest, "INVALID_IDENTIFIER")
		}
	}
	for name, mutate := range map[string]func(m map[string]any){
		"decision_type":     func(m map[string]any) { m["decision_type"] = "UCP_CHECKOUT" },
		"action.type":       func(m map[string]any) { m["action"].(map[string]any)["type"] = "ucp.checkout.complete" },
		"context.ucp_terms": func(m map[string]any) { m["context"] = map[string]any{"ucp_terms": "VERIFIED"} },
		"concurrency_scope": func(m map[string]any) { m["concurrency_scope"] = "ucp-checkout:" + strings.Repeat("0", 64) },
	} {
		jws, _ := x.intent(t, intentSpec{mutate: mutate})
		r := x.bind(t, jws, nil)
		if r.Status != http.StatusBadRequest || r.str("code") != "INVALID_IDENTIFIER" || authorizes(r.JSON) {
			t.Errorf("a signed intent with a checkout's %s: want 400 INVALID_IDENTIFIER: %s", name, r)
		}
	}
	x.wantNoWrite(t, x.o.Key, head, "reserved names")
}

// A checkout is as deep as its grant can hold: the grant keeps it one
// level deeper, so 63 levels are authorized and claimable, 64 refused
// before anything is recorded.
func TestCheckoutE2ENestingFitsTheGrant(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, checkoutBundle)
	merchant := newMerchantKey(t, elliptic.P256())
	x.registerMerchant(t, x.o.Key, merchantKID, merchantJWK(merchant)).want(t, http.StatusCreated)
	deep := func(id string, levels int) []byte { // the root object and levels-1 arrays inside x_deep
		m := ucpCheckout(t, id, 1, 100)
		m["x_deep"] = json.RawMessage(strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1))
		signCheckout(t, m, merchant, merchantKID)
		return checkoutBody(t, m)
	}
	ok := x.authorizeCheckout(t, x.o.Key, deep("chk_e2e_63", 63), nil)
	wantCheckoutAnswer(t, ok, http.StatusOK, "ALLOW", "VERIFIED")
	c := x.claim(t, pathClaim, ok.str("authority.grant.execution_token"), ok.str("checkout_digest")).want(t, http.StatusOK)
	if lookup(c.JSON, "should_execute") != true {
		t.Fatalf("claim of a 63-level checkout: %s", c)
	}
	head := x.head(x.o.Key)
	x.authorizeCheckout(t, x.o.Key, deep("chk_e2e_64", 64), nil).wantProblem(t, http.StatusBadRequest, "UCP_ENVELOPE_INVALID")
	x.wantNoWrite(t, x.o.Key, head, "a 64-level checkout")
}
