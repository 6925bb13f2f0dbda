package client

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// AttestationCheck is what a downstream system expects of a claim
// attestation besides its signature.
type AttestationCheck struct {
	// Issuer is the deployment's --issuer (the attestation's iss); required.
	Issuer string
	// Now is the verifier's clock; time.Now when zero.
	Now time.Time
	// MaxClockSkew is how far ahead of Now the attestation's iat may be.
	MaxClockSkew time.Duration
	// IntentHash is the hash of the intent about to be executed; required:
	// the attestation must bind exactly that request (the JWKS serves every
	// org of the deployment, so a signature alone says nothing about which
	// action was granted).
	IntentHash string
	// GrantID and OrgID, when set, must be the attestation's too.
	GrantID string
	OrgID   string
}

// ErrAttestation is wrapped by every refusal of VerifyAttestation.
var ErrAttestation = errors.New("clearance: claim attestation refused")

// VerifyAttestation verifies a claim attestation offline, with the JWKS
// alone (the bytes of /.well-known/clearance-execution-grant-jwks.json),
// before a downstream system commits the action it names. It accepts only a
// compact EdDSA JWS whose protected header is exactly alg, kid and typ
// "clearance-claim-attestation+jwt", signed by the Ed25519 key of that kid
// in the JWKS (never a key the token carries), with aud
// "clearance-downstream", iss Issuer, the claims every attestation carries,
// iat no later than Now + MaxClockSkew and Now before exp (the end of the
// claim lease), the intent hash of the request about to be executed, and,
// when given, the grant and org expected.
func VerifyAttestation(jwks []byte, token string, want AttestationCheck) (*ClaimAttestationClaims, error) {
	refuse := func(format string, a ...any) (*ClaimAttestationClaims, error) {
		return nil, fmt.Errorf("%w: %s", ErrAttestation, fmt.Sprintf(format, a...))
	}
	if want.Issuer == "" || want.IntentHash == "" {
		return refuse("the expected issuer and intent hash are required")
	}
	now := want.Now
	if now.IsZero() {
		now = time.Now()
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		return refuse("jwks: %v", err)
	}
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil || len(jws.Signatures) != 1 {
		return refuse("not one compact EdDSA JWS")
	}
	h := jws.Signatures[0].Protected
	if h.KeyID == "" || h.JSONWebKey != nil || len(h.ExtraHeaders) != 1 ||
		h.ExtraHeaders[jose.HeaderType] != "clearance-claim-attestation+jwt" {
		return refuse("unexpected protected header")
	}
	keys := set.Key(h.KeyID)
	if len(keys) != 1 {
		return refuse("kid %q is not in the JWKS", h.KeyID)
	}
	pub, ok := keys[0].Key.(ed25519.PublicKey)
	if !ok {
		return refuse("kid %q is not an Ed25519 key", h.KeyID)
	}
	payload, err := jws.Verify(pub)
	if err != nil {
		return refuse("signature: %v", err)
	}
	var a ClaimAttestationClaims
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&a); err != nil {
		return refuse("claims: %v", err)
	}
	switch {
	case a.Aud != "clearance-downstream":
		return refuse("audience %q", a.Aud)
	case a.Iss != want.Issuer:
		return refuse("issuer %q, want %q", a.Iss, want.Issuer)
	case a.Iat > now.Add(want.MaxClockSkew).Unix():
		return refuse("issued in the future")
	case now.Unix() >= a.Exp:
		return refuse("the claim lease has ended")
	case a.Jti == "" || a.Org == "" || a.GrantId == "" || a.ClaimTokenDigest == "" || a.Binding.IntentHash == "":
		return refuse("a required claim is missing")
	case a.Iat <= 0 || a.Iat >= a.Exp:
		return refuse("iat %d and exp %d are not a lease", a.Iat, a.Exp)
	case a.Binding.IntentHash != want.IntentHash:
		return refuse("intent hash %q, want %q", a.Binding.IntentHash, want.IntentHash)
	case want.GrantID != "" && a.GrantId != want.GrantID:
		return refuse("grant %q, want %q", a.GrantId, want.GrantID)
	case want.OrgID != "" && a.Org != want.OrgID:
		return refuse("org %q, want %q", a.Org, want.OrgID)
	}
	return &a, nil
}
