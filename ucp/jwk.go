package ucp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/clearancehq/clearance/internal/canon"
)

// MaxJWKBytes bounds the JWK ParseMerchantJWK accepts.
const MaxJWKBytes = 16 << 10

// MerchantKey is a parsed public EC merchant signing key.
type MerchantKey struct {
	KID    string // the JWK's kid; "" when absent
	Curve  string // P-256 or P-384
	Alg    string // ES256 on P-256, ES384 on P-384, whether or not the JWK names it
	Public *ecdsa.PublicKey
	Use    string // the JWK's use ("sig"); "" when absent
}

// curves are the merchant key curves UCP allows (P-256 mandatory, P-384
// optional), with their coordinate size and JWS algorithm.
var curves = map[string]struct {
	curve elliptic.Curve
	size  int
	alg   string
}{
	"P-256": {elliptic.P256(), 32, "ES256"},
	"P-384": {elliptic.P384(), 48, "ES384"},
}

// privateMembers are the JWK members of private or symmetric keys (RFC 7518
// §6, and "priv" of post-quantum drafts), matched without regard to case as
// the registry does for Ed25519 keys: a "D" is a private key sent by
// mistake all the same.
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k", "priv"}

func keyError(pointer, detail string) *Error { return newError(CodeInvalidKey, pointer, detail) }

// ParseMerchantJWK parses a public EC JWK (RFC 7517): kty EC, crv P-256 or
// P-384, x and y base64url of the curve's coordinate size and a point on
// the curve. alg, use and key_ops, when present, must agree with a
// verification key of that curve (alg ES256 or ES384, use "sig", key_ops
// only "verify"); kid, when present, must be a non-empty string. Any
// private member (d, p, q, dp, dq, qi, oth, k, priv, in any case) is ErrPrivateKeyMaterial,
// whatever the kty; every other refusal, duplicate members included, is
// ErrInvalidKey. Pointers point into the JWK.
func ParseMerchantJWK(raw []byte) (MerchantKey, error) {
	if len(raw) > MaxJWKBytes {
		return MerchantKey{}, keyError("", fmt.Sprintf("JWK larger than %d bytes", MaxJWKBytes))
	}
	tree, serr := decodeTree(raw)
	if serr != nil {
		return MerchantKey{}, keyError(serr.pointer, serr.detail)
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return MerchantKey{}, keyError("", "a JWK must be a JSON object")
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		for _, p := range privateMembers {
			if strings.EqualFold(name, p) {
				return MerchantKey{}, newError(CodePrivateKeyMaterial, pointerOf(name),
					fmt.Sprintf("the JWK holds private key material (%q): send the public key only", name))
			}
		}
	}
	if kty, _ := m["kty"].(string); kty != "EC" {
		return MerchantKey{}, keyError("/kty", fmt.Sprintf("kty must be \"EC\", got %s", describe(m["kty"])))
	}
	crv, _ := m["crv"].(string)
	spec, ok := curves[crv]
	if !ok {
		return MerchantKey{}, keyError("/crv", fmt.Sprintf("crv must be \"P-256\" or \"P-384\", got %s", describe(m["crv"])))
	}
	point := []byte{4}
	for _, name := range []string{"x", "y"} {
		s, ok := m[name].(string)
		if !ok {
			return MerchantKey{}, keyError(pointerOf(name), name+" must be a base64url string")
		}
		c, err := b64.DecodeString(s)
		if err != nil {
			return MerchantKey{}, keyError(pointerOf(name), name+" is not unpadded base64url")
		}
		if len(c) != spec.size {
			return MerchantKey{}, keyError(pointerOf(name), fmt.Sprintf("%s must be %d bytes on %s, got %d", name, spec.size, crv, len(c)))
		}
		point = append(point, c...)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(spec.curve, point)
	if err != nil {
		return MerchantKey{}, keyError("", "x and y are not a point on "+crv)
	}
	k := MerchantKey{Curve: crv, Alg: spec.alg, Public: pub}
	if v, ok := m["alg"]; ok {
		if s, _ := v.(string); s != spec.alg {
			return MerchantKey{}, keyError("/alg", fmt.Sprintf("alg %s does not fit %s (%s)", describe(v), crv, spec.alg))
		}
	}
	if v, ok := m["use"]; ok {
		if s, _ := v.(string); s != "sig" {
			return MerchantKey{}, keyError("/use", fmt.Sprintf("use must be \"sig\", got %s", describe(v)))
		}
		k.Use = "sig"
	}
	if v, ok := m["key_ops"]; ok {
		ops, ok := v.([]any)
		if !ok {
			return MerchantKey{}, keyError("/key_ops", "key_ops must be an array")
		}
		for i, op := range ops {
			if op != "verify" {
				return MerchantKey{}, keyError("/key_ops/"+strconv.Itoa(i), "a merchant key may only verify")
			}
		}
	}
	if v, ok := m["kid"]; ok {
		s, _ := v.(string)
		if s == "" {
			return MerchantKey{}, keyError("/kid", "kid must be a non-empty string")
		}
		k.KID = s
	}
	return k, nil
}

// PublicJWK is the stored public form: kty, crv, x and y, plus kid, alg and
// use when set, in RFC 8785 form. It is nil when k holds no key on a
// supported curve.
func (k MerchantKey) PublicJWK() []byte {
	if k.Public == nil {
		return nil
	}
	alg := algOfCurve(k.Public.Curve)
	crv := ""
	for name, c := range curves {
		if c.alg == alg {
			crv = name
		}
	}
	point, err := k.Public.Bytes()
	if crv == "" || err != nil {
		return nil
	}
	size := curves[crv].size
	members := []struct{ name, value string }{ // sorted by name, as RFC 8785 orders them
		{"alg", k.Alg},
		{"crv", crv},
		{"kid", k.KID},
		{"kty", "EC"},
		{"use", k.Use},
		{"x", b64.EncodeToString(point[1 : 1+size])},
		{"y", b64.EncodeToString(point[1+size:])},
	}
	out := []byte{'{'}
	for _, m := range members {
		if m.value == "" {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = canon.AppendString(out, m.name)
		out = append(out, ':')
		out = canon.AppendString(out, m.value)
	}
	return append(out, '}')
}

// describe renders a JSON value for a message.
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null or nothing"
	case string:
		return strconv.Quote(t)
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprint(v)
}
