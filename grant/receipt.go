package grant

import (
	"crypto/ed25519"
	"encoding/json"
)

// ProfileVP3 is the verifying-provider receipt profile: a compact EdDSA JWS
// with typ TypReceipt, signed by a provider key the org registered.
const ProfileVP3 = "VP-3"

// ReceiptClaims is the payload of a provider's effect receipt.
type ReceiptClaims struct {
	Issuer       string `json:"iss"`
	GrantID      string `json:"grant_id"`
	IntentHash   string `json:"intent_hash,omitempty"`
	EffectDigest string `json:"effect_digest"`
	Outcome      string `json:"outcome,omitempty"`
	IssuedAt     int64  `json:"iat"`
}

// SignReceipt signs c as a VP-3 effect receipt with k (header {alg EdDSA,
// kid, typ TypReceipt}). Providers sign their own receipts; this is for
// tests and examples. c must pass the checks VerifyReceipt applies.
func SignReceipt(k Key, c ReceiptClaims) (string, error) {
	if err := c.validate(); err != nil {
		return "", err
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", tokenError(ErrTokenClaims, "encoding receipt: %v", err)
	}
	return signCompact(k, TypReceipt, payload)
}

// VerifyReceipt checks a VP-3 effect receipt against a provider key found by
// lookup (whose contract is VerifyIntent's) and returns its claims and the
// header's kid. The header rules are Verify's with typ TypReceipt; the
// payload decodes strictly into ReceiptClaims; iss, grant_id and iat are
// required, effect_digest and, when present, intent_hash must be
// "sha256:<64 lowercase hex>". A receipt has no lifetime: nothing is checked
// against a clock. Matching grant_id and intent_hash to a grant is the
// caller's job.
//
// kid is returned whenever the header decoded, also with an error, so the
// receipt can be recorded as presented.
func VerifyReceipt(jws string, lookup func(kid string) (ed25519.PublicKey, error)) (ReceiptClaims, string, error) {
	j, err := parseCompact(jws, TypReceipt)
	if err != nil {
		return ReceiptClaims{}, j.kid, err
	}
	pub, err := lookupPublic(j, lookup)
	if err != nil {
		return ReceiptClaims{}, j.kid, err
	}
	if err := verifySignature(j, pub); err != nil {
		return ReceiptClaims{}, j.kid, err
	}
	var c ReceiptClaims
	if err := decodePayload(j.payload, &c); err != nil {
		return ReceiptClaims{}, j.kid, err
	}
	if err := c.validate(); err != nil {
		return ReceiptClaims{}, j.kid, err
	}
	return c, j.kid, nil
}

func (c ReceiptClaims) validate() error {
	if err := required("iss", c.Issuer, "grant_id", c.GrantID, "effect_digest", c.EffectDigest); err != nil {
		return err
	}
	if c.IssuedAt <= 0 {
		return tokenError(ErrTokenClaims, "iat is required")
	}
	return digests("effect_digest", c.EffectDigest, "intent_hash", c.IntentHash)
}
