package grant

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"

	"github.com/clearancehq/clearance/internal/canon"
)

// TypErasureReceipt is the typ of a signed erasure receipt: what an
// erasure of a data subject's personal data destroyed, signed with the
// ledger key (whose verifier key the service publishes), so that the
// requester can prove the erasure offline. No verifier of another kind
// accepts it.
const TypErasureReceipt = "clearance-erasure-receipt+jwt"

// AudErasureReceipt is the audience of erasure receipts.
const AudErasureReceipt = "clearance-erasure-receipts"

// SignErasureReceipt signs payload, the RFC 8785 JSON of a receipt object
// whose aud is AudErasureReceipt, with k (header {alg EdDSA, kid, typ
// TypErasureReceipt}).
func SignErasureReceipt(k Signer, payload []byte) (string, error) {
	if err := checkErasureReceipt(payload); err != nil {
		return "", err
	}
	return signCompact(k, TypErasureReceipt, payload)
}

// VerifyErasureReceipt checks a signed erasure receipt against the key
// found by lookup (whose contract is VerifyIntent's) and returns its
// payload and the header's kid. The header rules are Verify's with typ
// TypErasureReceipt.
func VerifyErasureReceipt(jws string, lookup func(kid string) (ed25519.PublicKey, error)) ([]byte, string, error) {
	j, err := parseCompact(jws, TypErasureReceipt)
	if err != nil {
		return nil, j.kid, err
	}
	pub, err := lookupPublic(j, lookup)
	if err != nil {
		return nil, j.kid, err
	}
	if err := verifySignature(j, pub); err != nil {
		return nil, j.kid, err
	}
	if err := checkErasureReceipt(j.payload); err != nil {
		return nil, j.kid, err
	}
	return j.payload, j.kid, nil
}

// checkErasureReceipt: a canonical JSON object with aud AudErasureReceipt.
func checkErasureReceipt(payload []byte) error {
	if c, err := canon.Transform(payload); err != nil || !bytes.Equal(c, payload) {
		return tokenError(ErrTokenMalformed, "the receipt payload is not RFC 8785 canonical JSON")
	}
	var head struct {
		Aud *string `json:"aud"`
	}
	if err := json.Unmarshal(payload, &head); err != nil {
		return tokenError(ErrTokenMalformed, "the receipt payload is not a JSON object")
	}
	if head.Aud == nil || *head.Aud != AudErasureReceipt {
		return tokenError(ErrTokenAudience, "aud must be %q", AudErasureReceipt)
	}
	return nil
}
