package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/grant"
)

func TestVerifyAcceptsOnlyAttestations(t *testing.T) {
	seed := make([]byte, 32)
	k, err := grant.KeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	jwks, _ := json.Marshal(grant.NewKeyRing(k).JWKS(now))
	digest := "sha256:" + strings.Repeat("ab", 32)
	att, err := grant.MintAttestation(k, grant.Attestation{Issuer: "clearance", Audience: grant.AudAttestation, Subject: "agent",
		OrgID: "org", ID: "att-1", IssuedAt: now.Unix(), Expiry: now.Add(30 * time.Second).Unix(), GrantID: "g-1",
		DecisionID: "d-1", DossierID: "s-1", ClaimTokenDigest: digest, Action: grant.Action{Type: "refund"},
		Binding: grant.Binding{IntentHash: digest, PayloadDigest: digest, PayloadProfile: grant.PayloadProfile, Nonce: "n", Scope: "s"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := Verify(jwks, att, "clearance", now)
	if err != nil || a.GrantID != "g-1" || a.Binding.IntentHash != digest {
		t.Fatalf("a good attestation: %+v %v", a, err)
	}
	if _, err := Verify(jwks, att, "clearance", now.Add(30*time.Second)); err == nil {
		t.Fatal("accepted at the end of the lease")
	}
	if _, err := Verify(jwks, att, "someone-else", now); err == nil {
		t.Fatal("accepted another issuer")
	}
	g, err := grant.Mint(k, grant.Claims{Issuer: "clearance", Audience: grant.AudGrant, Subject: "agent", OrgID: "org", ID: "g-1",
		IssuedAt: now.Unix(), NotBefore: now.Unix(), Expiry: now.Add(time.Minute).Unix(), Action: grant.Action{Type: "refund"},
		IntentHash: digest, PayloadDigest: digest, PayloadProfile: grant.PayloadProfile, Nonce: "n", Scope: "s",
		DecisionID: "d-1", DossierID: "s-1", Mode: "ENFORCEMENT"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(jwks, g, "clearance", now); err == nil {
		t.Fatal("accepted a grant as an attestation")
	}
	other, _ := grant.KeyFromSeed(append([]byte{1}, seed[1:]...))
	forged, _ := grant.MintAttestation(other, grant.Attestation{Issuer: "clearance", Audience: grant.AudAttestation, Subject: "agent",
		OrgID: "org", ID: "att-2", IssuedAt: now.Unix(), Expiry: now.Add(30 * time.Second).Unix(), GrantID: "g-1",
		DecisionID: "d-1", DossierID: "s-1", ClaimTokenDigest: digest,
		Binding: grant.Binding{IntentHash: digest, PayloadDigest: digest, PayloadProfile: grant.PayloadProfile, Nonce: "n", Scope: "s"}})
	if _, err := Verify(jwks, forged, "clearance", now); err == nil {
		t.Fatal("accepted an attestation signed by a key outside the JWKS")
	}
}
