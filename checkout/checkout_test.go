package checkout_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// env is an engine over Pebble with a clock the test moves, an org, its
// policy, and a merchant key registered for it.
type env struct {
	t        *testing.T
	e        *clearance.Engine
	org      string
	merchant *ecdsa.PrivateKey
	now      atomic.Int64
}

const kid = "merchant-2026"

// policyOf allows checkouts up to 100.00 with verified terms, blocks
// bigger ones and asks for review of unverified terms.
const enforcing = `{"bundle_id":"shop","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","decision_types":["UCP_CHECKOUT"],"match":[{"field":"amount","op":"gt","value":100}],"outcome":"BLOCK","reason_codes":["CHECKOUT_TOO_BIG"]},
 {"id":"terms","decision_types":["UCP_CHECKOUT"],"match":[{"field":"context.ucp_terms","op":"ne","value":"VERIFIED"}],"outcome":"REVIEW_REQUIRED","reason_codes":["TERMS_UNVERIFIED"]},
 {"id":"cel","decision_types":["UCP_CHECKOUT"],"when":"intent.checkout.line_items.exists(li, li.quantity > 10)","outcome":"BLOCK","reason_codes":["BULK"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

func newEnv(t *testing.T, bundle string) *env {
	t.Helper()
	x := &env{t: t}
	x.now.Store(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, x.now.Load()).UTC() }
	ps, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	signing, _ := grant.KeyFromSeed(make([]byte, 32))
	if x.e, err = clearance.Open(ps, clearance.Options{Now: clock, GrantKeys: grant.NewKeyRing(signing)}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o, err := x.e.Admin.CreateOrg(ctx, "Shop")
	if err != nil {
		t.Fatal(err)
	}
	x.org = o.Org.ID
	if bundle != "" {
		if _, err := x.e.Policies.PublishBundle(ctx, x.org, []byte(bundle)); err != nil {
			t.Fatal(err)
		}
	}
	x.merchant = fixedKey(elliptic.P256(), 7)
	if _, _, err := x.e.Admin.RegisterKey(ctx, x.org, registry.KindMerchant, registry.Registration{KID: kid, PublicJWK: publicJWK(x.merchant)}); err != nil {
		t.Fatal(err)
	}
	return x
}

func (x *env) advance(d time.Duration) { x.now.Add(int64(d)) }

func (x *env) entries() []ledger.Entry {
	x.t.Helper()
	p, err := x.e.Audit.Ledger(context.Background(), x.org, 0, 1000)
	if err != nil {
		x.t.Fatal(err)
	}
	return p.Entries
}

// fixedKey is a deterministic EC key (the scalar d), for reproducible tests.
func fixedKey(c elliptic.Curve, d int64) *ecdsa.PrivateKey {
	k := new(ecdsa.PrivateKey)
	k.Curve = c
	k.D = big.NewInt(d)
	k.X, k.Y = c.ScalarBaseMult(k.D.Bytes())
	return k
}

func publicJWK(k *ecdsa.PrivateKey) json.RawMessage {
	size := (k.Curve.Params().BitSize + 7) / 8
	b, _ := json.Marshal(map[string]string{"kty": "EC", "crv": k.Curve.Params().Name,
		"x": base64.RawURLEncoding.EncodeToString(k.X.FillBytes(make([]byte, size))),
		"y": base64.RawURLEncoding.EncodeToString(k.Y.FillBytes(make([]byte, size)))})
	return b
}

// envelope is the official 2026-08-25 example with the given id, quantity
// and unit price (its totals follow).
func envelope(t *testing.T, id string, quantity, price int64) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../ucp/testdata/2026-08-25/checkout-response-2026-08-25-ready-for-complete.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
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

// sign adds ap2.merchant_authorization made with k over m without ap2.
func sign(t *testing.T, m map[string]any, k *ecdsa.PrivateKey, kid string) {
	t.Helper()
	delete(m, "ap2")
	payload, err := canon.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"` + kid + `"}`))
	input := header + "." + base64.RawURLEncoding.EncodeToString(payload)
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(zeroReader{}, k, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	m["ap2"] = map[string]any{"merchant_authorization": header + ".." + base64.RawURLEncoding.EncodeToString(sig)}
}

// zeroReader feeds ecdsa.Sign; Go's ECDSA derives its nonce safely
// whatever the reader gives (it mixes in the key and the hash).
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func body(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (x *env) authorize(b []byte, key string) (clearance.CheckoutAuthorization, error) {
	return x.e.Checkout.Authorize(context.Background(), clearance.CheckoutRequest{OrgID: x.org, Body: b, IdempotencyKey: key})
}

func TestAuthorizeClaimFinalize(t *testing.T) {
	x := newEnv(t, enforcing)
	ctx := context.Background()
	m := envelope(t, "chk_1", 2, 2500)
	sign(t, m, x.merchant, kid)
	a, err := x.authorize(body(t, m), "")
	if err != nil {
		t.Fatal(err)
	}
	if !a.Authority.Authoritative || a.Authority.Outcome != "ALLOW" || a.Authority.Grant == nil || a.Terms.Status != "VERIFIED" || a.UCP.Version != "2026-08-25" {
		t.Fatalf("answer: %+v", a)
	}
	canonical, _ := canon.Marshal(m)
	if a.CheckoutDigest != canon.Digest(canonical) || a.Authority.Grant.IntentHash != a.CheckoutDigest {
		t.Fatalf("the grant is not bound to the checkout's digest: %s vs %s", a.Authority.Grant.IntentHash, canon.Digest(canonical))
	}

	// The dossier records the checkout as its intent, and its verification.
	rec, err := x.e.Evidence.Dossier(ctx, x.org, a.Authority.DossierID)
	if err != nil {
		t.Fatal(err)
	}
	var d clearance.Dossier
	if err := json.Unmarshal(rec.Body, &d); err != nil {
		t.Fatal(err)
	}
	if d.Route != string(clearance.RouteUCPCheckout) || d.IntentDigest != a.CheckoutDigest || d.Checkout == nil ||
		d.Checkout.Terms != "VERIFIED" || d.Checkout.MerchantKID != kid || d.GrantID != a.Authority.Grant.GrantID ||
		canon.Digest(d.Intent) != a.CheckoutDigest {
		t.Fatalf("dossier: %s", rec.Body)
	}

	// The same checkout again: the retained authority, not a second grant.
	again, err := x.authorize(body(t, m), "")
	if err != nil || !again.Replayed || again.Authority.Grant == nil || again.Authority.Grant.GrantID != a.Authority.Grant.GrantID {
		t.Fatalf("again: %+v %v", again, err)
	}
	// Another exact checkout under the same id while it retains authority.
	other := envelope(t, "chk_1", 3, 2500)
	sign(t, other, x.merchant, kid)
	if _, err := x.authorize(body(t, other), ""); !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("conflicting checkout: %v", err)
	}

	c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org, ExecutionToken: a.Authority.Grant.ExecutionToken, IntentHash: a.CheckoutDigest})
	if err != nil || !c.ShouldExecute {
		t.Fatalf("claim: %+v %v", c, err)
	}
	f, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: x.org, ExecutionToken: a.Authority.Grant.ExecutionToken, ClaimToken: c.ClaimToken, Outcome: claim.OutcomeCommitted})
	if err != nil || f.Outcome != claim.StateCommitted {
		t.Fatalf("finalize: %+v %v", f, err)
	}
	// Committed: the checkout keeps its authority; another exact checkout
	// under its id is still a conflict.
	if _, err := x.authorize(body(t, other), ""); !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("conflicting checkout after commit: %v", err)
	}
	// The ledger verifies, with the decision, the grant, the claim and the
	// finalization recorded.
	v, err := x.e.Audit.VerifyLedger(ctx, x.org)
	if err != nil || !v.Valid {
		t.Fatalf("ledger: %+v %v", v, err)
	}
	kinds := map[string]bool{}
	for _, e := range x.entries() {
		kinds[e.Kind] = true
	}
	for _, k := range []string{ledger.KindDecision, ledger.KindGrantIssued, ledger.KindClaimed, ledger.KindFinalized} {
		if !kinds[k] {
			t.Errorf("no %s entry in the ledger: %v", k, kinds)
		}
	}
	// The capsule of the decision shows it like any other.
	caps, err := x.e.Evidence.Capsules(ctx, x.org, a.Authority.DossierID)
	if err != nil || !caps.LatestVerified() {
		t.Fatalf("capsules: %+v %v", caps, err)
	}
}

func TestRefusalsAndReleases(t *testing.T) {
	x := newEnv(t, enforcing)
	ctx := context.Background()

	big := envelope(t, "chk_big", 1, 10001)
	sign(t, big, x.merchant, kid)
	_, err := x.authorize(body(t, big), "")
	var refused *clearance.CheckoutRefused
	if !errors.As(err, &refused) || !errors.Is(err, clearance.ErrForbidden) || refused.Answer.Authority.Outcome != "BLOCK" ||
		refused.Answer.Authority.Grant != nil || refused.Answer.Authority.DossierID == "" {
		t.Fatalf("a checkout over the limit: %+v", err)
	}

	unsigned := envelope(t, "chk_unsigned", 1, 100)
	if _, err := x.authorize(body(t, unsigned), ""); !errors.As(err, &refused) || refused.Answer.Authority.Outcome != "REVIEW_REQUIRED" ||
		refused.Answer.Terms.Status != "ABSENT" {
		t.Fatalf("unsigned terms: %+v", err)
	}
	// Signed by a key the org does not have: unverified, the policy decides.
	stranger := envelope(t, "chk_stranger", 1, 100)
	sign(t, stranger, fixedKey(elliptic.P256(), 9), "someone-else")
	if _, err := x.authorize(body(t, stranger), ""); !errors.As(err, &refused) || refused.Answer.Terms.Status != "UNKNOWN_KEY" {
		t.Fatalf("unknown kid: %+v", err)
	}
	// Signed under our kid with another key, or tampered after signing:
	// refused before the policy, nothing recorded.
	before := x.entries()
	forged := envelope(t, "chk_forged", 1, 100)
	sign(t, forged, fixedKey(elliptic.P256(), 9), kid)
	tampered := envelope(t, "chk_tampered", 1, 100)
	sign(t, tampered, x.merchant, kid)
	tampered["totals"].([]any)[2].(map[string]any)["amount"] = 1
	for name, m := range map[string]map[string]any{"forged": forged, "tampered": tampered} {
		_, err := x.authorize(body(t, m), "")
		var ce *clearance.Error
		if !errors.As(err, &ce) || !errors.Is(err, clearance.ErrInvalidRequest) || ce.Code != "UCP_MERCHANT_AUTHORIZATION_INVALID" {
			t.Errorf("%s: %v", name, err)
		}
	}
	if after := x.entries(); len(after) != len(before) {
		t.Errorf("refused envelopes wrote %d ledger entries", len(after)-len(before))
	}

	// A grant that expires unclaimed releases the checkout: another exact
	// checkout under its id is then decided afresh.
	m := envelope(t, "chk_retry", 1, 100)
	sign(t, m, x.merchant, kid)
	a, err := x.authorize(body(t, m), "")
	if err != nil || a.Authority.Grant == nil {
		t.Fatalf("authorize: %+v %v", a, err)
	}
	changed := envelope(t, "chk_retry", 2, 100)
	sign(t, changed, x.merchant, kid)
	if _, err := x.authorize(body(t, changed), ""); !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("changed checkout while retained: %v", err)
	}
	x.advance(time.Hour)
	b, err := x.authorize(body(t, changed), "")
	if err != nil || b.Authority.Grant == nil || b.Authority.Grant.GrantID == a.Authority.Grant.GrantID {
		t.Fatalf("after expiry: %+v %v", b, err)
	}
	// FAILED releases it too.
	c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org, ExecutionToken: b.Authority.Grant.ExecutionToken, IntentHash: b.CheckoutDigest})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: x.org, ExecutionToken: b.Authority.Grant.ExecutionToken, ClaimToken: c.ClaimToken, Outcome: claim.OutcomeFailed}); err != nil {
		t.Fatal(err)
	}
	if c, err := x.authorize(body(t, m), ""); err != nil || c.Authority.Grant == nil {
		t.Fatalf("after FAILED: %+v %v", c, err)
	}
}

func TestClaimReevaluates(t *testing.T) {
	x := newEnv(t, enforcing)
	ctx := context.Background()
	m := envelope(t, "chk_revoked", 1, 100)
	sign(t, m, x.merchant, kid)
	a, err := x.authorize(body(t, m), "")
	if err != nil {
		t.Fatal(err)
	}
	// The merchant key is revoked before the claim: the terms no longer
	// verify, and the policy asks for review, so the claim is refused.
	if _, err := x.e.Admin.RevokeKey(ctx, x.org, registry.KindMerchant, kid); err != nil {
		t.Fatal(err)
	}
	c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org, ExecutionToken: a.Authority.Grant.ExecutionToken, IntentHash: a.CheckoutDigest})
	var ce *clearance.Error
	if !errors.As(err, &ce) || ce.Code != "STALE_AUTHORIZATION" || c.ShouldExecute {
		t.Fatalf("claim after revocation: %+v %v", c, err)
	}
	// The grant is bound to the checkout's digest, not another's.
	if _, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org, ExecutionToken: a.Authority.Grant.ExecutionToken, IntentHash: "sha256:" + string(make([]byte, 0))}); err == nil {
		t.Fatal("a claim under another intent_hash succeeded")
	}
}

func TestShadowIsNotAuthoritative(t *testing.T) {
	x := newEnv(t, `{"bundle_id":"shop","version":"v1","mode":"SHADOW","rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`)
	m := envelope(t, "chk_shadow", 1, 100)
	a, err := x.authorize(body(t, m), "")
	if err != nil || a.Authority.Authoritative || a.Authority.Grant != nil || a.Authority.Mode != "SHADOW" {
		t.Fatalf("shadow: %+v %v", a, err)
	}
}

func TestIdempotencyKey(t *testing.T) {
	x := newEnv(t, enforcing)
	big := envelope(t, "chk_idem", 1, 20000)
	sign(t, big, x.merchant, kid)
	_, err1 := x.authorize(body(t, big), "key-1")
	_, err2 := x.authorize(body(t, big), "key-1")
	var r1, r2 *clearance.CheckoutRefused
	if !errors.As(err1, &r1) || !errors.As(err2, &r2) || !r2.Answer.Replayed || r1.Answer.Authority.DecisionID != r2.Answer.Authority.DecisionID {
		t.Fatalf("replay: %v %v", err1, err2)
	}
	other := envelope(t, "chk_idem", 1, 200)
	if _, err := x.authorize(body(t, other), "key-1"); !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("another checkout under the key: %v", err)
	}
}

// Concurrent authorizations of one checkout bind at most one grant, and
// every ALLOW answer names it.
func TestConcurrentAuthorizeOneGrant(t *testing.T) {
	x := newEnv(t, enforcing)
	m := envelope(t, "chk_race", 1, 100)
	sign(t, m, x.merchant, kid)
	b := body(t, m)
	const n = 8
	grants := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := x.authorize(b, "")
			if err != nil {
				t.Error(err)
				return
			}
			grants[i] = a.Authority.Grant.GrantID
		}()
	}
	wg.Wait()
	for _, g := range grants {
		if g != grants[0] {
			t.Fatalf("two grants for one checkout: %v", grants)
		}
	}
}

// No other route may carry the names of a checkout's decisions: a policy
// that trusts context.ucp_terms would otherwise take an agent's own claim
// for a verified checkout, and an agent could squat a checkout's scope.
func TestCheckoutNamesAreReserved(t *testing.T) {
	x := newEnv(t, enforcing)
	ctx := context.Background()
	agent, _ := grant.KeyFromSeed(append([]byte{9}, make([]byte, 31)...))
	jwk, _ := json.Marshal(agent.PublicJWK())
	if _, _, err := x.e.Admin.RegisterKey(ctx, x.org, registry.KindAgent, registry.Registration{KID: agent.KID(), PublicJWK: jwk}); err != nil {
		t.Fatal(err)
	}
	intent := func(edit func(m map[string]any)) string {
		m := map[string]any{
			"intent_id": "i-1", "org_id": x.org, "actor": map[string]any{"id": "agent-7", "type": "agent"},
			"action": map[string]any{"type": "refund", "amount": 1, "currency": "USD", "target": "chk_victim"},
			"nonce":  "n-1", "concurrency_scope": "s-1", "escalation": map[string]any{"mode": "NONE"},
			"issued_at": time.Unix(0, x.now.Load()).UTC().Format(time.RFC3339),
		}
		edit(m)
		payload, err := canon.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		jws, err := grant.SignIntent(agent, payload)
		if err != nil {
			t.Fatal(err)
		}
		return jws
	}
	before := len(x.entries())
	binds := map[string]func(m map[string]any){
		"decision_type":     func(m map[string]any) { m["decision_type"] = "UCP_CHECKOUT" },
		"action.type":       func(m map[string]any) { m["action"].(map[string]any)["type"] = "ucp.checkout.complete" },
		"surface":           func(m map[string]any) { m["surface"] = "ucp" },
		"context.ucp_terms": func(m map[string]any) { m["context"] = map[string]any{"ucp_terms": "VERIFIED"} },
		"concurrency_scope": func(m map[string]any) { m["concurrency_scope"] = "ucp-checkout:0123" },
	}
	for field, edit := range binds {
		_, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org, SignedIntent: intent(edit)})
		var ce *clearance.Error
		if !errors.As(err, &ce) || ce.Code != "INVALID_IDENTIFIER" || len(ce.Fields) != 1 || ce.Fields[0].Field != field {
			t.Errorf("enforce-and-bind with a checkout's %s: %v", field, err)
		}
	}
	for _, b := range []string{
		`{"decision_type":"UCP_CHECKOUT","workflow_key":"w","amount":1}`,
		`{"decision_type":"PAY","workflow_key":"w","surface":"ucp"}`,
		`{"decision_type":"PAY","workflow_key":"w","context":{"ucp_mandate":"PRESENTED"}}`,
	} {
		_, err := x.e.Evaluate(ctx, clearance.EvaluateRequest{OrgID: x.org, Route: clearance.RouteEvaluateDecision, Body: []byte(b)})
		if !errors.Is(err, clearance.ErrInvalidRequest) {
			t.Errorf("evaluate %s: %v", b, err)
		}
	}
	if after := len(x.entries()); after != before {
		t.Errorf("refused requests wrote %d ledger entries", after-before)
	}
}

// Retention is judged by the store's clock, as a claim judges expiry: a
// server whose clock runs ahead cannot take a grant for expired that the
// store would still let another server claim, and bind a second one.
func TestRetentionByStoreClock(t *testing.T) {
	var base atomic.Int64
	base.Store(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC).UnixNano())
	storeClock := func() time.Time { return time.Unix(0, base.Load()).UTC() }
	ps, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Now: storeClock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	signing, _ := grant.KeyFromSeed(make([]byte, 32))
	ahead := func() time.Time { return storeClock().Add(30 * time.Second) }
	open := func(now func() time.Time) *clearance.Engine {
		e, err := clearance.Open(ps, clearance.Options{Now: now, GrantKeys: grant.NewKeyRing(signing)})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	onTime, early := open(storeClock), open(ahead)
	ctx := context.Background()
	o, err := onTime.Admin.CreateOrg(ctx, "Shop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := onTime.Policies.PublishBundle(ctx, o.Org.ID, []byte(enforcing)); err != nil {
		t.Fatal(err)
	}
	merchant := fixedKey(elliptic.P256(), 7)
	if _, _, err := onTime.Admin.RegisterKey(ctx, o.Org.ID, registry.KindMerchant, registry.Registration{KID: kid, PublicJWK: publicJWK(merchant)}); err != nil {
		t.Fatal(err)
	}
	first := envelope(t, "chk_skew", 1, 100)
	sign(t, first, merchant, kid)
	a, err := onTime.Checkout.Authorize(ctx, clearance.CheckoutRequest{OrgID: o.Org.ID, Body: body(t, first)})
	if err != nil || a.Authority.Grant == nil {
		t.Fatalf("authorize: %+v %v", a, err)
	}
	expires, _ := time.Parse(time.RFC3339, a.Authority.Grant.ExpiresAt)
	base.Store(expires.Add(-10 * time.Second).UnixNano()) // live for the store, expired for the early server

	second := envelope(t, "chk_skew", 2, 100)
	sign(t, second, merchant, kid)
	if b, err := early.Checkout.Authorize(ctx, clearance.CheckoutRequest{OrgID: o.Org.ID, Body: body(t, second)}); !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("a server ahead of the store bound another checkout while the first grant is live: %+v %v", b, err)
	}
	c, err := onTime.Claim(ctx, clearance.ClaimRequest{OrgID: o.Org.ID, ExecutionToken: a.Authority.Grant.ExecutionToken, IntentHash: a.CheckoutDigest})
	if err != nil || !c.ShouldExecute {
		t.Fatalf("the first grant's claim: %+v %v", c, err)
	}
}

// A checkout nested as deep as the envelope rules allow would be one level
// too deep inside the grant's bound intent: it is refused up front rather
// than bound to a grant no claim could read.
func TestTooDeepForItsGrant(t *testing.T) {
	x := newEnv(t, enforcing)
	m := envelope(t, "chk_deep", 1, 100)
	var deep any = "leaf"
	for range 63 { // with the envelope object, depth 64: the most the envelope rules allow
		deep = []any{deep}
	}
	m["x_deep"] = deep
	sign(t, m, x.merchant, kid)
	_, err := x.authorize(body(t, m), "")
	var ce *clearance.Error
	if !errors.As(err, &ce) || ce.Code != "UCP_ENVELOPE_INVALID" {
		t.Fatalf("a checkout too deep for its grant: %v", err)
	}
	var shallower any = "leaf"
	for range 62 {
		shallower = []any{shallower}
	}
	m["x_deep"] = shallower
	sign(t, m, x.merchant, kid)
	a, err := x.authorize(body(t, m), "")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := x.e.Claim(context.Background(), clearance.ClaimRequest{OrgID: x.org, ExecutionToken: a.Authority.Grant.ExecutionToken, IntentHash: a.CheckoutDigest}); err != nil || !c.ShouldExecute {
		t.Fatalf("claim of the deepest checkout accepted: %+v %v", c, err)
	}
}
