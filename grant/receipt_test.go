package grant_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/grant"
)

// provIssuer is the iss the test provider key is registered with.
const provIssuer = "https://provider.test"

func testReceipt() grant.ReceiptClaims {
	return grant.ReceiptClaims{Issuer: provIssuer, GrantID: "grant-1", IntentHash: digestA,
		EffectDigest: digestB, Outcome: "COMMITTED", IssuedAt: t0.Unix()}
}

// providerKeys looks keys up by kid, each registered with issuer iss.
func providerKeys(iss string, keys ...grant.Key) func(string) (grant.ReceiptKey, error) {
	return func(kid string) (grant.ReceiptKey, error) {
		for _, k := range keys {
			if k.KID() == kid {
				return grant.ReceiptKey{Public: k.Public(), Issuer: iss}, nil
			}
		}
		return grant.ReceiptKey{}, fmt.Errorf("provider key %q: %w", kid, grant.ErrUnknownKey)
	}
}

func TestVerifyReceipt(t *testing.T) {
	prov, other := seedKey(t, 8), seedKey(t, 9)
	rc, err := grant.SignReceipt(prov, testReceipt())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("good", func(t *testing.T) {
		got, kid, err := grant.VerifyReceipt(rc, providerKeys(provIssuer, prov))
		if err != nil {
			t.Fatal(err)
		}
		if got != testReceipt() || kid != prov.KID() {
			t.Fatalf("%+v %s", got, kid)
		}
		// The least a receipt says: no intent_hash, outcome or effect_digest
		// (a receipt without an effect digest cannot confirm an effect, but
		// it is a receipt).
		min := grant.ReceiptClaims{Issuer: "p", GrantID: "g", IssuedAt: 1}
		s, err := grant.SignReceipt(prov, min)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := grant.VerifyReceipt(s, providerKeys("p", prov)); err != nil || got != min {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("iss other than the key's issuer", func(t *testing.T) {
		for _, iss := range []string{"bank.evil.example", "https://provider.test/", "HTTPS://PROVIDER.TEST", ""} {
			_, kid, err := grant.VerifyReceipt(rc, providerKeys(iss, prov))
			wantErr(t, err, grant.ErrTokenIssuer)
			if kid != prov.KID() {
				t.Fatalf("kid %q not reported with the refusal", kid)
			}
		}
	})
	t.Run("wrong typ", func(t *testing.T) {
		_, kid, err := grant.VerifyReceipt(handSign(t, prov, header(prov, grant.TypIntent), jsonOf(t, testReceipt())), providerKeys(provIssuer, prov))
		wantErr(t, err, grant.ErrTokenType)
		if kid != prov.KID() {
			t.Fatalf("kid %q not reported with the refusal", kid)
		}
		_, _, err = grant.VerifyReceipt(mustMint(t, prov, testClaims()), providerKeys(provIssuer, prov))
		wantErr(t, err, grant.ErrTokenType)
	})
	t.Run("unknown kid", func(t *testing.T) {
		_, kid, err := grant.VerifyReceipt(rc, providerKeys(provIssuer, other))
		wantErr(t, err, grant.ErrUnknownKey)
		if kid != prov.KID() {
			t.Fatalf("kid %q", kid)
		}
	})
	t.Run("lookup failure passes through", func(t *testing.T) {
		_, _, err := grant.VerifyReceipt(rc, func(string) (grant.ReceiptKey, error) { return grant.ReceiptKey{}, errStoreDown })
		var te *grant.TokenError
		if !errors.Is(err, errStoreDown) || errors.As(err, &te) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("tampered payload", func(t *testing.T) {
		parts := strings.Split(rc, ".")
		c := testReceipt()
		c.EffectDigest = digestC
		_, _, err := grant.VerifyReceipt(parts[0]+"."+b64.EncodeToString([]byte(jsonOf(t, c)))+"."+parts[2], providerKeys(provIssuer, prov))
		wantErr(t, err, grant.ErrTokenSignature)
	})
	t.Run("claims", func(t *testing.T) {
		good := jsonOf(t, testReceipt())
		for name, payload := range map[string]string{
			"no grant_id":        strings.Replace(good, `"grant_id":"grant-1",`, ``, 1),
			"no iss":             strings.Replace(good, `"iss":"`+provIssuer+`",`, ``, 1),
			"no iat":             strings.Replace(good, `,"iat":`, `,"x_iat":`, 1),
			"bad effect_digest":  strings.Replace(good, digestB, "sha256:"+strings.ToUpper(digestB[7:]), 1),
			"hex effect_digest":  strings.Replace(good, digestB, digestB[7:], 1),
			"bad intent_hash":    strings.Replace(good, digestA, "abc", 1),
			"unknown member":     strings.Replace(good, `{`, `{"extra":1,`, 1),
			"duplicate grant_id": strings.Replace(good, `"grant_id":"grant-1"`, `"grant_id":"grant-1","grant_id":"grant-2"`, 1),
		} {
			t.Run(name, func(t *testing.T) {
				if payload == good {
					t.Fatal("case changes nothing")
				}
				_, _, err := grant.VerifyReceipt(handSign(t, prov, header(prov, grant.TypReceipt), payload), providerKeys(provIssuer, prov))
				var te *grant.TokenError
				if !errors.As(err, &te) || (te.Code() != grant.CodeTokenClaimsInvalid && te.Code() != grant.CodeTokenMalformed) {
					t.Fatalf("err = %v", err)
				}
			})
		}
		c := testReceipt()
		c.EffectDigest = "sha256:x"
		_, err := grant.SignReceipt(prov, c)
		wantErr(t, err, grant.ErrTokenClaims)
	})
}
