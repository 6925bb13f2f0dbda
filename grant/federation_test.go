package grant_test

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/clearancehq/clearance/grant"
)

func testFederated() grant.FederatedDecision {
	return grant.FederatedDecision{Issuer: "https://a.example", Audience: "https://b.example/federation/o", OrgID: "org-a",
		ID: "env-1", IssuedAt: t0.Unix(), Expiry: t0.Add(5 * time.Minute).Unix(), DecisionID: "dec-1", DossierID: "dos-1",
		DossierDigest: "sha256:" + hex64('a'), LedgerSeq: 3, DecidedAt: t0.Format(time.RFC3339), Outcome: "ALLOW",
		Mode: "ENFORCEMENT", ReasonCodes: []string{"OK"}, PolicyVersion: "v1", BundleDigest: "sha256:" + hex64('b'),
		IntentDigest: "sha256:" + hex64('c'), IntentProfile: "CLEARANCE-FEDERATED-INTENT-1"}
}

func hex64(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

func lookupOf(k grant.Key) func(string) (ed25519.PublicKey, error) {
	return func(kid string) (ed25519.PublicKey, error) {
		if kid == k.KID() {
			return k.Public(), nil
		}
		return nil, grant.ErrUnknownKey
	}
}

// A federated decision verifies under its key, and nothing of another kind
// signed by the same key passes for one (nor it for them).
func TestFederatedDecisionKinds(t *testing.T) {
	k := seedKey(t, 1)
	jws, err := grant.MintFederatedDecision(k, testFederated())
	if err != nil {
		t.Fatal(err)
	}
	o := grant.VerifyOptions{Now: t0.Add(time.Second)}
	f, kid, err := grant.VerifyFederatedDecision(jws, lookupOf(k), o)
	if err != nil || kid != k.KID() || f.DecisionID != "dec-1" {
		t.Fatalf("verify: %+v %q %v", f, kid, err)
	}
	env, _ := grant.MintEnvelope(k, testEnvelope())
	grantToken := mustMint(t, k, testClaims())
	for name, other := range map[string]string{"envelope": env, "grant": grantToken} {
		if _, _, err := grant.VerifyFederatedDecision(other, lookupOf(k), o); !errors.Is(err, grant.ErrTokenType) {
			t.Errorf("a %s passed for a federated decision: %v", name, err)
		}
	}
	if _, err := grant.VerifyEnvelope(jws, grant.NewKeyRing(k), o); !errors.Is(err, grant.ErrTokenType) {
		t.Errorf("a federated decision passed for a verification envelope: %v", err)
	}
	if _, err := grant.Verify(jws, grant.NewKeyRing(k), o); !errors.Is(err, grant.ErrTokenType) {
		t.Errorf("a federated decision passed for a grant: %v", err)
	}
	if _, _, err := grant.VerifyFederatedDecision(jws, lookupOf(seedKey(t, 2)), o); !errors.Is(err, grant.ErrUnknownKey) {
		t.Errorf("another key's lookup: %v", err)
	}
	for name, c := range map[string]struct {
		o    grant.VerifyOptions
		want error
	}{
		"expired":         {grant.VerifyOptions{Now: t0.Add(5 * time.Minute)}, grant.ErrTokenExpired},
		"from the future": {grant.VerifyOptions{Now: t0.Add(-time.Minute)}, grant.ErrTokenNotYetValid},
		"another issuer":  {grant.VerifyOptions{Now: t0, Issuer: "https://c.example"}, grant.ErrTokenIssuer},
	} {
		if _, _, err := grant.VerifyFederatedDecision(jws, lookupOf(k), c.o); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

// Minting refuses claims a verifier would refuse: a lifetime over
// MaxFederatedLifetime, a missing member, a malformed digest.
func TestMintFederatedDecisionRefuses(t *testing.T) {
	k := seedKey(t, 1)
	for name, edit := range map[string]func(f *grant.FederatedDecision){
		"too long": func(f *grant.FederatedDecision) {
			f.Expiry = f.IssuedAt + int64(grant.MaxFederatedLifetime/time.Second) + 1
		},
		"no audience":    func(f *grant.FederatedDecision) { f.Audience = "" },
		"no ledger seq":  func(f *grant.FederatedDecision) { f.LedgerSeq = 0 },
		"bad digest":     func(f *grant.FederatedDecision) { f.IntentDigest = "sha256:xyz" },
		"bad decided_at": func(f *grant.FederatedDecision) { f.DecidedAt = "yesterday" },
		"exp before iat": func(f *grant.FederatedDecision) { f.Expiry = f.IssuedAt },
	} {
		f := testFederated()
		edit(&f)
		if _, err := grant.MintFederatedDecision(k, f); !errors.Is(err, grant.ErrTokenClaims) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzVerifyFederatedDecision: only the minted envelope verifies, and
// every refusal is a coded *TokenError.
func FuzzVerifyFederatedDecision(f *testing.F) {
	k := seedKey(f, 1)
	good, err := grant.MintFederatedDecision(k, testFederated())
	if err != nil {
		f.Fatal(err)
	}
	tokenSeeds(f, k, grant.TypFederatedDecision, good)
	o := grant.VerifyOptions{Now: t0.Add(time.Second)}
	f.Fuzz(func(t *testing.T, s string) {
		got, _, err := grant.VerifyFederatedDecision(s, lookupOf(k), o)
		if err != nil {
			wantCoded(t, err)
			return
		}
		if s != good {
			t.Fatalf("verified an envelope that was never minted: %q → %+v", s, got)
		}
	})
}
