package grant

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"

	"github.com/clearancehq/clearance/internal/canon"
)

// document is a kind of signed statement that is not a token: an RFC 8785
// JSON object whose aud names the kind, signed as a compact JWS with the
// kind's typ (growth reports, erasure receipts). noun names it in errors.
type document struct{ typ, aud, noun string }

// sign signs payload with k (header {alg EdDSA, kid, typ}).
func (d document) sign(k Signer, payload []byte) (string, error) {
	if err := d.check(payload); err != nil {
		return "", err
	}
	return signCompact(k, d.typ, payload)
}

// verify checks jws against the key found by lookup (whose contract is
// VerifyIntent's) and returns its payload and the header's kid (also with
// an error, whenever the header decoded). The header rules are Verify's
// with the kind's typ.
func (d document) verify(jws string, lookup func(kid string) (ed25519.PublicKey, error)) ([]byte, string, error) {
	j, err := parseCompact(jws, d.typ)
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
	if err := d.check(j.payload); err != nil {
		return nil, j.kid, err
	}
	return j.payload, j.kid, nil
}

// check: a canonical JSON object with the kind's aud.
func (d document) check(payload []byte) error {
	if c, err := canon.Transform(payload); err != nil || !bytes.Equal(c, payload) {
		return tokenError(ErrTokenMalformed, "the %s payload is not RFC 8785 canonical JSON", d.noun)
	}
	var head struct {
		Aud *string `json:"aud"`
	}
	if err := json.Unmarshal(payload, &head); err != nil {
		return tokenError(ErrTokenMalformed, "the %s payload is not a JSON object", d.noun)
	}
	if head.Aud == nil || *head.Aud != d.aud {
		return tokenError(ErrTokenAudience, "aud must be %q", d.aud)
	}
	return nil
}
