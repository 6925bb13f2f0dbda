package grant_test

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/grant"
)

func testReceipt() grant.ReceiptClaims {
	return grant.ReceiptClaims{Issuer: "https://provider.test", GrantID: "grant-1", IntentHash: digestA,
		EffectDigest: digestB, Outcome: "COMMITTED", IssuedAt: t0.Unix()}
}

func TestVerifyReceipt(t *testing.T) {
	prov, other := seedKey(t, 8), seedKey(t, 9)
	rc, err := grant.SignReceipt(prov, testReceipt())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("good", func(t *testing.T) {
		got, kid, err := grant.VerifyReceipt(rc, agentKeys(prov))
		if err != nil {
			t.Fatal(err)
		}
		if got != testReceipt() || kid != prov.KID() {
			t.Fatalf("%+v %s", got, kid)
		}
		min := grant.ReceiptClaims{Issuer: "p", GrantID: "g", EffectDigest: digestC, IssuedAt: 1}
		s, err := grant.SignReceipt(prov, min)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := grant.VerifyReceipt(s, agentKeys(prov)); err != nil || got != min {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("wrong typ", func(t *testing.T) {
		_, kid, err := grant.VerifyReceipt(handSign(t, prov, header(prov, grant.TypIntent), jsonOf(t, testReceipt())), agentKeys(prov))
		wantErr(t, err, grant.ErrTokenType)
		if kid != prov.KID() {
			t.Fatalf("kid %q not reported with the refusal", kid)
		}
		_, _, err = grant.VerifyReceipt(mustMint(t, prov, testClaims()), agentKeys(prov))
		wantErr(t, err, grant.ErrTokenType)
	})
	t.Run("unknown kid", func(t *testing.T) {
		_, kid, err := grant.VerifyReceipt(rc, agentKeys(other))
		wantErr(t, err, grant.ErrUnknownKey)
		if kid != prov.KID() {
			t.Fatalf("kid %q", kid)
		}
	})
	t.Run("lookup failure passes through", func(t *testing.T) {
		_, _, err := grant.VerifyReceipt(rc, func(string) (ed25519.PublicKey, error) { return nil, errStoreDown })
		var te *grant.TokenError
		if !errors.Is(err, errStoreDown) || errors.As(err, &te) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("tampered payload", func(t *testing.T) {
		parts := strings.Split(rc, ".")
		c := testReceipt()
		c.EffectDigest = digestC
		_, _, err := grant.VerifyReceipt(parts[0]+"."+b64.EncodeToString([]byte(jsonOf(t, c)))+"."+parts[2], agentKeys(prov))
		wantErr(t, err, grant.ErrTokenSignature)
	})
	t.Run("claims", func(t *testing.T) {
		good := jsonOf(t, testReceipt())
		for name, payload := range map[string]string{
			"no grant_id":        strings.Replace(good, `"grant_id":"grant-1",`, ``, 1),
			"no effect_digest":   strings.Replace(good, `"effect_digest":"`+digestB+`",`, ``, 1),
			"no iss":             strings.Replace(good, `"iss":"https://provider.test",`, ``, 1),
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
				_, _, err := grant.VerifyReceipt(handSign(t, prov, header(prov, grant.TypReceipt), payload), agentKeys(prov))
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
