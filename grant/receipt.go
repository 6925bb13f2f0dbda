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
	EffectDigest string `json:"effect_digest,omitempty"`
	Outcome      string `json:"outcome,omitempty"`
	IssuedAt     int64  `json:"iat"`
}

// ReceiptKey is a provider key as the org registered it: the public key
// that verifies its receipts and the issuer they must name.
type ReceiptKey struct {
	Public ed25519.PublicKey
	// Issuer is the iss every receipt of the key must carry, compared
	// exactly. A key without one verifies no receipt.
	Issuer string
}

// SignReceipt signs c as a VP-3 effect receipt with k (header {alg EdDSA,
// kid, typ TypReceipt}). Providers sign their own receipts; this is for
// tests and examples. c must pass the checks VerifyReceipt applies to the
// claims.
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
// required, effect_digest and intent_hash, when present, must be
// "sha256:<64 lowercase hex>"; and iss must be the key's registered Issuer
// (ErrTokenIssuer, also for a key registered without one). A receipt without
// effect_digest verifies, but cannot confirm an effect. A receipt has no
// lifetime: nothing is checked against a clock. Matching grant_id and
// intent_hash to a grant is the caller's job.
//
// kid is returned whenever the header decoded, also with an error, so the
// receipt can be recorded as presented.
func VerifyReceipt(jws string, lookup func(kid string) (ReceiptKey, error)) (ReceiptClaims, string, error) {
	j, err := parseCompact(jws, TypReceipt)
	if err != nil {
		return ReceiptClaims{}, j.kid, err
	}
	var key ReceiptKey
	pub, err := lookupPublic(j, func(kid string) (ed25519.PublicKey, error) {
		if lookup == nil {
			return nil, nil
		}
		k, err := lookup(kid)
		key = k
		return k.Public, err
	})
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
	switch {
	case key.Issuer == "":
		return ReceiptClaims{}, j.kid, tokenError(ErrTokenIssuer, "provider key %q has no registered issuer", j.kid)
	case c.Issuer != key.Issuer:
		return ReceiptClaims{}, j.kid, tokenError(ErrTokenIssuer, "iss %q is not %q, the issuer registered with key %q", c.Issuer, key.Issuer, j.kid)
	}
	return c, j.kid, nil
}

func (c ReceiptClaims) validate() error {
	if err := required("iss", c.Issuer, "grant_id", c.GrantID); err != nil {
		return err
	}
	if c.IssuedAt <= 0 {
		return tokenError(ErrTokenClaims, "iat is required")
	}
	return digests("effect_digest", c.EffectDigest, "intent_hash", c.IntentHash)
}
