package client_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/clearancehq/clearance/client"
	"github.com/clearancehq/clearance/internal/canon"
)

// checkoutBundle allows checkouts up to 100.00 whose terms the org
// verified, blocks bigger ones and asks for review of unverified terms.
const checkoutBundle = `{"bundle_id":"shop","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","decision_types":["UCP_CHECKOUT"],"match":[{"field":"amount","op":"gt","value":100}],"outcome":"BLOCK","reason_codes":["CHECKOUT_TOO_BIG"]},
 {"id":"terms","decision_types":["UCP_CHECKOUT"],"match":[{"field":"context.ucp_terms","op":"ne","value":"VERIFIED"}],"outcome":"REVIEW_REQUIRED","reason_codes":["TERMS_UNVERIFIED"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// checkout is the official UCP 2026-08-25 example with id and one line item
// of quantity × price (minor units), its totals following.
func checkout(t *testing.T, id string, quantity, price int64) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "ucp", "testdata", "2026-08-25", "checkout-response-2026-08-25-ready-for-complete.json"))
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

// signTerms sets m's ap2.merchant_authorization: a detached ES256 JWS by k
// under kid over the RFC 8785 form of m without ap2.
func signTerms(t *testing.T, m map[string]any, k *ecdsa.PrivateKey, kid string) {
	t.Helper()
	terms := map[string]any{}
	for name, v := range m {
		if name != "ap2" {
			terms[name] = v
		}
	}
	payload, err := canon.Marshal(terms)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	header, _ := json.Marshal(map[string]string{"alg": "ES256", "kid": kid})
	input := b64(header) + "." + b64(payload)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, k, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	m["ap2"] = map[string]any{"merchant_authorization": b64(header) + ".." + b64(sig)}
}

// A signed checkout is granted; an unsigned or too big one is refused with
// its authorization in the 403; merchant keys are listed and revoked.
func TestUCPCheckout(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Shop")
	o.publish(t, checkoutBundle)
	ctx := t.Context()

	merchant, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	var reg client.UcpSigningKeyRegistrationRequest
	raw, _ := json.Marshal(map[string]any{"kid": "merchant-2026", "public_jwk": map[string]any{"kty": "EC", "crv": "P-256",
		"x": b64(merchant.X.FillBytes(make([]byte, 32))), "y": b64(merchant.Y.FillBytes(make([]byte, 32)))}})
	mustJSON(t, string(raw), &reg)
	key, err := o.c.RegisterSigningKey(ctx, reg)
	if err != nil || key.Kid != "merchant-2026" || key.Status != "ACTIVE" {
		t.Fatalf("register merchant key %+v: %v", key, err)
	}
	keys, err := o.c.SigningKeys(ctx)
	if err != nil || len(keys.Keys) != 1 || keys.Keys[0].Kid != "merchant-2026" {
		t.Fatalf("merchant keys %+v: %v", keys, err)
	}

	signed := checkout(t, "chk-1", 2, 2500)
	signTerms(t, signed, merchant, "merchant-2026")
	body, _ := json.Marshal(signed)
	granted, err := o.c.AuthorizeCheckoutJSON(ctx, body)
	if err != nil || granted.CheckoutId != "chk-1" || granted.Terms.Status != "VERIFIED" || granted.Authority.Outcome != "ALLOW" ||
		!granted.Authority.Authoritative || granted.Authority.Grant == nil || granted.Authority.Grant.IntentHash != granted.CheckoutDigest {
		t.Fatalf("a signed checkout %+v: %v", granted, err)
	}
	again, err := o.c.AuthorizeCheckoutJSON(ctx, body, client.WithIdempotencyKey("chk-1-key"))
	if err != nil {
		t.Fatal(err)
	}
	if same, err := o.c.AuthorizeCheckoutJSON(ctx, body, client.WithIdempotencyKey("chk-1-key")); err != nil ||
		same.Authority.DecisionId != again.Authority.DecisionId {
		t.Fatalf("the same Idempotency-Key again %+v: %v", same, err)
	}

	// Typed and unsigned: the terms are not verified, the policy asks for
	// review, and the 403 carries the recorded authorization.
	var typed client.UcpCheckoutAuthorizeRequest
	raw, _ = json.Marshal(checkout(t, "chk-2", 1, 1000))
	if err := json.Unmarshal(raw, &typed); err != nil {
		t.Fatal(err)
	}
	_, err = o.c.AuthorizeCheckout(ctx, typed)
	e := wantCode(t, err, http.StatusForbidden, "")
	refused, ok := client.CheckoutRefusal(err)
	if !ok || refused.CheckoutId != "chk-2" || refused.Authority.Outcome != "REVIEW_REQUIRED" || refused.Authority.Grant != nil ||
		refused.Authority.Authoritative || len(refused.Messages) != 1 || e.Body == nil {
		t.Fatalf("an unsigned checkout: %+v %v", refused, ok)
	}
	if _, err := o.c.Dossier(ctx, "x"); err == nil {
		t.Fatal("a dossier x")
	} else if _, ok := client.CheckoutRefusal(err); ok {
		t.Fatal("a 404 read as a refused checkout")
	}

	revoked, err := o.c.RevokeSigningKey(ctx, "merchant-2026")
	if err != nil || revoked.Status != "REVOKED" {
		t.Fatalf("revoke %+v: %v", revoked, err)
	}
	late := checkout(t, "chk-3", 1, 1000)
	signTerms(t, late, merchant, "merchant-2026")
	body, _ = json.Marshal(late)
	_, err = o.c.AuthorizeCheckoutJSON(ctx, body)
	if refused, ok := client.CheckoutRefusal(err); !ok || refused.Terms.Status == "VERIFIED" || refused.Authority.Outcome != "REVIEW_REQUIRED" {
		t.Fatalf("terms signed by a revoked key: %+v %v", refused, err)
	}
}
