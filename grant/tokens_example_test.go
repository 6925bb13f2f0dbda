package grant_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance/grant"
)

// Mint signs a grant; Verify checks it with the ring that holds the key.
// Ed25519 is deterministic and the clock is an argument, so this is
// reproducible.
func ExampleMint() {
	key, _ := grant.KeyFromSeed(bytes.Repeat([]byte{7}, 32))
	ring := grant.NewKeyRing(key)
	issued := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	amount := 250.0

	token, err := grant.Mint(ring.Active(), grant.Claims{
		Issuer: "https://clearance.example", Audience: grant.AudGrant, Subject: "agent-7", OrgID: "org-1",
		ID: "grant-42", IssuedAt: issued.Unix(), NotBefore: issued.Unix(), Expiry: issued.Add(120 * time.Second).Unix(),
		Action:         grant.Action{Type: "payment.send", Amount: &amount, Currency: "EUR", Target: "acct-9"},
		IntentHash:     "sha256:8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4",
		PayloadDigest:  "sha256:a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3",
		PayloadProfile: grant.PayloadProfile, Nonce: "n-1", Scope: "acct-9", DecisionID: "dec-1", DossierID: "dos-1",
		Mode: "ENFORCEMENT",
	})
	if err != nil {
		panic(err)
	}

	c, err := grant.Verify(token, ring, grant.VerifyOptions{Now: issued.Add(30 * time.Second), Issuer: "https://clearance.example"})
	fmt.Println(c.ID, c.IntentHash, err)
	_, err = grant.Verify(token, ring, grant.VerifyOptions{Now: issued.Add(120 * time.Second)})
	fmt.Println(errors.Is(err, grant.ErrTokenExpired))
	// Output:
	// grant-42 sha256:8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4 <nil>
	// true
}

// A downstream system verifies a claim attestation with go-jose alone,
// against the published JWKS (the code of the package documentation).
func Example_offline() {
	key, _ := grant.KeyFromSeed(bytes.Repeat([]byte{7}, 32))
	ring := grant.NewKeyRing(key)
	claimed := time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC)
	att, err := grant.MintAttestation(ring.Active(), grant.Attestation{
		Issuer: "https://clearance.example", Audience: grant.AudAttestation, Subject: "agent-7", OrgID: "org-1",
		ID: "att-1", IssuedAt: claimed.Unix(), Expiry: claimed.Add(30 * time.Second).Unix(),
		GrantID: "grant-42", DecisionID: "dec-1", DossierID: "dos-1",
		ClaimTokenDigest: "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
		Binding: grant.Binding{IntentHash: "sha256:8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4",
			PayloadProfile: grant.PayloadProfile, Nonce: "n-1", Scope: "acct-9"},
		Action: grant.Action{Type: "payment.send"},
	})
	if err != nil {
		panic(err)
	}
	jwks, _ := json.Marshal(ring.JWKS(claimed)) // what /.well-known/clearance-execution-grant-jwks.json serves

	fmt.Println(verifyOffline(jwks, att, "https://clearance.example", claimed.Add(10*time.Second)))
	fmt.Println(verifyOffline(jwks, att, "https://clearance.example", claimed.Add(30*time.Second)))
	// Output:
	// <nil>
	// wrong audience or issuer, or expired
}

// verifyOffline is the snippet of the package documentation, with the clock
// as an argument.
func verifyOffline(jwks []byte, token, wantIssuer string, now time.Time) error {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		return err
	}
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil || len(jws.Signatures) != 1 {
		return errors.New("not one compact EdDSA JWS")
	}
	h := jws.Signatures[0].Protected // typ, jku, x5u and crit land in ExtraHeaders; an x5c is never used
	keys := set.Key(h.KeyID)
	if len(keys) != 1 || h.JSONWebKey != nil || len(h.ExtraHeaders) != 1 ||
		h.ExtraHeaders[jose.HeaderType] != "clearance-claim-attestation+jwt" {
		return errors.New("unknown kid or unexpected header")
	}
	payload, err := jws.Verify(keys[0].Key) // the key comes from the JWKS, never from the token
	if err != nil {
		return err
	}
	var c struct {
		Aud, Iss string
		Exp      int64
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return err
	}
	if c.Aud != "clearance-downstream" || c.Iss != wantIssuer || now.Unix() >= c.Exp {
		return errors.New("wrong audience or issuer, or expired")
	}
	return nil
}

// An approval service seals a human's decision; Clearance verifies the
// receipt against that service's key and the issuer it expects, then
// checks that it answers its own request and intent.
func ExampleVerifyApprovalReceipt() {
	approver, _ := grant.KeyFromSeed(bytes.Repeat([]byte{9}, 32))
	receipt, err := grant.SignApprovalReceipt(approver, grant.ApprovalReceipt{
		Issuer: "https://approver.example", Audience: grant.AudApproval, ID: "rcpt-1", RequestID: "req-1", OrgID: "org-1",
		IntentHash: "sha256:8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4",
		Approver:   "approver-7", Decision: grant.ApprovalApproved, Presence: grant.PresenceWebAuthnUV,
		IssuedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Unix(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, _, err := grant.VerifyApprovalReceipt(receipt, func(kid string) (ed25519.PublicKey, error) {
		if kid != approver.KID() {
			return nil, grant.ErrUnknownKey
		}
		return approver.Public(), nil
	}, "https://approver.example")
	fmt.Println(r.Decision, r.Presence, r.RequestID, err)
	_, _, err = grant.VerifyApprovalReceipt(receipt, func(string) (ed25519.PublicKey, error) { return approver.Public(), nil }, "https://other.example")
	fmt.Println(errors.Is(err, grant.ErrTokenIssuer))
	// Output:
	// APPROVED webauthn-uv req-1 <nil>
	// true
}
