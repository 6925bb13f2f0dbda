package grant_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
)

// approverIssuer is the approval service the tests expect receipts from.
const approverIssuer = "https://approver.test"

func testApproval() grant.ApprovalReceipt {
	return grant.ApprovalReceipt{Issuer: approverIssuer, Audience: grant.AudApproval, ID: "rcpt-1", RequestID: "req-1",
		OrgID: "org-1", IntentHash: digestA, Approver: "approver-7", Decision: grant.ApprovalApproved,
		Presence: grant.PresenceWebAuthnUV, IssuedAt: t0.Unix()}
}

// approverKeys looks up the approval service's keys by kid.
func approverKeys(keys ...grant.Key) func(string) (ed25519.PublicKey, error) {
	return func(kid string) (ed25519.PublicKey, error) {
		for _, k := range keys {
			if k.KID() == kid {
				return k.Public(), nil
			}
		}
		return nil, fmt.Errorf("approver key %q: %w", kid, grant.ErrUnknownKey)
	}
}

// canonicalOf is v's RFC 8785 JSON, as a receipt's payload must be.
func canonicalOf(t testing.TB, v any) string {
	t.Helper()
	b, err := canon.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestVerifyApprovalReceipt(t *testing.T) {
	approver, other := seedKey(t, 10), seedKey(t, 11)
	rc, err := grant.SignApprovalReceipt(approver, testApproval())
	if err != nil {
		t.Fatal(err)
	}
	verify := func(s string) (grant.ApprovalReceipt, string, error) {
		return grant.VerifyApprovalReceipt(s, approverKeys(approver), approverIssuer)
	}

	t.Run("good", func(t *testing.T) {
		got, kid, err := verify(rc)
		if err != nil || got != testApproval() || kid != approver.KID() {
			t.Fatalf("%+v %s %v", got, kid, err)
		}
		denied := testApproval()
		denied.Decision = grant.ApprovalDenied
		s, err := grant.SignApprovalReceipt(approver, denied)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := verify(s); err != nil || got.Decision != grant.ApprovalDenied {
			t.Fatalf("a denial: %+v %v", got, err)
		}
	})
	t.Run("another approval service", func(t *testing.T) {
		for _, iss := range []string{"https://approver.test/", "https://evil.example", ""} {
			_, kid, err := grant.VerifyApprovalReceipt(rc, approverKeys(approver), iss)
			wantErr(t, err, grant.ErrTokenIssuer)
			if kid != approver.KID() {
				t.Fatalf("kid %q not reported with the refusal", kid)
			}
		}
	})
	t.Run("another kind of token", func(t *testing.T) {
		// A grant, an effect receipt and an intent signed by the same key are
		// not approval receipts, and an approval receipt is none of them.
		_, _, err := verify(mustMint(t, approver, testClaims()))
		wantErr(t, err, grant.ErrTokenType)
		effect, err := grant.SignReceipt(approver, testReceipt())
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = verify(effect)
		wantErr(t, err, grant.ErrTokenType)
		_, _, err = verify(handSign(t, approver, header(approver, grant.TypIntent), canonicalOf(t, testApproval())))
		wantErr(t, err, grant.ErrTokenType)
		_, _, err = grant.VerifyReceipt(rc, providerKeys(approverIssuer, approver))
		wantErr(t, err, grant.ErrTokenType)
	})
	t.Run("header", func(t *testing.T) {
		payload := canonicalOf(t, testApproval())
		for name, h := range map[string]string{
			"alg none": `{"alg":"none","kid":"` + approver.KID() + `","typ":"` + grant.TypApprovalReceipt + `"}`,
			"no kid":   `{"alg":"EdDSA","typ":"` + grant.TypApprovalReceipt + `"}`,
			"jwk":      `{"alg":"EdDSA","jwk":{},"kid":"` + approver.KID() + `","typ":"` + grant.TypApprovalReceipt + `"}`,
			"jku":      `{"alg":"EdDSA","jku":"https://evil.example/jwks","kid":"` + approver.KID() + `","typ":"` + grant.TypApprovalReceipt + `"}`,
		} {
			t.Run(name, func(t *testing.T) {
				_, _, err := verify(handSign(t, approver, h, payload))
				var te *grant.TokenError
				if !errors.As(err, &te) {
					t.Fatalf("err = %v", err)
				}
			})
		}
	})
	t.Run("forged", func(t *testing.T) {
		// Signed by a key the approval service does not hold.
		forged, err := grant.SignApprovalReceipt(other, testApproval())
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = verify(forged)
		wantErr(t, err, grant.ErrUnknownKey)
		// The service's kid on another key's signature.
		parts := strings.Split(rc, ".")
		sig, err := other.Sign([]byte(parts[0] + "." + parts[1]))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = verify(parts[0] + "." + parts[1] + "." + b64.EncodeToString(sig))
		wantErr(t, err, grant.ErrTokenSignature)
		// Another intent under the original signature.
		r := testApproval()
		r.IntentHash = digestB
		_, _, err = verify(parts[0] + "." + b64.EncodeToString([]byte(canonicalOf(t, r))) + "." + parts[2])
		wantErr(t, err, grant.ErrTokenSignature)
	})
	t.Run("lookup failure passes through", func(t *testing.T) {
		_, _, err := grant.VerifyApprovalReceipt(rc, func(string) (ed25519.PublicKey, error) { return nil, errStoreDown }, approverIssuer)
		var te *grant.TokenError
		if !errors.Is(err, errStoreDown) || errors.As(err, &te) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("claims", func(t *testing.T) {
		good := canonicalOf(t, testApproval())
		for name, c := range map[string]struct {
			payload string
			want    error
		}{
			"no request_id":      {strings.Replace(good, `,"request_id":"req-1"`, ``, 1), grant.ErrTokenClaims},
			"no approver":        {strings.Replace(good, `"approver":"approver-7",`, ``, 1), grant.ErrTokenClaims},
			"no jti":             {strings.Replace(good, `"jti":"rcpt-1",`, ``, 1), grant.ErrTokenClaims},
			"no iat":             {strings.Replace(good, `"iat":`+fmt.Sprint(t0.Unix())+`,`, ``, 1), grant.ErrTokenClaims},
			"other aud":          {strings.Replace(good, grant.AudApproval, grant.AudGrant, 1), grant.ErrTokenAudience},
			"unknown decision":   {strings.Replace(good, `"APPROVED"`, `"APPROVED_BY_CLICK"`, 1), grant.ErrTokenClaims},
			"lowercase decision": {strings.Replace(good, `"APPROVED"`, `"approved"`, 1), grant.ErrTokenClaims},
			"presence by click":  {strings.Replace(good, grant.PresenceWebAuthnUV, "click", 1), grant.ErrTokenClaims},
			"bad intent_hash":    {strings.Replace(good, digestA, digestA[7:], 1), grant.ErrTokenClaims},
			"unknown member":     {strings.Replace(good, `{`, `{"a_member":1,`, 1), grant.ErrTokenClaims},
			"duplicate org":      {strings.Replace(good, `"org":"org-1"`, `"org":"org-1","org":"org-2"`, 1), grant.ErrTokenMalformed},
			"not canonical":      {strings.Replace(good, `{`, `{ `, 1), grant.ErrTokenMalformed},
			"members reordered":  {`{"iss":"` + approverIssuer + `",` + strings.Replace(good, `,"iss":"`+approverIssuer+`"`, ``, 1)[1:], grant.ErrTokenMalformed},
		} {
			t.Run(name, func(t *testing.T) {
				if c.payload == good {
					t.Fatal("case changes nothing")
				}
				_, _, err := verify(handSign(t, approver, header(approver, grant.TypApprovalReceipt), c.payload))
				wantErr(t, err, c.want)
			})
		}
		r := testApproval()
		r.Presence = ""
		_, err := grant.SignApprovalReceipt(approver, r)
		wantErr(t, err, grant.ErrTokenClaims)
	})
}

// FuzzVerifyApprovalReceipt: only the signed receipt verifies under the
// approval service's key.
func FuzzVerifyApprovalReceipt(f *testing.F) {
	approver := seedKey(f, 10)
	good, err := grant.SignApprovalReceipt(approver, testApproval())
	if err != nil {
		f.Fatal(err)
	}
	tokenSeeds(f, approver, grant.TypApprovalReceipt, good)
	lookup := approverKeys(approver)
	f.Fuzz(func(t *testing.T, s string) {
		r, kid, err := grant.VerifyApprovalReceipt(s, lookup, approverIssuer)
		if err != nil {
			wantCoded(t, err)
			if r != (grant.ApprovalReceipt{}) {
				t.Fatalf("claims returned with a refusal: %+v", r)
			}
			return
		}
		if s != good || kid != approver.KID() || r != testApproval() {
			t.Fatalf("verified a receipt that was never signed: %q → %+v (kid %q)", s, r, kid)
		}
	})
}

// An approval receipt verifies with go-jose too: its typ, EdDSA signature
// and payload are plain JOSE.
func TestApprovalReceiptWithGoJose(t *testing.T) {
	approver := seedKey(t, 10)
	rc, err := grant.SignApprovalReceipt(approver, testApproval())
	if err != nil {
		t.Fatal(err)
	}
	jws, err := jose.ParseSignedCompact(rc, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil || len(jws.Signatures) != 1 {
		t.Fatalf("parse: %v", err)
	}
	if typ := jws.Signatures[0].Protected.ExtraHeaders[jose.HeaderType]; typ != grant.TypApprovalReceipt {
		t.Fatalf("typ %v", typ)
	}
	payload, err := jws.Verify(approver.Public())
	if err != nil {
		t.Fatal(err)
	}
	if want := canonicalOf(t, testApproval()); string(payload) != want {
		t.Fatalf("payload %s, want %s", payload, want)
	}
}
