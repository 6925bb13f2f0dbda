package grant_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance/grant"
)

const (
	testIssuer = "https://clearance.test"
	digestA    = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB    = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	digestC    = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

// t0 is 2026-03-01T12:00:00Z.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var b64 = base64.RawURLEncoding

func seedKey(t testing.TB, b byte) grant.Key {
	t.Helper()
	k, err := grant.KeyFromSeed(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testClaims() grant.Claims {
	amount := 1250.5
	return grant.Claims{
		Issuer: testIssuer, Audience: grant.AudGrant, Subject: "agent-1", OrgID: "org-1", ID: "grant-1",
		IssuedAt: t0.Unix(), NotBefore: t0.Unix(), Expiry: t0.Add(120 * time.Second).Unix(),
		Action:     grant.Action{Type: "payment.send", Amount: &amount, Currency: "EUR", Target: "acct-<9>&"},
		IntentHash: digestA, PayloadDigest: digestB, PayloadProfile: grant.PayloadProfile, ExpectedEffectDigest: digestC,
		Nonce: "nonce-1", Scope: "acct-9", Correlation: "corr-1", DecisionID: "dec-1", DossierID: "dos-1", Mode: "ENFORCEMENT",
	}
}

func testAttestation() grant.Attestation {
	return grant.Attestation{
		Issuer: testIssuer, Audience: grant.AudAttestation, Subject: "agent-1", OrgID: "org-1", ID: "att-1",
		IssuedAt: t0.Unix(), Expiry: t0.Add(30 * time.Second).Unix(), GrantID: "grant-1", DecisionID: "dec-1", DossierID: "dos-1",
		Binding: grant.Binding{IntentHash: digestA, PayloadDigest: digestB, PayloadProfile: grant.PayloadProfile,
			ExpectedEffectDigest: digestC, Nonce: "nonce-1", Scope: "acct-9", Correlation: "corr-1"},
		ClaimTokenDigest: digestC, Action: grant.Action{Type: "payment.send"},
	}
}

func testEnvelope() grant.Envelope {
	return grant.Envelope{
		Issuer: testIssuer, Audience: grant.AudDecision, OrgID: "org-1", ID: "eval-1",
		IssuedAt: t0.Unix(), Expiry: t0.Add(120 * time.Second).Unix(), DecisionID: "dec-1", DossierID: "dos-1",
		IntentHash: digestA, Outcome: "ALLOW", ReasonCodes: []string{"POLICY_MATCHED"}, Mode: "ENFORCEMENT",
		PolicyVersion: "v3", BundleDigest: digestB, GrantID: "grant-1",
	}
}

func opts(now time.Time) grant.VerifyOptions {
	return grant.VerifyOptions{Now: now, Issuer: testIssuer}
}

func mustMint(t testing.TB, k grant.Key, c grant.Claims) string {
	t.Helper()
	tok, err := grant.Mint(k, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// handSign builds a compact JWS from raw header and payload JSON, signed by k.
func handSign(t testing.TB, k grant.Key, header, payload string) string {
	t.Helper()
	in := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString([]byte(payload))
	sig, err := k.Sign([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	return in + "." + b64.EncodeToString(sig)
}

func header(k grant.Key, typ string) string {
	return `{"alg":"EdDSA","kid":"` + k.KID() + `","typ":"` + typ + `"}`
}

// payloadOf returns the JSON of v as a map, so tests can edit members.
func payloadOf(t testing.TB, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func wantErr(t *testing.T, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("err = %v, want %v", err, sentinel)
	}
	var te *grant.TokenError
	if !errors.As(err, &te) {
		t.Fatalf("err %v is not a *TokenError", err)
	}
}

func TestRoundTrip(t *testing.T) {
	k := seedKey(t, 1)
	ring := grant.NewKeyRing(k)
	now := t0.Add(10 * time.Second)

	t.Run("grant", func(t *testing.T) {
		want := testClaims()
		tok := mustMint(t, k, want)
		got, err := grant.Verify(tok, ring, opts(now))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("claims (-minted +verified):\n%s", d)
		}
		hdr, _ := b64.DecodeString(strings.Split(tok, ".")[0])
		if string(hdr) != header(k, grant.TypGrant) {
			t.Fatalf("header %s", hdr)
		}
		// Optional members stay out of the payload when empty.
		c := testClaims()
		c.Action.Amount, c.ExpectedEffectDigest, c.Correlation = nil, "", ""
		tok = mustMint(t, k, c)
		payload, _ := b64.DecodeString(strings.Split(tok, ".")[1])
		for _, m := range []string{"amount", "expected_effect_digest", "corr"} {
			if bytes.Contains(payload, []byte(`"`+m+`"`)) {
				t.Errorf("payload has empty %s: %s", m, payload)
			}
		}
		if got, err := grant.Verify(tok, ring, opts(now)); err != nil || cmp.Diff(c, got) != "" {
			t.Fatalf("minimal grant: %v %s", err, cmp.Diff(c, got))
		}
	})
	t.Run("attestation", func(t *testing.T) {
		want := testAttestation()
		tok, err := grant.MintAttestation(k, want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := grant.VerifyAttestation(tok, ring, opts(now))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("attestation (-minted +verified):\n%s", d)
		}
	})
	t.Run("envelope", func(t *testing.T) {
		want := testEnvelope()
		tok, err := grant.MintEnvelope(k, want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := grant.VerifyEnvelope(tok, ring, opts(now))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("envelope (-minted +verified):\n%s", d)
		}
		e := testEnvelope()
		e.ReasonCodes, e.IntentHash, e.GrantID = nil, "", ""
		tok, err = grant.MintEnvelope(k, e)
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := b64.DecodeString(strings.Split(tok, ".")[1])
		if !bytes.Contains(payload, []byte(`"reason_codes":[]`)) {
			t.Fatalf("nil reason codes must be [] on the wire: %s", payload)
		}
	})
}

// tokens of every kind, by the same key, all live at t0+10s.
func allKinds(t *testing.T, k grant.Key) map[string]string {
	t.Helper()
	att, err := grant.MintAttestation(k, testAttestation())
	if err != nil {
		t.Fatal(err)
	}
	env, err := grant.MintEnvelope(k, testEnvelope())
	if err != nil {
		t.Fatal(err)
	}
	intent, err := grant.SignIntent(k, []byte(`{"intent_id":"i-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	receipt, err := grant.SignReceipt(k, grant.ReceiptClaims{Issuer: "prov", GrantID: "grant-1", EffectDigest: digestA, IssuedAt: t0.Unix()})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"grant": mustMint(t, k, testClaims()), "attestation": att, "envelope": env, "intent": intent, "receipt": receipt}
}

func TestKindsNeverCross(t *testing.T) {
	k := seedKey(t, 1)
	ring := grant.NewKeyRing(k)
	o := opts(t0.Add(10 * time.Second))
	lookup := func(string) (ed25519.PublicKey, error) { return k.Public(), nil }
	receiptLookup := providerKeys("prov", k) // allKinds signs its receipt as "prov"
	verifiers := map[string]func(string) error{
		"grant":       func(s string) error { _, err := grant.Verify(s, ring, o); return err },
		"attestation": func(s string) error { _, err := grant.VerifyAttestation(s, ring, o); return err },
		"envelope":    func(s string) error { _, err := grant.VerifyEnvelope(s, ring, o); return err },
		"intent":      func(s string) error { _, _, err := grant.VerifyIntent(s, lookup); return err },
		"receipt":     func(s string) error { _, _, err := grant.VerifyReceipt(s, receiptLookup); return err },
	}
	tokens := allKinds(t, k)
	for kind, tok := range tokens {
		for vkind, verify := range verifiers {
			t.Run(kind+"→"+vkind, func(t *testing.T) {
				err := verify(tok)
				if kind == vkind {
					if err != nil {
						t.Fatalf("own kind refused: %v", err)
					}
					return
				}
				wantErr(t, err, grant.ErrTokenType)
			})
		}
	}
}

func TestAlgorithm(t *testing.T) {
	k := seedKey(t, 1)
	ring := grant.NewKeyRing(k)
	now := t0.Add(10 * time.Second)
	payload := b64.EncodeToString([]byte(jsonOf(t, testClaims())))
	hs256 := func(header string) string {
		in := b64.EncodeToString([]byte(header)) + "." + payload
		mac := hmac.New(sha256.New, k.Public()) // the public key as the HMAC secret
		mac.Write([]byte(in))
		return in + "." + b64.EncodeToString(mac.Sum(nil))
	}
	eddsaSig := strings.Split(mustMint(t, k, testClaims()), ".")[2]
	cases := map[string]string{
		"none bare":      b64.EncodeToString([]byte(`{"alg":"none"}`)) + "." + payload + ".",
		"none full":      b64.EncodeToString([]byte(`{"alg":"none","kid":"`+k.KID()+`","typ":"`+grant.TypGrant+`"}`)) + "." + payload + ".",
		"HS256 pubkey":   hs256(`{"alg":"HS256","kid":"` + k.KID() + `","typ":"` + grant.TypGrant + `"}`),
		"HS256 no kid":   hs256(`{"alg":"HS256","typ":"` + grant.TypGrant + `"}`),
		"ES256":          b64.EncodeToString([]byte(`{"alg":"ES256","kid":"`+k.KID()+`","typ":"`+grant.TypGrant+`"}`)) + "." + payload + "." + eddsaSig,
		"Ed25519 name":   handSign(t, k, `{"alg":"Ed25519","kid":"`+k.KID()+`","typ":"`+grant.TypGrant+`"}`, jsonOf(t, testClaims())),
		"lowercase":      handSign(t, k, `{"alg":"eddsa","kid":"`+k.KID()+`","typ":"`+grant.TypGrant+`"}`, jsonOf(t, testClaims())),
		"missing alg":    handSign(t, k, `{"kid":"`+k.KID()+`","typ":"`+grant.TypGrant+`"}`, jsonOf(t, testClaims())),
		"null alg":       handSign(t, k, `{"alg":null,"kid":"`+k.KID()+`","typ":"`+grant.TypGrant+`"}`, jsonOf(t, testClaims())),
		"empty alg":      handSign(t, k, `{"alg":"","kid":"`+k.KID()+`","typ":"`+grant.TypGrant+`"}`, jsonOf(t, testClaims())),
		"none signature": b64.EncodeToString([]byte(`{"alg":"none"}`)) + "." + payload + "." + eddsaSig,
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := grant.Verify(tok, ring, opts(now))
			wantErr(t, err, grant.ErrTokenAlgorithm)
		})
	}
	// The same payload under a real EdDSA header verifies: the refusals
	// above are about alg alone.
	if _, err := grant.Verify(handSign(t, k, header(k, grant.TypGrant), jsonOf(t, testClaims())), ring, opts(now)); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownKey(t *testing.T) {
	k1, k2 := seedKey(t, 1), seedKey(t, 2)
	tok := mustMint(t, k2, testClaims())
	now := t0.Add(10 * time.Second)
	_, err := grant.Verify(tok, grant.NewKeyRing(k1), opts(now))
	wantErr(t, err, grant.ErrUnknownKey)
	_, err = grant.Verify(tok, nil, opts(now))
	wantErr(t, err, grant.ErrUnknownKey)
	var nilRing *grant.KeyRing
	_, err = grant.Verify(tok, nilRing, opts(now))
	wantErr(t, err, grant.ErrUnknownKey)
	// A kid that names k1 on a token signed by k2 is a bad signature.
	forged := handSign(t, k2, header(k1, grant.TypGrant), jsonOf(t, testClaims()))
	_, err = grant.Verify(forged, grant.NewKeyRing(k1), opts(now))
	wantErr(t, err, grant.ErrTokenSignature)
}

func TestForbiddenHeaders(t *testing.T) {
	k := seedKey(t, 1)
	ring := grant.NewKeyRing(k)
	now := t0.Add(10 * time.Second)
	jwk, err := json.Marshal(k.PublicJWK())
	if err != nil {
		t.Fatal(err)
	}
	base := `"alg":"EdDSA","kid":"` + k.KID() + `","typ":"` + grant.TypGrant + `"`
	extras := map[string]string{
		"jku":   `"jku":"https://evil.example/jwks.json"`,
		"jwk":   `"jwk":` + string(jwk),
		"x5u":   `"x5u":"https://evil.example/cert.pem"`,
		"x5c":   `"x5c":["MIIB"]`,
		"crit":  `"crit":["exp"],"exp":1`,
		"cty":   `"cty":"JWT"`,
		"b64":   `"b64":false`,
		"zip":   `"zip":"DEF"`,
		"nonce": `"nonce":"x"`,
		"ALG":   `"ALG":"EdDSA"`,
		"Kid":   `"Kid":"other"`,
	}
	payload := jsonOf(t, testClaims())
	for name, extra := range extras {
		t.Run(name, func(t *testing.T) {
			for _, h := range []string{"{" + base + "," + extra + "}", "{" + extra + "," + base + "}"} {
				_, err := grant.Verify(handSign(t, k, h, payload), ring, opts(now))
				wantErr(t, err, grant.ErrTokenHeader)
			}
		})
	}
	t.Run("no kid", func(t *testing.T) {
		_, err := grant.Verify(handSign(t, k, `{"alg":"EdDSA","typ":"`+grant.TypGrant+`"}`, payload), ring, opts(now))
		wantErr(t, err, grant.ErrTokenHeader)
		_, err = grant.Verify(handSign(t, k, `{"alg":"EdDSA","kid":"","typ":"`+grant.TypGrant+`"}`, payload), ring, opts(now))
		wantErr(t, err, grant.ErrTokenHeader)
	})
	t.Run("duplicate header member", func(t *testing.T) {
		h := `{"alg":"none",` + base + `}`
		_, err := grant.Verify(handSign(t, k, h, payload), ring, opts(now))
		wantErr(t, err, grant.ErrTokenMalformed)
	})
	t.Run("typ", func(t *testing.T) {
		for _, typ := range []string{`"JWT"`, `"CLEARANCE-GRANT+JWT"`, `"application/clearance-grant+jwt"`, `""`, `null`} {
			h := `{"alg":"EdDSA","kid":"` + k.KID() + `","typ":` + typ + `}`
			_, err := grant.Verify(handSign(t, k, h, payload), ring, opts(now))
			wantErr(t, err, grant.ErrTokenType)
		}
		_, err := grant.Verify(handSign(t, k, `{"alg":"EdDSA","kid":"`+k.KID()+`"}`, payload), ring, opts(now))
		wantErr(t, err, grant.ErrTokenType)
	})
}

func TestEveryBitFlip(t *testing.T) {
	k := seedKey(t, 1)
	ring := grant.NewKeyRing(k)
	now := t0.Add(10 * time.Second)
	lookup := func(string) (ed25519.PublicKey, error) { return k.Public(), nil }
	receiptLookup := providerKeys("prov", k)
	tokens := allKinds(t, k)
	verify := map[string]func(string) error{
		"grant":       func(s string) error { _, err := grant.Verify(s, ring, opts(now)); return err },
		"attestation": func(s string) error { _, err := grant.VerifyAttestation(s, ring, opts(now)); return err },
		"intent":      func(s string) error { _, _, err := grant.VerifyIntent(s, lookup); return err },
		"receipt":     func(s string) error { _, _, err := grant.VerifyReceipt(s, receiptLookup); return err },
	}
	for kind, v := range verify {
		t.Run(kind, func(t *testing.T) {
			tok := tokens[kind]
			if err := v(tok); err != nil {
				t.Fatalf("untouched token: %v", err)
			}
			b := []byte(tok)
			for i := range b {
				for bit := range 8 {
					b[i] ^= 1 << bit
					if err := v(string(b)); err == nil {
						t.Fatalf("flipping bit %d of byte %d (%q) still verifies", bit, i, tok[i])
					}
					b[i] ^= 1 << bit
				}
			}
		})
	}
}

func TestLifetime(t *testing.T) {
	k := seedKey(t, 1)
	ring := grant.NewKeyRing(k)
	c := testClaims()
	c.NotBefore = t0.Add(5 * time.Second).Unix()
	tok := mustMint(t, k, c)
	nbf, exp := time.Unix(c.NotBefore, 0), time.Unix(c.Expiry, 0)
	cases := []struct {
		name     string
		now      time.Time
		ignore   bool
		lifetime bool
		want     error
	}{
		{"before nbf", nbf.Add(-time.Second), false, false, grant.ErrTokenNotYetValid},
		{"just before nbf", nbf.Add(-time.Nanosecond), false, false, grant.ErrTokenNotYetValid},
		{"at nbf", nbf, false, false, nil},
		{"last second", exp.Add(-time.Second), false, false, nil},
		{"last nanosecond", exp.Add(-time.Nanosecond), false, false, nil},
		{"at exp", exp, false, false, grant.ErrTokenExpired},
		{"after exp", exp.Add(time.Hour), false, false, grant.ErrTokenExpired},
		{"at exp, expiry ignored", exp, true, false, nil},
		{"before nbf, expiry ignored", nbf.Add(-time.Second), true, false, grant.ErrTokenNotYetValid},
		{"before nbf, lifetime ignored", nbf.Add(-time.Hour), false, true, nil},
		{"after exp, lifetime ignored", exp.Add(time.Hour), false, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := grant.Verify(tok, ring, grant.VerifyOptions{Now: tc.now, Issuer: testIssuer, IgnoreExpiry: tc.ignore,
				IgnoreLifetime: tc.lifetime})
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, tc.want)
		})
	}
	t.Run("attestation at lease end", func(t *testing.T) {
		a := testAttestation()
		tok, err := grant.MintAttestation(k, a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := grant.VerifyAttestation(tok, ring, opts(time.Unix(a.Expiry-1, 0))); err != nil {
			t.Fatal(err)
		}
		_, err = grant.VerifyAttestation(tok, ring, opts(time.Unix(a.Expiry, 0)))
		wantErr(t, err, grant.ErrTokenExpired)
	})
	t.Run("envelope at exp", func(t *testing.T) {
		e := testEnvelope()
		tok, err := grant.MintEnvelope(k, e)
		if err != nil {
			t.Fatal(err)
		}
		_, err = grant.VerifyEnvelope(tok, ring, opts(time.Unix(e.Expiry, 0)))
		wantErr(t, err, grant.ErrTokenExpired)
	})
	t.Run("zero clock", func(t *testing.T) {
		if _, err := grant.Verify(tok, ring, grant.VerifyOptions{}); err == nil {
			t.Fatal("verified without a clock")
		}
		att, _ := grant.MintAttestation(k, testAttestation())
		if _, err := grant.VerifyAttestation(att, ring, grant.VerifyOptions{}); err == nil {
			t.Fatal("verified an attestation without a clock")
		}
	})
}

// TestIssuedAtInTheFuture: a token whose iat is later than Now plus
// VerifyOptions.MaxFutureIssuedAt is not yet valid, whatever its nbf says;
// every kind is checked the same way.
func TestIssuedAtInTheFuture(t *testing.T) {
	k := seedKey(t, 1)
	ring := grant.NewKeyRing(k)
	c := testClaims()
	c.NotBefore, c.IssuedAt, c.Expiry = t0.Unix(), t0.Add(100*time.Second).Unix(), t0.Add(200*time.Second).Unix()
	tok := mustMint(t, k, c)
	a := testAttestation()
	a.IssuedAt, a.Expiry = c.IssuedAt, c.Expiry
	att, err := grant.MintAttestation(k, a)
	if err != nil {
		t.Fatal(err)
	}
	e := testEnvelope()
	e.IssuedAt, e.Expiry = c.IssuedAt, c.Expiry
	env, err := grant.MintEnvelope(k, e)
	if err != nil {
		t.Fatal(err)
	}
	iat := time.Unix(c.IssuedAt, 0)
	cases := []struct {
		name string
		now  time.Time
		skew time.Duration
		ok   bool
	}{
		{"iat 100 s ahead, no skew", t0, 0, false},
		{"iat 100 s ahead, 60 s skew", t0, time.Minute, false},
		{"iat 1 s ahead, no skew", iat.Add(-time.Second), 0, false},
		{"iat within the skew", iat.Add(-time.Minute), time.Minute, true},
		{"iat just beyond the skew", iat.Add(-time.Minute - time.Second), time.Minute, false},
		{"at iat, no skew", iat, 0, true},
		{"after iat, no skew", iat.Add(time.Second), 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := grant.VerifyOptions{Now: tc.now, Issuer: testIssuer, MaxFutureIssuedAt: tc.skew}
			_, errG := grant.Verify(tok, ring, o)
			_, errA := grant.VerifyAttestation(att, ring, o)
			_, errE := grant.VerifyEnvelope(env, ring, o)
			for kind, err := range map[string]error{"grant": errG, "attestation": errA, "envelope": errE} {
				if tc.ok && err != nil {
					t.Errorf("%s: %v", kind, err)
				}
				if !tc.ok && !errors.Is(err, grant.ErrTokenNotYetValid) {
					t.Errorf("%s: %v, want %v", kind, err, grant.ErrTokenNotYetValid)
				}
			}
		})
	}
}

func TestAudienceAndIssuer(t *testing.T) {
	k := seedKey(t, 1)
	ring := grant.NewKeyRing(k)
	now := t0.Add(10 * time.Second)
	for _, aud := range []string{"", grant.AudAttestation, grant.AudDecision, "CLEARANCE-EXECUTION"} {
		c := testClaims()
		c.Audience = aud
		_, err := grant.Mint(k, c)
		wantErr(t, err, grant.ErrTokenAudience)
		// Hand-signed, so Verify sees it.
		tok := handSign(t, k, header(k, grant.TypGrant), jsonOf(t, c))
		_, err = grant.Verify(tok, ring, opts(now))
		wantErr(t, err, grant.ErrTokenAudience)
	}
	a := testAttestation()
	a.Audience = grant.AudGrant
	_, err := grant.MintAttestation(k, a)
	wantErr(t, err, grant.ErrTokenAudience)
	_, err = grant.VerifyAttestation(handSign(t, k, header(k, grant.TypAttestation), jsonOf(t, a)), ring, opts(now))
	wantErr(t, err, grant.ErrTokenAudience)
	e := testEnvelope()
	e.Audience = grant.AudAttestation
	_, err = grant.MintEnvelope(k, e)
	wantErr(t, err, grant.ErrTokenAudience)
	_, err = grant.VerifyEnvelope(handSign(t, k, header(k, grant.TypDecision), jsonOf(t, e)), ring, opts(now))
	wantErr(t, err, grant.ErrTokenAudience)

	tok := mustMint(t, k, testClaims())
	_, err = grant.Verify(tok, ring, grant.VerifyOptions{Now: now, Issuer: "https://other.test"})
	wantErr(t, err, grant.ErrTokenIssuer)
	if _, err := grant.Verify(tok, ring, grant.VerifyOptions{Now: now}); err != nil {
		t.Fatalf("no issuer expected: %v", err)
	}
}

func TestStrictPayload(t *testing.T) {
	k := seedKey(t, 1)
	ring := grant.NewKeyRing(k)
	now := t0.Add(10 * time.Second)
	good := jsonOf(t, testClaims())
	cases := []struct {
		name, payload string
		want          error
	}{
		{"duplicate jti", strings.Replace(good, `"jti":"grant-1"`, `"jti":"grant-1","jti":"grant-2"`, 1), grant.ErrTokenMalformed},
		{"duplicate intent_hash", strings.Replace(good, `"nonce"`, `"intent_hash":"`+digestB+`","nonce"`, 1), grant.ErrTokenMalformed},
		{"duplicate nested", strings.Replace(good, `"type":"payment.send"`, `"type":"payment.send","type":"noop"`, 1), grant.ErrTokenMalformed},
		{"trailing data", good + `{}`, grant.ErrTokenMalformed},
		{"invalid utf-8", strings.Replace(good, `agent-1`, "agent-\xff", 1), grant.ErrTokenMalformed},
		{"not an object", `["x"]`, grant.ErrTokenClaims},
		{"empty", ``, grant.ErrTokenMalformed},
		{"unknown member", strings.Replace(good, `{`, `{"admin":true,`, 1), grant.ErrTokenClaims},
		{"unknown nested member", strings.Replace(good, `"type":"payment.send"`, `"type":"payment.send","limit":1`, 1), grant.ErrTokenClaims},
		{"case-folded member", strings.Replace(good, `"jti"`, `"JTI"`, 1), grant.ErrTokenClaims},
		{"string exp", strings.Replace(good, fmt.Sprintf(`"exp":%d`, t0.Add(120*time.Second).Unix()), `"exp":"never"`, 1), grant.ErrTokenClaims},
		{"malformed digest", strings.Replace(good, digestA, "sha256:AAAA", 1), grant.ErrTokenClaims},
		{"other profile", strings.Replace(good, `"JCS-SHA256"`, `"RAW"`, 1), grant.ErrTokenClaims},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.payload == good {
				t.Fatal("the case does not change the payload")
			}
			_, err := grant.Verify(handSign(t, k, header(k, grant.TypGrant), tc.payload), ring, opts(now))
			wantErr(t, err, tc.want)
		})
	}
	if _, err := grant.Verify(handSign(t, k, header(k, grant.TypGrant), good), ring, opts(now)); err != nil {
		t.Fatal(err)
	}
}

func TestRequiredClaims(t *testing.T) {
	k := seedKey(t, 1)
	ring := grant.NewKeyRing(k)
	now := t0.Add(10 * time.Second)
	kinds := []struct {
		typ      string
		claims   any
		required []string
		verify   func(string) error
	}{
		{grant.TypGrant, testClaims(),
			[]string{"jti", "sub", "org", "act", "intent_hash", "nonce", "scope", "decision_id", "dossier_id", "iat", "nbf", "exp"},
			func(s string) error { _, err := grant.Verify(s, ring, opts(now)); return err }},
		{grant.TypAttestation, testAttestation(),
			[]string{"jti", "org", "grant_id", "claim_token_digest", "binding", "iat", "exp"},
			func(s string) error { _, err := grant.VerifyAttestation(s, ring, opts(now)); return err }},
		{grant.TypDecision, testEnvelope(),
			[]string{"jti", "org", "decision_id", "dossier_id", "outcome", "mode", "iat", "exp"},
			func(s string) error { _, err := grant.VerifyEnvelope(s, ring, opts(now)); return err }},
	}
	for _, kind := range kinds {
		for _, member := range kind.required {
			t.Run(kind.typ+"/"+member, func(t *testing.T) {
				m := payloadOf(t, kind.claims)
				delete(m, member)
				err := kind.verify(handSign(t, k, header(k, kind.typ), jsonOf(t, m)))
				wantErr(t, err, grant.ErrTokenClaims)
			})
		}
	}
	// Mint refuses the same.
	c := testClaims()
	c.Nonce = ""
	_, err := grant.Mint(k, c)
	wantErr(t, err, grant.ErrTokenClaims)
	c = testClaims()
	c.Expiry = c.NotBefore
	_, err = grant.Mint(k, c)
	wantErr(t, err, grant.ErrTokenClaims)
	a := testAttestation()
	a.Binding.IntentHash = ""
	_, err = grant.MintAttestation(k, a)
	wantErr(t, err, grant.ErrTokenClaims)
	if _, err := grant.Mint(grant.Key{}, testClaims()); !errors.Is(err, grant.ErrInvalidKey) {
		t.Fatalf("zero key: %v", err)
	}
}

func TestMalformed(t *testing.T) {
	k := seedKey(t, 1)
	ring := grant.NewKeyRing(k)
	now := t0.Add(10 * time.Second)
	tok := mustMint(t, k, testClaims())
	parts := strings.Split(tok, ".")

	// The same claims, signed by the same key, in the JWS JSON serialization.
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))},
		(&jose.SignerOptions{}).WithType(grant.TypGrant).WithHeader("kid", k.KID()))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign([]byte(jsonOf(t, testClaims())))
	if err != nil {
		t.Fatal(err)
	}
	compact, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := grant.Verify(compact, ring, opts(now)); err != nil {
		t.Fatalf("go-jose compact form: %v", err)
	}
	lastSig := parts[2][len(parts[2])-1]
	nonCanonical := parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-1] + string(lastSig+1) // a trailing bit set

	cases := map[string]string{
		"JSON serialization":     obj.FullSerialize(),
		"flattened JSON":         `{"protected":"` + parts[0] + `","payload":"` + parts[1] + `","signature":"` + parts[2] + `"}`,
		"empty":                  "",
		"two segments":           parts[0] + "." + parts[1],
		"four segments":          tok + "." + parts[2],
		"detached payload":       parts[0] + ".." + parts[2],
		"empty header":           "." + parts[1] + "." + parts[2],
		"padded":                 parts[0] + "=." + parts[1] + "." + parts[2],
		"newline in payload":     parts[0] + "." + parts[1][:10] + "\n" + parts[1][10:] + "." + parts[2],
		"CR in signature":        parts[0] + "." + parts[1] + "." + parts[2][:10] + "\r" + parts[2][10:],
		"space":                  " " + tok,
		"trailing newline":       tok + "\n",
		"standard base64":        strings.NewReplacer("-", "+", "_", "/").Replace(tok),
		"non-canonical trailing": nonCanonical,
		"header not JSON":        b64.EncodeToString([]byte("alg=EdDSA")) + "." + parts[1] + "." + parts[2],
		"too long":               tok + strings.Repeat("A", grant.MaxTokenSize),
	}
	if !strings.ContainsAny(tok, "-_") {
		delete(cases, "standard base64")
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := grant.Verify(s, ring, opts(now))
			wantErr(t, err, grant.ErrTokenMalformed)
		})
	}
	t.Run("short signature", func(t *testing.T) {
		_, err := grant.Verify(parts[0]+"."+parts[1]+"."+parts[2][:40], ring, opts(now))
		wantErr(t, err, grant.ErrTokenSignature)
	})
}

func TestKeyRotation(t *testing.T) {
	oldKey, newKey := seedKey(t, 1), seedKey(t, 2)
	ring := grant.NewKeyRing(oldKey)
	oldTok := mustMint(t, oldKey, testClaims()) // valid t0 … t0+120s
	rotatedAt := t0.Add(10 * time.Second)
	drain := 120*time.Second + 30*time.Second
	rotated := ring.Rotate(newKey, rotatedAt, drain)
	keepUntil := rotatedAt.Add(drain)

	if _, err := grant.Verify(oldTok, rotated, opts(t0.Add(60*time.Second))); err != nil {
		t.Fatalf("old-key grant after rotation: %v", err)
	}
	published := false
	for _, jwk := range rotated.JWKS(keepUntil.Add(-time.Second)).Keys {
		published = published || jwk.KeyID == oldKey.KID()
	}
	if !published {
		t.Fatal("old key not published before KeepUntil")
	}
	// An attestation the old key signed just before rotation lives until its
	// lease ends, well within KeepUntil.
	a := testAttestation()
	a.IssuedAt, a.Expiry = rotatedAt.Add(-time.Second).Unix(), rotatedAt.Add(29*time.Second).Unix()
	att, err := grant.MintAttestation(oldKey, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := grant.VerifyAttestation(att, rotated.Prune(keepUntil.Add(-time.Second)), opts(rotatedAt.Add(28*time.Second))); err != nil {
		t.Fatalf("old-key attestation before KeepUntil: %v", err)
	}
	// New tokens are signed by the new key and verify; the old ring does not know it.
	c := testClaims()
	c.IssuedAt, c.NotBefore, c.Expiry = rotatedAt.Unix(), rotatedAt.Unix(), rotatedAt.Add(120*time.Second).Unix()
	newTok := mustMint(t, rotated.Active(), c)
	if _, err := grant.Verify(newTok, rotated, opts(rotatedAt.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	_, err = grant.Verify(newTok, ring, opts(rotatedAt.Add(time.Second)))
	wantErr(t, err, grant.ErrUnknownKey)
	// At KeepUntil the pruned ring no longer knows the old key.
	_, err = grant.Verify(oldTok, rotated.Prune(keepUntil), grant.VerifyOptions{Now: keepUntil, IgnoreExpiry: true})
	wantErr(t, err, grant.ErrUnknownKey)
}

func TestTokenErrorCodes(t *testing.T) {
	k := seedKey(t, 1)
	ring := grant.NewKeyRing(k)
	tok := mustMint(t, k, testClaims())
	cases := []struct {
		err  error
		code string
	}{
		{func() error { _, err := grant.Verify("x", ring, opts(t0)); return err }(), "TOKEN_MALFORMED"},
		{func() error { _, err := grant.Verify(tok, grant.NewKeyRing(seedKey(t, 3)), opts(t0)); return err }(), "TOKEN_UNKNOWN_KEY"},
		{func() error { _, err := grant.Verify(tok, ring, opts(t0.Add(time.Hour))); return err }(), "TOKEN_EXPIRED"},
		{func() error { _, err := grant.Verify(tok, ring, opts(t0.Add(-time.Hour))); return err }(), "TOKEN_NOT_YET_VALID"},
		{func() error { _, err := grant.VerifyAttestation(tok, ring, opts(t0)); return err }(), "TOKEN_TYPE"},
	}
	for _, tc := range cases {
		var te *grant.TokenError
		if !errors.As(tc.err, &te) || te.Code() != tc.code {
			t.Errorf("%v: code %q, want %s", tc.err, te.Code(), tc.code)
		}
	}
	sentinels := map[error]string{
		grant.ErrTokenMalformed: grant.CodeTokenMalformed, grant.ErrTokenAlgorithm: grant.CodeTokenAlgorithm,
		grant.ErrTokenType: grant.CodeTokenType, grant.ErrTokenHeader: grant.CodeTokenHeader,
		grant.ErrUnknownKey: grant.CodeUnknownKey, grant.ErrTokenSignature: grant.CodeTokenSignature,
		grant.ErrTokenAudience: grant.CodeTokenAudience, grant.ErrTokenIssuer: grant.CodeTokenIssuer,
		grant.ErrTokenExpired: grant.CodeTokenExpired, grant.ErrTokenNotYetValid: grant.CodeTokenNotYetValid,
		grant.ErrTokenClaims: grant.CodeTokenClaimsInvalid,
	}
	seen := map[string]bool{}
	for _, code := range sentinels {
		if seen[code] || !strings.HasPrefix(code, "TOKEN_") {
			t.Errorf("code %q repeated or unprefixed", code)
		}
		seen[code] = true
	}
	if len(seen) != 11 {
		t.Fatalf("%d codes, want 11", len(seen))
	}
}

// FuzzVerify: nothing but the token as minted verifies under the key; no
// input panics.
func FuzzVerify(f *testing.F) {
	k := seedKey(f, 1)
	ring := grant.NewKeyRing(k)
	good := mustMint(f, k, testClaims())
	att, _ := grant.MintAttestation(k, testAttestation())
	f.Add(good)
	f.Add(att)
	f.Add(handSign(f, k, `{"alg":"none"}`, `{}`))
	f.Add(handSign(f, k, header(k, grant.TypGrant), `{"jti":"a","jti":"b"}`))
	f.Fuzz(func(t *testing.T, s string) {
		c, err := grant.Verify(s, ring, opts(t0.Add(time.Second)))
		if err == nil && s != good {
			t.Fatalf("verified a token that was never minted: %q → %+v", s, c)
		}
		if err != nil {
			var te *grant.TokenError
			if !errors.As(err, &te) || te.Code() == "" {
				t.Fatalf("refusal is not a coded *TokenError: %v", err)
			}
		}
	})
}

func BenchmarkMint(b *testing.B) {
	k := seedKey(b, 1)
	c := testClaims()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := grant.Mint(k, c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	k := seedKey(b, 1)
	ring := grant.NewKeyRing(k).Rotate(seedKey(b, 2), t0, time.Minute).Rotate(k, t0, time.Minute)
	tok := mustMint(b, k, testClaims())
	o := opts(t0.Add(time.Second))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := grant.Verify(tok, ring, o); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyAttestation(b *testing.B) {
	k := seedKey(b, 1)
	ring := grant.NewKeyRing(k)
	tok, err := grant.MintAttestation(k, testAttestation())
	if err != nil {
		b.Fatal(err)
	}
	o := opts(t0.Add(time.Second))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := grant.VerifyAttestation(tok, ring, o); err != nil {
			b.Fatal(err)
		}
	}
}

// TestVerifyRecognize shows what Recognize may skip (the Ed25519 check of
// bytes the issuer recorded) and what it never skips.
func TestVerifyRecognize(t *testing.T) {
	k := seedKey(t, 1)
	keys := grant.NewKeyRing(k)
	tok := mustMint(t, k, testClaims())
	recorded := sha256.Sum256([]byte(tok))
	var asked []string
	o := opts(t0)
	o.Recognize = func(jti string, d [sha256.Size]byte) bool {
		asked = append(asked, jti)
		return d == recorded
	}

	if _, err := grant.Verify(tok, keys, o); err != nil || len(asked) != 1 || asked[0] != "grant-1" {
		t.Fatalf("recorded token: err %v, asked %v", err, asked)
	}
	// A token whose bytes differ from the record gets the signature check.
	bad := tok[:len(tok)-2] + flip(tok[len(tok)-2:len(tok)-1]) + tok[len(tok)-1:]
	if _, err := grant.Verify(bad, keys, o); !errors.Is(err, grant.ErrTokenSignature) {
		t.Fatalf("tampered signature: %v, want ErrTokenSignature", err)
	}
	// Recognition never replaces the key, lifetime or claim checks.
	always := opts(t0)
	always.Recognize = func(string, [sha256.Size]byte) bool { return true }
	if _, err := grant.Verify(tok, grant.NewKeyRing(seedKey(t, 2)), always); !errors.Is(err, grant.ErrUnknownKey) {
		t.Fatalf("retired kid: %v, want ErrUnknownKey", err)
	}
	late := always
	late.Now = t0.Add(120 * time.Second)
	if _, err := grant.Verify(tok, keys, late); !errors.Is(err, grant.ErrTokenExpired) {
		t.Fatalf("expired: %v, want ErrTokenExpired", err)
	}
	forged := strings.Join([]string{strings.Split(tok, ".")[0], b64.EncodeToString([]byte(`{"jti":"grant-1"}`)), "AAAA"}, ".")
	if _, err := grant.Verify(forged, keys, always); err == nil {
		t.Fatal("a recognized token with invalid claims verified")
	}
}

// flip returns a different base64url character than c.
func flip(c string) string {
	if c == "A" {
		return "B"
	}
	return "A"
}

// A retired key verifies until its KeepUntil and nothing from then on, with
// the unpruned ring: the rule the JWKS applies, at the verifier's clock.
func TestRetiredKeyVerifiesNothingPastKeepUntil(t *testing.T) {
	oldKey, newKey := seedKey(t, 1), seedKey(t, 2)
	tok := mustMint(t, oldKey, testClaims())
	drain := 150 * time.Second
	ring := grant.NewKeyRing(oldKey).Rotate(newKey, t0, drain)
	keepUntil := t0.Add(drain)
	// IgnoreExpiry isolates the key check from the token's own lifetime.
	if _, err := grant.Verify(tok, ring, grant.VerifyOptions{Now: keepUntil.Add(-time.Nanosecond), IgnoreExpiry: true}); err != nil {
		t.Fatalf("before KeepUntil: %v", err)
	}
	for _, at := range []time.Time{keepUntil, keepUntil.Add(time.Hour)} {
		_, err := grant.Verify(tok, ring, grant.VerifyOptions{Now: at, IgnoreExpiry: true})
		wantErr(t, err, grant.ErrUnknownKey)
	}
	a := testAttestation()
	att, err := grant.MintAttestation(oldKey, a)
	if err != nil {
		t.Fatal(err)
	}
	_, err = grant.VerifyAttestation(att, ring, grant.VerifyOptions{Now: keepUntil, IgnoreExpiry: true})
	wantErr(t, err, grant.ErrUnknownKey)
}
