package grant

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxJWKSize is the largest JWK ParsePublicJWK reads.
const MaxJWKSize = 16 << 10

// privateMembers are the JWK members that carry private or secret key
// material (RFC 7518 §6.2.2, §6.3.2, §6.4.1; "priv" for AKP keys). They are
// matched case-insensitively, because encoding/json-based parsers, go-jose
// among them, would read "D" as "d".
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k", "priv"}

// ParsePublicJWK parses the JWK of an Ed25519 public key offered for
// registration and returns the key and its "kid" member ("" when absent).
//
// raw must be one JSON object of valid UTF-8, without member names that repeat
// (compared case-insensitively) and without trailing data. It must have
// kty "OKP", crv "Ed25519" and x, the unpadded base64url encoding of exactly
// 32 bytes that pass ValidatePublicKey. Optional alg must be "EdDSA" or
// "Ed25519", use must be "sig" and key_ops may only hold "verify". Other
// members are ignored, as RFC 7517 asks.
//
// Errors wrap ErrPrivateKeyMaterial when any private member (d, p, q, dp, dq,
// qi, oth, k, priv) is present, whatever the kty; ErrWeakKey for a low-order
// point; ErrInvalidKey for everything else.
func ParsePublicJWK(raw []byte) (ed25519.PublicKey, string, error) {
	members, err := jwkMembers(raw)
	if err != nil {
		return nil, "", err
	}
	for _, m := range members {
		for _, p := range privateMembers {
			if strings.EqualFold(m.name, p) {
				return nil, "", fmt.Errorf("%w: JWK has private member %q", ErrPrivateKeyMaterial, m.name)
			}
		}
	}
	byName := make(map[string]json.RawMessage, len(members))
	folded := make(map[string]string, len(members))
	for _, m := range members {
		f := foldName(m.name)
		if prev, dup := folded[f]; dup {
			if prev == m.name {
				return nil, "", fmt.Errorf("%w: JWK has member %q twice", ErrInvalidKey, m.name)
			}
			return nil, "", fmt.Errorf("%w: JWK members %q and %q differ only in case", ErrInvalidKey, prev, m.name)
		}
		folded[f] = m.name
		byName[m.name] = m.value
	}

	kty, err := stringMember(byName, "kty", true)
	if err != nil {
		return nil, "", err
	}
	if kty != "OKP" {
		return nil, "", fmt.Errorf("%w: kty %q, want \"OKP\"", ErrInvalidKey, kty)
	}
	crv, err := stringMember(byName, "crv", true)
	if err != nil {
		return nil, "", err
	}
	if crv != "Ed25519" {
		return nil, "", fmt.Errorf("%w: crv %q, want \"Ed25519\"", ErrInvalidKey, crv)
	}
	if alg, err := stringMember(byName, "alg", false); err != nil {
		return nil, "", err
	} else if alg != "" && alg != "EdDSA" && alg != "Ed25519" {
		return nil, "", fmt.Errorf("%w: alg %q, want \"EdDSA\"", ErrInvalidKey, alg)
	}
	if use, err := stringMember(byName, "use", false); err != nil {
		return nil, "", err
	} else if _, present := byName["use"]; present && use != "sig" {
		return nil, "", fmt.Errorf("%w: use %q, want \"sig\"", ErrInvalidKey, use)
	}
	if ops, present := byName["key_ops"]; present {
		var list []string
		if err := json.Unmarshal(ops, &list); err != nil || list == nil {
			return nil, "", fmt.Errorf("%w: key_ops is not an array of strings", ErrInvalidKey)
		}
		for _, op := range list {
			if op != "verify" {
				return nil, "", fmt.Errorf("%w: key_ops has %q; a public key may only \"verify\"", ErrInvalidKey, op)
			}
		}
	}
	kid, err := stringMember(byName, "kid", false)
	if err != nil {
		return nil, "", err
	}

	x, err := stringMember(byName, "x", true)
	if err != nil {
		return nil, "", err
	}
	pub, err := base64.RawURLEncoding.Strict().DecodeString(x)
	if err != nil || base64.RawURLEncoding.EncodeToString(pub) != x {
		return nil, "", fmt.Errorf("%w: x is not unpadded base64url", ErrInvalidKey)
	}
	if err := ValidatePublicKey(pub); err != nil {
		return nil, "", err
	}
	return ed25519.PublicKey(pub), kid, nil
}

type jwkMember struct {
	name  string
	value json.RawMessage
}

// jwkMembers splits raw, one JSON object, into its members in order,
// keeping repeats so the caller can refuse them.
func jwkMembers(raw []byte) ([]jwkMember, error) {
	if len(raw) > MaxJWKSize {
		return nil, fmt.Errorf("%w: JWK larger than %d bytes", ErrInvalidKey, MaxJWKSize)
	}
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("%w: JWK is not valid UTF-8", ErrInvalidKey)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: JWK is not a JSON object", ErrInvalidKey)
	}
	var members []jwkMember
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: malformed JWK: %v", ErrInvalidKey, err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: malformed JWK", ErrInvalidKey)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: malformed JWK member %q: %v", ErrInvalidKey, name, err)
		}
		members = append(members, jwkMember{name: name, value: v})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, fmt.Errorf("%w: malformed JWK", ErrInvalidKey)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the JWK", ErrInvalidKey)
	}
	return members, nil
}

// stringMember returns the string member name of a JWK; "" when it is absent
// and not required.
func stringMember(m map[string]json.RawMessage, name string, required bool) (string, error) {
	v, ok := m[name]
	if !ok {
		if required {
			return "", fmt.Errorf("%w: JWK has no %q", ErrInvalidKey, name)
		}
		return "", nil
	}
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", fmt.Errorf("%w: JWK member %q is not a string", ErrInvalidKey, name)
	}
	return s, nil
}

// foldName maps each rune to the smallest rune of its Unicode case-folding
// orbit, so foldName(a) == foldName(b) exactly when strings.EqualFold(a, b).
func foldName(s string) string {
	var b strings.Builder
	for _, r := range s {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// Curve constants for ValidatePublicKey, all mod p = 2^255 - 19.
var (
	fieldP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	// curveD is d = -121665/121666 of edwards25519.
	curveD = func() *big.Int {
		d := new(big.Int).ModInverse(big.NewInt(121666), fieldP)
		d.Mul(d, big.NewInt(-121665))
		return d.Mod(d, fieldP)
	}()
	// lowOrderY are the y-coordinates of the eight points of small order:
	// 1 (the identity), p-1 (order 2), 0 (the two points of order 4) and ±c
	// (the four points of order 8). Every encoding whose y reduces to one of
	// them decodes to a low-order point or to nothing.
	lowOrderY = func() []*big.Int {
		c := leInt(mustHex32("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"))
		return []*big.Int{
			big.NewInt(0),
			big.NewInt(1),
			new(big.Int).Sub(fieldP, big.NewInt(1)),
			c,
			new(big.Int).Sub(fieldP, c),
		}
	}()
)

// ValidatePublicKey reports whether pub is an Ed25519 public key Clearance
// accepts: exactly 32 bytes (ErrInvalidKey otherwise), not a low-order point
// in any encoding (ErrWeakKey), and the canonical encoding (y < p) of a point
// on the curve (ErrInvalidKey otherwise). A low-order key, the identity above
// all, lets anyone forge signatures that ed25519.Verify accepts.
func ValidatePublicKey(pub []byte) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: Ed25519 public key is %d bytes, want %d", ErrInvalidKey, len(pub), ed25519.PublicKeySize)
	}
	var enc [ed25519.PublicKeySize]byte
	copy(enc[:], pub)
	enc[31] &= 0x7f // drop the sign bit of x
	y := leInt(enc)
	reduced := new(big.Int).Mod(y, fieldP)
	for _, w := range lowOrderY {
		if reduced.Cmp(w) == 0 {
			return fmt.Errorf("%w: Ed25519 public key %x", ErrWeakKey, pub)
		}
	}
	if y.Cmp(fieldP) >= 0 {
		return fmt.Errorf("%w: non-canonical Ed25519 encoding (y >= p)", ErrInvalidKey)
	}
	// On the curve iff x² = (y² - 1) / (d·y² + 1) has a root mod p. The
	// denominator never vanishes because d is not a square.
	y2 := new(big.Int).Mul(y, y)
	u := new(big.Int).Sub(y2, big.NewInt(1))
	v := new(big.Int).Mul(curveD, y2)
	v.Add(v, big.NewInt(1)).Mod(v, fieldP)
	x2 := u.Mul(u, v.ModInverse(v, fieldP))
	x2.Mod(x2, fieldP)
	if big.Jacobi(x2, fieldP) < 0 {
		return fmt.Errorf("%w: Ed25519 public key is not a point on the curve", ErrInvalidKey)
	}
	return nil
}

// leInt reads a little-endian 32-byte integer.
func leInt(b [32]byte) *big.Int {
	var be [32]byte
	for i := range b {
		be[31-i] = b[i]
	}
	return new(big.Int).SetBytes(be[:])
}

func mustHex32(s string) [32]byte {
	var out [32]byte
	if n, err := hex.Decode(out[:], []byte(s)); err != nil || n != len(out) {
		panic("grant: bad curve constant")
	}
	return out
}
