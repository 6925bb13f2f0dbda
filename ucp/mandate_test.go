package ucp

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

func wantMandateError(t *testing.T, err error, detail string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidMandate || e.Pointer != "/ap2/checkout_mandate" || !errors.Is(err, ErrInvalidMandate) {
		t.Fatalf("got %v, want %s", err, CodeInvalidMandate)
	}
	if !strings.Contains(e.Detail, detail) {
		t.Fatalf("detail %q does not mention %q", e.Detail, detail)
	}
}

// withMandate is the release's signed fixture carrying mandate.
func withMandate(t *testing.T, r Release, mandate string) *Checkout {
	t.Helper()
	return parseOK(t, set(p("ap2.checkout_mandate"), mandate)(t, signed(t, r)))
}

func TestCheckMandateFixtures(t *testing.T) {
	for _, r := range Releases() {
		c := parseOK(t, mandated(t, r))
		if c.Mandate == "" {
			t.Fatal("fixture has no mandate")
		}
		if err := CheckMandate(c); err != nil {
			t.Errorf("%s: %v", r, err)
		}
		// The merchant terms still verify: ap2 is outside the signed payload.
		if err := VerifyTerms(c, lookupOf(publicKey(t, merchantKey(t), merchantKID))); err != nil {
			t.Errorf("%s terms: %v", r, err)
		}
	}
	if err := CheckMandate(parseOK(t, signed(t, Release20260825))); err != nil {
		t.Fatalf("no mandate: %v", err)
	}
	if err := CheckMandate(nil); err != nil {
		t.Fatal(err)
	}
}

// ap2ClosedMandate is AP2's closed checkout mandate shape: a delegate
// payload array element, disclosed, holding vct, checkout_hash and a
// disclosed checkout_jwt.
func ap2ClosedMandate(t *testing.T, checkoutJWT, checkoutHash string) string {
	jwtDisclosure, jwtDigest := disclosureOf(t, "c2FsdC1qd3Q", "checkout_jwt", checkoutJWT)
	inner, innerDigest := disclosureOf(t, "c2FsdC1pbm5lcg", map[string]any{
		"vct": "mandate.checkout.1", "checkout_hash": checkoutHash, "_sd": []string{jwtDigest}})
	payload := map[string]any{"_sd_alg": "sha-256", "iat": 1777342376,
		"delegate_payload": []any{map[string]any{"...": innerDigest}, map[string]any{"...": "ZGVjb3k"}}}
	return sdJWTKB(t, payload, []string{inner, jwtDisclosure}, mandateOpts{})
}

func TestCheckMandateCheckoutJWT(t *testing.T) {
	r := Release20260408
	c := parseOK(t, signed(t, r))
	payload, err := c.TermsPayload()
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(c.Terms.JWS, ".")
	checkoutJWT := parts[0] + "." + b64.EncodeToString(payload) + "." + parts[2]
	sum := sha256.Sum256([]byte(checkoutJWT))
	hash := b64.EncodeToString(sum[:])

	if err := CheckMandate(withMandate(t, r, ap2ClosedMandate(t, checkoutJWT, hash))); err != nil {
		t.Fatalf("AP2 closed mandate: %v", err)
	}
	wantMandateError(t, CheckMandate(withMandate(t, r, ap2ClosedMandate(t, checkoutJWT, "AAAA"))), "checkout_hash")

	other := parts[0] + "." + b64.EncodeToString([]byte(`{"id":"chk_other"}`)) + "." + parts[2]
	sum = sha256.Sum256([]byte(other))
	wantMandateError(t, CheckMandate(withMandate(t, r, ap2ClosedMandate(t, other, b64.EncodeToString(sum[:])))), "checkout_jwt")
}

func TestCheckMandateRefusals(t *testing.T) {
	r := Release20260825
	body := signed(t, r)
	checkout := bound(t, body)
	otherID := bound(t, body)
	otherID["id"] = "chk_other"
	otherTotal := bound(t, body)
	obj(otherTotal, "totals", "2")["amount"] = n("1")
	noAuth := bound(t, body)
	delete(noAuth, "ap2")

	good := buildMandate(t, mandateOpts{checkout: checkout})
	kbStart := strings.LastIndex(good, "~") + 1
	issuerEnd := strings.Index(good, "~")

	for _, c := range []struct {
		name, mandate, detail string
	}{
		{"wrong sd_hash", buildMandate(t, mandateOpts{checkout: checkout, sdHash: "AAAA"}), "sd_hash"},
		{"missing key binding", buildMandate(t, mandateOpts{checkout: checkout, noKB: true}), "key-binding JWT"},
		{"no separator", good[:issuerEnd], `no "~"`},
		{"kb typ", buildMandate(t, mandateOpts{checkout: checkout, kbTyp: "JWT"}), "kb+jwt"},
		{"other checkout id", buildMandate(t, mandateOpts{checkout: otherID}), `"chk_other"`},
		{"other total", buildMandate(t, mandateOpts{checkout: otherTotal}), "differs"},
		{"checkout without merchant_authorization", buildMandate(t, mandateOpts{checkout: noAuth}), "differs"},
		{"no checkout", buildMandate(t, mandateOpts{}), "no checkout"},
		{"one of two checkouts wrong", buildMandate(t, mandateOpts{checkout: checkout, claims: map[string]any{"previous": map[string]any{"checkout": otherID}}}), "more than one checkout"},
		{"two copies of the checkout", buildMandate(t, mandateOpts{checkout: checkout, claims: map[string]any{"copy": map[string]any{"checkout": checkout}}}), "more than one checkout"},
		{"disclosed member over a plain one", buildMandate(t, mandateOpts{checkout: checkout, claims: map[string]any{"checkout": checkout}}), "already present"},
		{"undisclosed checkout wrong", buildMandate(t, mandateOpts{claims: map[string]any{"checkout": otherID}}), `"chk_other"`},
		{"sd_alg sha-512", buildMandate(t, mandateOpts{checkout: checkout, claims: map[string]any{"_sd_alg": "sha-512"}}), "_sd_alg"},
		{"unreferenced disclosure", func() string {
			d, _ := disclosureOf(t, "c2FsdA", "extra", "x")
			m := buildMandate(t, mandateOpts{checkout: checkout, noKB: true}) + d + "~"
			return sdJWTKBFrom(t, m)
		}(), "not referenced"},
		{"disclosure referenced twice", func() string {
			d, digest := disclosureOf(t, "c2FsdA", "extra", "x")
			payload := map[string]any{"checkout": checkout, "_sd": []string{digest}, "nested": map[string]any{"_sd": []string{digest}}}
			return sdJWTKB(t, payload, []string{d}, mandateOpts{})
		}(), "twice"},
		{"array digest to a member disclosure", func() string {
			d, digest := disclosureOf(t, "c2FsdA", "extra", "x")
			payload := map[string]any{"checkout": checkout, "list": []any{map[string]any{"...": digest}}}
			return sdJWTKB(t, payload, []string{d}, mandateOpts{})
		}(), "wrong kind"},
		{"repeated disclosure", func() string {
			d, digest := disclosureOf(t, "c2FsdA", "extra", "x")
			return sdJWTKB(t, map[string]any{"checkout": checkout, "_sd": []string{digest}}, []string{d, d}, mandateOpts{})
		}(), "repeats"},
		{"disclosure not an array", func() string {
			d := b64.EncodeToString([]byte(`{"salt":"x"}`))
			return sdJWTKB(t, map[string]any{"checkout": checkout}, []string{d}, mandateOpts{})
		}(), "array of 2 or 3"},
		{"disclosure named _sd", func() string {
			d, digest := disclosureOf(t, "c2FsdA", "_sd", "x")
			return sdJWTKB(t, map[string]any{"checkout": checkout, "_sd": []string{digest}}, []string{d}, mandateOpts{})
		}(), `"_sd"`},
		{"empty disclosure", good[:issuerEnd] + "~~" + good[kbStart:], "empty"},
		{"issuer JWT two segments", "a.b~" + good[kbStart:], "three"},
		{"issuer header not JSON", b64.EncodeToString([]byte("{")) + good[strings.Index(good, "."):], "header"},
		{"issuer alg none", func() string {
			seg := strings.SplitN(good, ".", 2)
			return b64.EncodeToString([]byte(`{"alg":"none"}`)) + "." + seg[1]
		}(), `"none"`},
		{"issuer payload an array", func() string {
			seg := strings.Split(good[:issuerEnd], ".")
			return seg[0] + "." + b64.EncodeToString([]byte(`[]`)) + "." + seg[2] + good[issuerEnd:]
		}(), "payload must be a JSON object"},
		{"kb payload duplicate member", func() string {
			kb := strings.Split(good[kbStart:], ".")
			return good[:kbStart] + kb[0] + "." + b64.EncodeToString([]byte(`{"iat":1,"iat":2}`)) + "." + kb[2]
		}(), "duplicate"},
		{"kb without signature", good[:len(good)-len(strings.Split(good[kbStart:], ".")[2])], "three"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantMandateError(t, CheckMandate(withMandate(t, r, c.mandate)), c.detail)
		})
	}
}

// sdJWTKBFrom appends a key-binding JWT to an SD-JWT ending in "~".
func sdJWTKBFrom(t *testing.T, sdjwt string) string {
	sum := sha256.Sum256([]byte(sdjwt))
	return sdjwt + compactJWS(t, holderKey(t), map[string]string{"alg": "ES256", "typ": "kb+jwt"},
		map[string]any{"iat": 1777342400, "aud": "merchant.example", "nonce": "n-0001", "sd_hash": b64.EncodeToString(sum[:])})
}

func TestCheckMandateAccepts(t *testing.T) {
	r := Release20260825
	checkout := bound(t, signed(t, r))
	for _, c := range []struct {
		name    string
		mandate string
	}{
		{"checkout as a plain claim", buildMandate(t, mandateOpts{claims: map[string]any{"checkout": checkout}})},
		{"decoy digests", buildMandate(t, mandateOpts{checkout: checkout, claims: map[string]any{"nested": map[string]any{"_sd": []string{"ZGVjb3k"}}}})},
		{"extra disclosed claims", buildMandate(t, mandateOpts{checkout: checkout, disclosures: [][]any{{"c2FsdDI", "merchant", "Demo"}}})},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := CheckMandate(withMandate(t, r, c.mandate)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
