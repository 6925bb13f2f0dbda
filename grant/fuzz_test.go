package grant_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/grant"
)

// The targets below cover the token kinds FuzzVerify (grants),
// FuzzVerifyIntent and FuzzParsePublicJWK do not: claim attestations,
// verification envelopes and provider receipts. Each is seeded with the
// token minted under a fixed key (grant.KeyFromSeed), the other kinds
// signed by the same key, and hand-built near misses. The property: no input
// panics, nothing but the minted token verifies, and every refusal is a
// coded *TokenError (VerifyReceipt's lookup never fails with anything else).

// tokenSeeds adds the shared seeds: every kind minted by k, a foreign key's
// token, and malformed variants of good.
func tokenSeeds(f *testing.F, k grant.Key, typ, good string) {
	f.Helper()
	other := seedKey(f, 42)
	f.Add(good)
	f.Add(mustMint(f, k, testClaims()))
	if att, err := grant.MintAttestation(k, testAttestation()); err == nil {
		f.Add(att)
	}
	if env, err := grant.MintEnvelope(k, testEnvelope()); err == nil {
		f.Add(env)
	}
	if rc, err := grant.SignReceipt(k, testReceipt()); err == nil {
		f.Add(rc)
	}
	if s, err := grant.SignIntent(k, []byte(intentJSON)); err == nil {
		f.Add(s)
	}
	f.Add(handSign(f, other, header(other, typ), `{}`))
	f.Add(handSign(f, k, `{"alg":"none"}`, `{}`))
	f.Add(handSign(f, k, header(k, typ), `{}`))
	f.Add(handSign(f, k, header(k, typ), `{"jti":"a","jti":"b"}`))
	f.Add(handSign(f, k, header(k, typ), `[]`))
	f.Add(handSign(f, k, `{"alg":"EdDSA","kid":"`+k.KID()+`","typ":"`+typ+`","crit":["b64"]}`, `{}`))
	f.Add(good[:len(good)-1])
	f.Add(good + "A")
	f.Add(strings.Replace(good, ".", "..", 1))
	f.Add(strings.ToUpper(good))
	f.Add("")
	f.Add("..")
	f.Add("a.b.c")
}

func wantCoded(t *testing.T, err error) {
	t.Helper()
	var te *grant.TokenError
	if !errors.As(err, &te) || te.Code() == "" {
		t.Fatalf("refusal is not a coded *TokenError: %v", err)
	}
}

// FuzzVerifyAttestation: only the minted claim attestation verifies.
func FuzzVerifyAttestation(f *testing.F) {
	k := seedKey(f, 1)
	ring := grant.NewKeyRing(k)
	good, err := grant.MintAttestation(k, testAttestation())
	if err != nil {
		f.Fatal(err)
	}
	tokenSeeds(f, k, grant.TypAttestation, good)
	o := opts(t0.Add(time.Second))
	f.Fuzz(func(t *testing.T, s string) {
		a, err := grant.VerifyAttestation(s, ring, o)
		if err != nil {
			wantCoded(t, err)
			return
		}
		if s != good {
			t.Fatalf("verified an attestation that was never minted: %q → %+v", s, a)
		}
	})
}

// FuzzVerifyEnvelope: only the minted verification envelope verifies.
func FuzzVerifyEnvelope(f *testing.F) {
	k := seedKey(f, 1)
	ring := grant.NewKeyRing(k)
	good, err := grant.MintEnvelope(k, testEnvelope())
	if err != nil {
		f.Fatal(err)
	}
	tokenSeeds(f, k, grant.TypDecision, good)
	o := opts(t0.Add(time.Second))
	f.Fuzz(func(t *testing.T, s string) {
		e, err := grant.VerifyEnvelope(s, ring, o)
		if err != nil {
			wantCoded(t, err)
			return
		}
		if s != good {
			t.Fatalf("verified an envelope that was never minted: %q → %+v", s, e)
		}
	})
}

// FuzzVerifyReceipt: only the signed receipt verifies under the provider
// key; the kid returned with a refusal is the header's, or empty.
func FuzzVerifyReceipt(f *testing.F) {
	prov := seedKey(f, 8)
	good, err := grant.SignReceipt(prov, testReceipt())
	if err != nil {
		f.Fatal(err)
	}
	tokenSeeds(f, prov, grant.TypReceipt, good)
	lookup := providerKeys(provIssuer, prov)
	f.Fuzz(func(t *testing.T, s string) {
		c, kid, err := grant.VerifyReceipt(s, lookup)
		if err != nil {
			wantCoded(t, err)
			if c != (grant.ReceiptClaims{}) {
				t.Fatalf("claims returned with a refusal: %+v", c)
			}
			return
		}
		if s != good || kid != prov.KID() || c != testReceipt() {
			t.Fatalf("verified a receipt that was never signed: %q → %+v (kid %q)", s, c, kid)
		}
	})
}
