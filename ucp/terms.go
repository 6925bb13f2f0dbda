package ucp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"strings"
)

// MerchantAuthorization is ap2.merchant_authorization: a JWS with detached
// payload (RFC 7515 Appendix F), "<b64url header>..<b64url signature>".
// Parse has checked its header: a JSON object with alg ES256, ES384 or
// ES512, a non-empty kid, and neither crit nor b64 (no JWS extension is
// understood here, and b64=false would change what is signed).
type MerchantAuthorization struct {
	JWS string
	KID string
	Alg string
}

const termsPointer = "/ap2/merchant_authorization"

func termsError(detail string) *Error { return newError(CodeInvalidTerms, termsPointer, detail) }

// b64 is base64url without padding, strict: no padding, no stray bits, so
// one value has one encoding.
var b64 = base64.RawURLEncoding.Strict()

// signatureSize is the R||S length of each JWS ECDSA algorithm.
var signatureSize = map[string]int{"ES256": 64, "ES384": 96, "ES512": 132}

// jws is a parsed detached JWS.
type jws struct {
	header, signature string // base64url as sent
	kid, alg          string
	sig               []byte
}

func parseMerchantAuthorization(s string) (*MerchantAuthorization, error) {
	j, err := parseDetachedJWS(s)
	if err != nil {
		return nil, err
	}
	return &MerchantAuthorization{JWS: s, KID: j.kid, Alg: j.alg}, nil
}

func parseDetachedJWS(s string) (*jws, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[1] != "" || parts[0] == "" || parts[2] == "" {
		return nil, termsError(`merchant_authorization must be a detached JWS "<header>..<signature>"`)
	}
	raw, err := b64.DecodeString(parts[0])
	if err != nil {
		return nil, termsError("JWS header is not base64url")
	}
	tree, serr := decodeTree(raw)
	if serr != nil {
		return nil, termsError("JWS header is not strict JSON: " + serr.detail)
	}
	h, ok := tree.(map[string]any)
	if !ok {
		return nil, termsError("JWS header must be a JSON object")
	}
	alg, _ := h["alg"].(string)
	if _, ok := signatureSize[alg]; !ok {
		return nil, termsError("JWS header alg must be ES256, ES384 or ES512")
	}
	kid, _ := h["kid"].(string)
	if kid == "" {
		return nil, termsError("JWS header kid must be a non-empty string")
	}
	for _, m := range []string{"crit", "b64"} {
		if _, ok := h[m]; ok {
			return nil, termsError("JWS header member " + m + " is not supported")
		}
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return nil, termsError("JWS signature is not base64url")
	}
	if len(sig) != signatureSize[alg] {
		return nil, termsError(fmt.Sprintf("JWS signature must be R||S of %d bytes for %s, got %d bytes", signatureSize[alg], alg, len(sig)))
	}
	return &jws{header: parts[0], signature: parts[2], kid: kid, alg: alg, sig: sig}, nil
}

// TermsPayload is what the merchant signed: the RFC 8785 form of the
// envelope without its top-level "ap2" member.
func (c *Checkout) TermsPayload() ([]byte, error) {
	return c.canonicalWithout(func(root map[string]any) { delete(root, "ap2") })
}

// canonicalWithout decodes Canonical, lets edit change a copy of its root
// and returns the result's RFC 8785 form.
func (c *Checkout) canonicalWithout(edit func(root map[string]any)) ([]byte, error) {
	tree, serr := decodeTree(c.Canonical)
	if serr != nil {
		return nil, envelopeError(serr.pointer, "canonical form: "+serr.detail)
	}
	root, ok := tree.(map[string]any)
	if !ok {
		return nil, envelopeError("", "canonical form is not a JSON object")
	}
	root = maps.Clone(root)
	edit(root)
	out, err := marshalCanonical(root)
	if err != nil {
		return nil, envelopeError("", err.Error())
	}
	return out, nil
}

// VerifyTerms verifies c.Terms, a detached JWS over c.TermsPayload(), with
// the key lookup returns for its kid. The signing input is
// b64url(header) "." b64url(payload); the signature is raw R||S. The
// header alg must be the one of the key's curve (ES256 on P-256, ES384 on
// P-384; ES512 has no key here and never verifies).
//
// A missing or malformed authorization, an alg that does not fit the key
// and a signature that does not verify are ErrInvalidTerms. A lookup error
// wrapping ErrUnknownKey comes back as an *Error of ErrInvalidTerms that
// also wraps it (errors.Is finds both); any other lookup error is returned
// as is.
func VerifyTerms(c *Checkout, lookup func(kid string) (MerchantKey, error)) error {
	if c == nil || c.Terms == nil {
		return termsError("the checkout carries no ap2.merchant_authorization")
	}
	j, err := parseDetachedJWS(c.Terms.JWS)
	if err != nil {
		return err
	}
	key, err := lookup(j.kid)
	if errors.Is(err, ErrUnknownKey) {
		return &Error{Code: CodeInvalidTerms, Pointer: termsPointer,
			Detail: fmt.Sprintf("kid %q names no registered merchant key", j.kid),
			Err:    fmt.Errorf("%w: %w", ErrInvalidTerms, err)}
	}
	if err != nil {
		return err
	}
	if key.Public == nil {
		return newError(CodeInvalidKey, "", "the key lookup returned no public key")
	}
	curveAlg := algOfCurve(key.Public.Curve)
	switch {
	case curveAlg == "":
		return newError(CodeInvalidKey, "", "the merchant key is not on P-256 or P-384")
	case j.alg != curveAlg:
		return termsError(fmt.Sprintf("header alg %s does not fit the key's curve %s (%s)", j.alg, key.Public.Curve.Params().Name, curveAlg))
	case key.Alg != "" && key.Alg != j.alg:
		return termsError(fmt.Sprintf("header alg %s does not match the key's alg %s", j.alg, key.Alg))
	case key.KID != "" && key.KID != j.kid:
		return termsError(fmt.Sprintf("the lookup for kid %q returned key %q", j.kid, key.KID))
	}
	payload, err := c.TermsPayload()
	if err != nil {
		return err
	}
	if !verifyES(key.Public, j.alg, j.header+"."+b64.EncodeToString(payload), j.sig) {
		return termsError("the signature does not verify over the checkout with key " + fmt.Sprintf("%q", j.kid))
	}
	return nil
}

// algOfCurve is the JWS algorithm of a supported curve, "" otherwise.
func algOfCurve(c elliptic.Curve) string {
	switch c {
	case elliptic.P256():
		return "ES256"
	case elliptic.P384():
		return "ES384"
	}
	return ""
}

// verifyES checks a raw R||S JWS signature (RFC 7518 §3.4).
func verifyES(pub *ecdsa.PublicKey, alg, signingInput string, sig []byte) bool {
	if len(sig) != signatureSize[alg] {
		return false
	}
	var digest []byte
	switch alg {
	case "ES256":
		d := sha256.Sum256([]byte(signingInput))
		digest = d[:]
	case "ES384":
		d := sha512.Sum384([]byte(signingInput))
		digest = d[:]
	default:
		return false
	}
	n := len(sig) / 2
	r := new(big.Int).SetBytes(sig[:n])
	s := new(big.Int).SetBytes(sig[n:])
	return ecdsa.Verify(pub, digest, r, s)
}
