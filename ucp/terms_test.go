package ucp

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func parseOK(t *testing.T, body []byte) *Checkout {
	t.Helper()
	c, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantTermsError(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidTerms || e.Pointer != "/ap2/merchant_authorization" || !errors.Is(err, ErrInvalidTerms) {
		t.Fatalf("got %v, want %s", err, CodeInvalidTerms)
	}
}

func TestVerifyTerms(t *testing.T) {
	merchant := publicKey(t, merchantKey(t), merchantKID)
	for _, r := range Releases() {
		t.Run(string(r), func(t *testing.T) {
			c := parseOK(t, signed(t, r))
			if err := VerifyTerms(c, lookupOf(merchant)); err != nil {
				t.Fatalf("valid signature: %v", err)
			}
			// Whitespace and member order do not matter: RFC 8785.
			var compact bytes.Buffer
			if err := json.Compact(&compact, signed(t, r)); err != nil {
				t.Fatal(err)
			}
			if err := VerifyTerms(parseOK(t, mutate(t, compact.Bytes(), func(map[string]any) {})), lookupOf(merchant)); err != nil {
				t.Fatalf("re-encoded: %v", err)
			}
			// A key parsed from its JWK verifies too.
			k, err := ParseMerchantJWK(jwkOf(t, &merchantKey(t).PublicKey, map[string]any{"kid": merchantKID, "alg": "ES256", "use": "sig"}))
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyTerms(c, lookupOf(k)); err != nil {
				t.Fatalf("JWK key: %v", err)
			}
		})
	}
}

func TestVerifyTermsRefusals(t *testing.T) {
	r := Release20260825
	merchant := publicKey(t, merchantKey(t), merchantKID)
	other := publicKey(t, testKey(t, elliptic.P256(), "another merchant"), merchantKID)

	t.Run("tampered total", func(t *testing.T) {
		c := parseOK(t, set(p("totals.2.amount"), n("5401"))(t, signed(t, r)))
		wantTermsError(t, VerifyTerms(c, lookupOf(merchant)))
	})
	t.Run("tampered extension member", func(t *testing.T) {
		c := parseOK(t, set(p("x_note"), "added")(t, signed(t, r)))
		wantTermsError(t, VerifyTerms(c, lookupOf(merchant)))
	})
	t.Run("wrong key", func(t *testing.T) {
		wantTermsError(t, VerifyTerms(parseOK(t, signed(t, r)), lookupOf(other)))
	})
	t.Run("unknown kid", func(t *testing.T) {
		err := VerifyTerms(parseOK(t, signed(t, r)), lookupOf(publicKey(t, merchantKey(t), "someone-else")))
		if !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("got %v, want ErrUnknownKey", err)
		}
		wantTermsError(t, err)
		var u unknownKID
		if !errors.As(err, &u) || string(u) != merchantKID {
			t.Fatal("the lookup's error is not kept")
		}
	})
	t.Run("other lookup error returned as is", func(t *testing.T) {
		boom := errors.New("store down")
		err := VerifyTerms(parseOK(t, signed(t, r)), func(string) (MerchantKey, error) { return MerchantKey{}, boom })
		if err != boom {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("no terms", func(t *testing.T) {
		wantTermsError(t, VerifyTerms(parseOK(t, official(t, r)), lookupOf(merchant)))
		wantTermsError(t, VerifyTerms(nil, lookupOf(merchant)))
	})
	t.Run("DER signature", func(t *testing.T) {
		c := parseOK(t, signed(t, r))
		payload, err := c.TermsPayload()
		if err != nil {
			t.Fatal(err)
		}
		header := strings.Split(c.Terms.JWS, ".")[0]
		digest := sha256.Sum256([]byte(header + "." + b64.EncodeToString(payload)))
		der, err := ecdsa.SignASN1(nil, merchantKey(t), digest[:])
		if err != nil {
			t.Fatal(err)
		}
		c.Terms.JWS = header + ".." + b64.EncodeToString(der)
		wantTermsError(t, VerifyTerms(c, lookupOf(merchant)))
		// Parse refuses it in the envelope already.
		_, err = Parse(set(p("ap2.merchant_authorization"), c.Terms.JWS)(t, signed(t, r)))
		wantTermsError(t, err)
	})
	t.Run("alg ES384 with a P-256 key", func(t *testing.T) {
		h := b64.EncodeToString([]byte(`{"alg":"ES384","kid":"` + merchantKID + `"}`))
		c := parseOK(t, set(p("ap2.merchant_authorization"), h+".."+b64.EncodeToString(make([]byte, 96)))(t, signed(t, r)))
		wantTermsError(t, VerifyTerms(c, lookupOf(merchant)))
	})
	t.Run("alg ES512 never verifies", func(t *testing.T) {
		h := b64.EncodeToString([]byte(`{"alg":"ES512","kid":"` + merchantKID + `"}`))
		c := parseOK(t, set(p("ap2.merchant_authorization"), h+".."+b64.EncodeToString(make([]byte, 132)))(t, signed(t, r)))
		wantTermsError(t, VerifyTerms(c, lookupOf(merchant)))
	})
	t.Run("key alg disagrees", func(t *testing.T) {
		k := merchant
		k.Alg = "ES384"
		wantTermsError(t, VerifyTerms(parseOK(t, signed(t, r)), lookupOf(k)))
	})
	t.Run("signature over the envelope with ap2", func(t *testing.T) {
		// A merchant that signed the whole body, ap2 included, is refused.
		c := parseOK(t, signed(t, r))
		header := strings.Split(c.Terms.JWS, ".")[0]
		input := header + "." + b64.EncodeToString(c.Canonical)
		c.Terms.JWS = header + ".." + b64.EncodeToString(signES(t, merchantKey(t), input))
		wantTermsError(t, VerifyTerms(c, lookupOf(merchant)))
	})
}

func TestVerifyTermsP384(t *testing.T) {
	key := testKey(t, elliptic.P384(), "merchant P-384")
	base := official(t, Release20260408)
	body := withMember(t, base, "ap2", map[string]string{"merchant_authorization": merchantAuthorization(t, key, merchant384KID, base)})
	c := parseOK(t, body)
	if c.Terms.Alg != "ES384" {
		t.Fatalf("alg %s", c.Terms.Alg)
	}
	if err := VerifyTerms(c, lookupOf(publicKey(t, key, merchant384KID))); err != nil {
		t.Fatal(err)
	}
	// The P-256 key under the same kid does not fit ES384.
	wantTermsError(t, VerifyTerms(c, lookupOf(publicKey(t, merchantKey(t), merchant384KID))))
}

func TestTermsPayloadDropsAP2(t *testing.T) {
	c := parseOK(t, mandated(t, Release20260825))
	payload, err := c.TermsPayload()
	if err != nil {
		t.Fatal(err)
	}
	plain := parseOK(t, official(t, Release20260825))
	if !bytes.Equal(payload, plain.Canonical) {
		t.Fatal("TermsPayload is not the envelope without ap2")
	}
}
