package grant

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// The eight points of small order on edwards25519 in canonical encoding
// (as listed by libsodium's blocklist and "Taming the many EdDSAs").
var lowOrderPoints = map[string]int{ // hex → order
	"0100000000000000000000000000000000000000000000000000000000000000": 1, // identity
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f": 2,
	"0000000000000000000000000000000000000000000000000000000000000000": 4,
	"0000000000000000000000000000000000000000000000000000000000000080": 4,
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05": 8,
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85": 8,
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a": 8,
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa": 8,
}

// Non-canonical encodings (y >= p, or x = 0 with the sign bit set) that
// lenient decoders, Go's among them, map to low-order points.
var lowOrderNonCanonical = []string{
	"0100000000000000000000000000000000000000000000000000000000000080", // identity, sign bit set
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // order 2, sign bit set
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p ≡ 0
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p+1 ≡ 1
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
}

func jwkWithX(x []byte, extra string) []byte {
	return []byte(`{"kty":"OKP","crv":"Ed25519","x":"` + base64.RawURLEncoding.EncodeToString(x) + `"` + extra + `}`)
}

func TestParsePublicJWKAcceptsGoodKey(t *testing.T) {
	for _, tc := range []struct {
		raw, kid string
	}{
		{`{"kty":"OKP","crv":"Ed25519","x":"` + rfcX + `"}`, ""},
		{`{"kty":"OKP","crv":"Ed25519","x":"` + rfcX + `","kid":"agent-1"}`, "agent-1"},
		{` {"x":"` + rfcX + `","crv":"Ed25519","kty":"OKP","alg":"EdDSA","use":"sig","key_ops":["verify"],"kid":"` + rfcThumbprint + `","x5t":"ignored"} `, rfcThumbprint},
		{`{"kty":"OKP","crv":"Ed25519","x":"` + rfcX + `","alg":"Ed25519"}`, ""},
	} {
		pub, kid, err := ParsePublicJWK([]byte(tc.raw))
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		if base64.RawURLEncoding.EncodeToString(pub) != rfcX || kid != tc.kid {
			t.Errorf("%s: got %x, %q", tc.raw, pub, kid)
		}
	}
}

func TestParsePublicJWKRejectsPrivateMaterial(t *testing.T) {
	good := `"kty":"OKP","crv":"Ed25519","x":"` + rfcX + `"`
	cases := []string{
		// RFC 8037 A.1, the full private key.
		`{` + good + `,"d":"` + rfcD + `"}`,
		`{"d":"` + rfcD + `",` + good + `}`,
		`{` + good + `,"d":null}`,
		`{` + good + `,"D":"` + rfcD + `"}`,
		`{` + good + `,"\u0064":"x"}`, // escaped "d"
		`{"kty":"RSA","n":"AQAB","e":"AQAB","d":"AQ","p":"AQ","q":"AQ"}`,
		`{"kty":"oct","k":"c2VjcmV0"}`,
		`{"kty":"oct","\u212a":"c2VjcmV0"}`, // KELVIN SIGN folds to k
		`{"kty":"EC","crv":"P-256","x":"AQ","y":"AQ","d":"AQ"}`,
	}
	for _, m := range []string{"d", "p", "q", "dp", "dq", "qi", "k", "oth", "priv", "Dp", "QI"} {
		cases = append(cases, `{`+good+`,"`+m+`":"AQ"}`)
	}
	for _, raw := range cases {
		if _, _, err := ParsePublicJWK([]byte(raw)); !errors.Is(err, ErrPrivateKeyMaterial) {
			t.Errorf("%s: err = %v, want ErrPrivateKeyMaterial", raw, err)
		}
	}
}

func TestParsePublicJWKRejectsWrongLength(t *testing.T) {
	pub := rfcKey(t).Public()
	for _, x := range [][]byte{nil, pub[:1], pub[:31], append(pub[:32:32], 0), append(pub[:32:32], pub...)} {
		if _, _, err := ParsePublicJWK(jwkWithX(x, "")); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("x of %d bytes: err = %v, want ErrInvalidKey", len(x), err)
		}
		if err := ValidatePublicKey(x); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidatePublicKey of %d bytes: err = %v, want ErrInvalidKey", len(x), err)
		}
	}
}

func TestParsePublicJWKRejectsLowOrderPoints(t *testing.T) {
	all := append([]string(nil), lowOrderNonCanonical...)
	for h := range lowOrderPoints {
		all = append(all, h)
	}
	for _, h := range all {
		pub, _ := hex.DecodeString(h)
		if err := ValidatePublicKey(pub); !errors.Is(err, ErrWeakKey) {
			t.Errorf("ValidatePublicKey(%s) = %v, want ErrWeakKey", h, err)
		}
		if _, _, err := ParsePublicJWK(jwkWithX(pub, "")); !errors.Is(err, ErrWeakKey) {
			t.Errorf("ParsePublicJWK(%s) = %v, want ErrWeakKey", h, err)
		}
		// go-jose agrees these are weak.
		if _, err := (&jose.JSONWebKey{Key: ed25519.PublicKey(pub)}).Thumbprint(crypto.SHA256); err == nil {
			t.Errorf("go-jose accepts %s", h)
		}
	}
}

func TestParsePublicJWKRejectsMalformed(t *testing.T) {
	x := `"x":"` + rfcX + `"`
	cases := map[string]string{
		"kty EC":           `{"kty":"EC","crv":"Ed25519",` + x + `}`,
		"kty RSA":          `{"kty":"RSA","crv":"Ed25519",` + x + `}`,
		"kty lower":        `{"kty":"okp","crv":"Ed25519",` + x + `}`,
		"kty missing":      `{"crv":"Ed25519",` + x + `}`,
		"kty number":       `{"kty":1,"crv":"Ed25519",` + x + `}`,
		"KTY only":         `{"KTY":"OKP","crv":"Ed25519",` + x + `}`,
		"crv X25519":       `{"kty":"OKP","crv":"X25519",` + x + `}`,
		"crv Ed448":        `{"kty":"OKP","crv":"Ed448",` + x + `}`,
		"crv P-256":        `{"kty":"OKP","crv":"P-256",` + x + `}`,
		"crv lower":        `{"kty":"OKP","crv":"ed25519",` + x + `}`,
		"crv missing":      `{"kty":"OKP",` + x + `}`,
		"x missing":        `{"kty":"OKP","crv":"Ed25519"}`,
		"x null":           `{"kty":"OKP","crv":"Ed25519","x":null}`,
		"x padded":         `{"kty":"OKP","crv":"Ed25519","x":"` + rfcX + `="}`,
		"x std base64":     `{"kty":"OKP","crv":"Ed25519","x":"` + base64.RawStdEncoding.EncodeToString(mustB64(rfcX)) + `"}`,
		"x newline":        `{"kty":"OKP","crv":"Ed25519","x":"` + rfcX[:10] + `\n` + rfcX[10:] + `"}`,
		"x trailing bits":  `{"kty":"OKP","crv":"Ed25519","x":"` + rfcX[:42] + `p"}`,
		"x repeated":       `{"kty":"OKP","crv":"Ed25519",` + x + `,` + x + `}`,
		"x and X":          `{"kty":"OKP","crv":"Ed25519",` + x + `,"X":"AA"}`,
		"kty twice":        `{"kty":"OKP","kty":"RSA","crv":"Ed25519",` + x + `}`,
		"alg RS256":        `{"kty":"OKP","crv":"Ed25519",` + x + `,"alg":"RS256"}`,
		"use enc":          `{"kty":"OKP","crv":"Ed25519",` + x + `,"use":"enc"}`,
		"use empty":        `{"kty":"OKP","crv":"Ed25519",` + x + `,"use":""}`,
		"key_ops sign":     `{"kty":"OKP","crv":"Ed25519",` + x + `,"key_ops":["verify","sign"]}`,
		"key_ops string":   `{"kty":"OKP","crv":"Ed25519",` + x + `,"key_ops":"verify"}`,
		"kid number":       `{"kty":"OKP","crv":"Ed25519",` + x + `,"kid":7}`,
		"array":            `[{"kty":"OKP","crv":"Ed25519",` + x + `}]`,
		"trailing":         `{"kty":"OKP","crv":"Ed25519",` + x + `}{}`,
		"trailing garbage": `{"kty":"OKP","crv":"Ed25519",` + x + `} x`,
		"truncated":        `{"kty":"OKP","crv":"Ed25519",` + x,
		"empty":            ``,
		"invalid UTF-8":    "{\"kty\":\"OKP\",\"crv\":\"Ed25519\"," + x + ",\"n\":\"\xff\"}",
		"too large":        `{"kty":"OKP","crv":"Ed25519",` + x + `,"pad":"` + strings.Repeat("a", MaxJWKSize) + `"}`,
		"jwks not jwk":     `{"keys":[{"kty":"OKP","crv":"Ed25519",` + x + `}]}`,
	}
	for name, raw := range cases {
		if _, _, err := ParsePublicJWK([]byte(raw)); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("%s: err = %v, want ErrInvalidKey", name, err)
		}
	}
}

func mustB64(s string) []byte {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// --- independent curve arithmetic, to check ValidatePublicKey's constants ---

type point struct{ x, y *big.Int }

var (
	tp = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	// d of edwards25519 as RFC 8032 §5.1 writes it.
	td, _ = new(big.Int).SetString("37095705934669439343138083508754565189542113879843219016388785533085940283555", 10)
)

func mod(x *big.Int) *big.Int { return x.Mod(x, tp) }

func inv(x *big.Int) *big.Int { return new(big.Int).ModInverse(x, tp) }

// decode decodes leniently (y reduced mod p), as Go's crypto/ed25519 does.
func decode(enc []byte) (point, bool) {
	b := bytes.Clone(enc)
	sign := b[31] >> 7
	b[31] &= 0x7f
	var be [32]byte
	for i := range be {
		be[31-i] = b[i]
	}
	y := mod(new(big.Int).SetBytes(be[:]))
	y2 := mod(new(big.Int).Mul(y, y))
	u := mod(new(big.Int).Sub(y2, big.NewInt(1)))
	v := mod(new(big.Int).Add(new(big.Int).Mul(td, y2), big.NewInt(1)))
	x := new(big.Int).ModSqrt(mod(new(big.Int).Mul(u, inv(v))), tp)
	if x == nil {
		return point{}, false
	}
	if uint8(x.Bit(0)) != sign {
		x = mod(new(big.Int).Neg(x))
	}
	return point{x, y}, true
}

// add is the complete twisted Edwards addition law with a = -1.
func add(p, q point) point {
	x1y2 := new(big.Int).Mul(p.x, q.y)
	y1x2 := new(big.Int).Mul(p.y, q.x)
	y1y2 := new(big.Int).Mul(p.y, q.y)
	x1x2 := new(big.Int).Mul(p.x, q.x)
	dxy := mod(new(big.Int).Mul(td, mod(new(big.Int).Mul(x1x2, y1y2))))
	x3 := mod(new(big.Int).Mul(new(big.Int).Add(x1y2, y1x2), inv(mod(new(big.Int).Add(big.NewInt(1), dxy)))))
	y3 := mod(new(big.Int).Mul(new(big.Int).Add(y1y2, x1x2), inv(mod(new(big.Int).Sub(big.NewInt(1), dxy)))))
	return point{x3, y3}
}

func isIdentity(p point) bool { return p.x.Sign() == 0 && p.y.Cmp(big.NewInt(1)) == 0 }

func TestCurveConstants(t *testing.T) {
	if curveD.Cmp(td) != 0 {
		t.Fatalf("curveD = %v, want RFC 8032 d", curveD)
	}
	if fieldP.Cmp(tp) != 0 {
		t.Fatal("fieldP")
	}
}

func TestLowOrderPointsAreLowOrder(t *testing.T) {
	counts := map[int]int{}
	for h, want := range lowOrderPoints {
		enc, _ := hex.DecodeString(h)
		p, ok := decode(enc)
		if !ok {
			t.Fatalf("%s is not on the curve", h)
		}
		if got := orderOf(p); got != want {
			t.Errorf("%s: order %d, want %d", h, got, want)
		}
		counts[want]++
	}
	if counts[1] != 1 || counts[2] != 1 || counts[4] != 2 || counts[8] != 4 {
		t.Fatalf("order counts %v, want the 8 points of the torsion subgroup", counts)
	}
	for _, h := range lowOrderNonCanonical {
		enc, _ := hex.DecodeString(h)
		p, ok := decode(enc)
		if !ok || orderOf(p) == 0 {
			t.Errorf("non-canonical %s does not decode to a low-order point", h)
		}
	}
	// Real keys are not low order, and pass.
	for b := range byte(16) {
		pub := seedKey(t, b).Public()
		p, ok := decode(pub)
		if !ok || orderOf(p) != 0 {
			t.Fatalf("key %x decodes badly", pub)
		}
		if err := ValidatePublicKey(pub); err != nil {
			t.Fatalf("ValidatePublicKey(%x) = %v", pub, err)
		}
	}
}

func orderOf(p point) int {
	q := p
	for _, n := range []int{1, 2, 4, 8} {
		if isIdentity(q) {
			return n
		}
		q = add(q, q)
	}
	return 0
}

func encodeY(y *big.Int) []byte {
	be := make([]byte, 32)
	y.FillBytes(be)
	le := make([]byte, 32)
	for i := range le {
		le[i] = be[31-i]
	}
	return le
}

func TestValidatePublicKeyRejectsOffCurveAndNonCanonical(t *testing.T) {
	var offCurve, nonCanonical []byte
	for y := int64(2); y < 64 && (offCurve == nil || nonCanonical == nil); y++ {
		enc := encodeY(big.NewInt(y))
		if _, ok := decode(enc); !ok {
			if offCurve == nil {
				offCurve = enc
			}
		} else if y < 19 && nonCanonical == nil {
			nonCanonical = encodeY(new(big.Int).Add(tp, big.NewInt(y)))
		}
	}
	if offCurve == nil || nonCanonical == nil {
		t.Fatal("no test points found")
	}
	if err := ValidatePublicKey(offCurve); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("off-curve %x: %v, want ErrInvalidKey", offCurve, err)
	}
	if _, _, err := ParsePublicJWK(jwkWithX(offCurve, "")); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("off-curve JWK: %v, want ErrInvalidKey", err)
	}
	if err := ValidatePublicKey(nonCanonical); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("non-canonical %x: %v, want ErrInvalidKey", nonCanonical, err)
	}
}

// The reason for ErrWeakKey: under the identity key, R = identity, S = 0
// verifies for every message in a cofactorless verifier.
func TestIdentityKeyForgesSignatures(t *testing.T) {
	identity, _ := hex.DecodeString("0100000000000000000000000000000000000000000000000000000000000000")
	sig := append(bytes.Clone(identity), make([]byte, 32)...)
	if ed25519.Verify(identity, []byte("pay mallory"), sig) {
		t.Log("crypto/ed25519 accepts a forged signature under the identity key; ValidatePublicKey keeps such keys out")
	}
	if err := ValidatePublicKey(identity); !errors.Is(err, ErrWeakKey) {
		t.Fatalf("identity: %v", err)
	}
}

func FuzzParsePublicJWK(f *testing.F) {
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","x":"` + rfcX + `"}`))
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","x":"` + rfcX + `","d":"` + rfcD + `"}`))
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","x":"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`))
	f.Add([]byte(`{"kty":"OKP","crv":"Ed25519","x":"` + rfcX + `","kid":"k","alg":"EdDSA","use":"sig","key_ops":["verify"]}`))
	f.Add([]byte(`{"kty":"RSA","n":"AQAB","e":"AQAB"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		pub, kid, err := ParsePublicJWK(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) && !errors.Is(err, ErrWeakKey) && !errors.Is(err, ErrPrivateKeyMaterial) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if err := ValidatePublicKey(pub); err != nil {
			t.Fatalf("accepted key fails ValidatePublicKey: %v", err)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			t.Fatalf("accepted non-object %q", raw)
		}
		for name := range m {
			for _, p := range privateMembers {
				if strings.EqualFold(name, p) {
					t.Fatalf("accepted private member %q", name)
				}
			}
		}
		jwk := jose.JSONWebKey{Key: pub, KeyID: kid}
		out, err := json.Marshal(jwk)
		if err != nil {
			t.Fatal(err)
		}
		pub2, kid2, err := ParsePublicJWK(out)
		if err != nil || !bytes.Equal(pub, pub2) || kid != kid2 {
			t.Fatalf("round trip: %x %q %v", pub2, kid2, err)
		}
	})
}
