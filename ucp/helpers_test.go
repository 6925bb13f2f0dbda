package ucp

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/asn1"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"testing"
)

// Test keys come from fixed scalars, so fixtures and signatures (RFC 6979,
// deterministic) are reproducible byte for byte.
func testKey(t testing.TB, curve elliptic.Curve, label string) *ecdsa.PrivateKey {
	t.Helper()
	var scalar []byte
	switch curve {
	case elliptic.P256():
		s := sha256.Sum256([]byte(label))
		scalar = s[:]
	case elliptic.P384():
		s := sha512.Sum384([]byte(label))
		scalar = s[:]
	default:
		t.Fatalf("no test key on %s", curve.Params().Name)
	}
	k, err := ecdsa.ParseRawPrivateKey(curve, scalar)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const (
	merchantKID    = "merchant-2026"
	merchantLabel  = "clearance ucp test merchant key"
	issuerLabel    = "clearance ucp test wallet issuer key"
	holderLabel    = "clearance ucp test holder key"
	merchant384KID = "merchant-p384"
)

func merchantKey(t testing.TB) *ecdsa.PrivateKey { return testKey(t, elliptic.P256(), merchantLabel) }

// publicKey is the MerchantKey of a private test key.
func publicKey(t testing.TB, k *ecdsa.PrivateKey, kid string) MerchantKey {
	t.Helper()
	alg := algOfCurve(k.Curve)
	return MerchantKey{KID: kid, Curve: k.Curve.Params().Name, Alg: alg, Public: &k.PublicKey}
}

// jwkOf renders a key's public JWK with extra members.
func jwkOf(t testing.TB, k *ecdsa.PublicKey, extra map[string]any) []byte {
	t.Helper()
	point, err := k.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	n := (len(point) - 1) / 2
	m := map[string]any{"kty": "EC", "crv": k.Curve.Params().Name,
		"x": b64.EncodeToString(point[1 : 1+n]), "y": b64.EncodeToString(point[1+n:])}
	for name, v := range extra {
		if v == nil {
			delete(m, name)
		} else {
			m[name] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signES returns the raw R||S JWS signature of input (RFC 6979).
func signES(t testing.TB, k *ecdsa.PrivateKey, input string) []byte {
	t.Helper()
	var digest []byte
	var h crypto.Hash
	switch k.Curve {
	case elliptic.P256():
		d := sha256.Sum256([]byte(input))
		digest, h = d[:], crypto.SHA256
	case elliptic.P384():
		d := sha512.Sum384([]byte(input))
		digest, h = d[:], crypto.SHA384
	}
	der, err := k.Sign(nil, digest, h)
	if err != nil {
		t.Fatal(err)
	}
	var rs struct{ R, S *big.Int }
	if _, err := asn1.Unmarshal(der, &rs); err != nil {
		t.Fatal(err)
	}
	size := (k.Curve.Params().BitSize + 7) / 8
	out := make([]byte, 2*size)
	rs.R.FillBytes(out[:size])
	rs.S.FillBytes(out[size:])
	return out
}

// compactJWS signs header and payload objects into a compact JWS.
func compactJWS(t testing.TB, k *ecdsa.PrivateKey, header, payload any) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	p, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	input := b64.EncodeToString(h) + "." + b64.EncodeToString(p)
	return input + "." + b64.EncodeToString(signES(t, k, input))
}

// merchantAuthorization signs body (an envelope; any ap2 is ignored) the
// way UCP merchants do.
func merchantAuthorization(t testing.TB, k *ecdsa.PrivateKey, kid string, body []byte) string {
	t.Helper()
	c, err := Parse(body)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	payload, err := c.TermsPayload()
	if err != nil {
		t.Fatal(err)
	}
	header, err := json.Marshal(map[string]string{"alg": algOfCurve(k.Curve), "kid": kid})
	if err != nil {
		t.Fatal(err)
	}
	eh := b64.EncodeToString(header)
	return eh + ".." + b64.EncodeToString(signES(t, k, eh+"."+b64.EncodeToString(payload)))
}

// withMember adds one member at the end of a pretty-printed object body.
func withMember(t testing.TB, body []byte, name string, value any) []byte {
	t.Helper()
	v, err := json.MarshalIndent(value, "  ", "  ")
	if err != nil {
		t.Fatal(err)
	}
	trimmed := bytes.TrimRight(body, " \n")
	if len(trimmed) == 0 || trimmed[len(trimmed)-1] != '}' {
		t.Fatal("withMember: not an object")
	}
	var b bytes.Buffer
	b.Write(bytes.TrimRight(trimmed[:len(trimmed)-1], " \n"))
	b.WriteString(",\n  ")
	n, _ := json.Marshal(name)
	b.Write(n)
	b.WriteString(": ")
	b.Write(v)
	b.WriteString("\n}\n")
	return b.Bytes()
}

// tree decodes JSON keeping number literals.
func tree(t testing.TB, body []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// mutate decodes body, lets f change it and encodes it again.
func mutate(t testing.TB, body []byte, f func(m map[string]any)) []byte {
	t.Helper()
	m := tree(t, body)
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// at walks a tree along keys and indexes ("0", "1", ...).
func at(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			i := 0
			for _, r := range p {
				i = i*10 + int(r-'0')
			}
			v = c[i]
		}
	}
	return v
}

func obj(m map[string]any, path ...string) map[string]any {
	return at(m, path...).(map[string]any)
}

// holderKey and issuerKey sign test mandates.
func holderKey(t testing.TB) *ecdsa.PrivateKey { return testKey(t, elliptic.P256(), holderLabel) }
func issuerKey(t testing.TB) *ecdsa.PrivateKey { return testKey(t, elliptic.P256(), issuerLabel) }

// disclosureOf encodes one SD-JWT disclosure and returns it with its digest.
func disclosureOf(t testing.TB, elems ...any) (string, string) {
	t.Helper()
	b, err := json.Marshal(elems)
	if err != nil {
		t.Fatal(err)
	}
	d := b64.EncodeToString(b)
	sum := sha256.Sum256([]byte(d))
	return d, b64.EncodeToString(sum[:])
}

// mandateOpts shape a test mandate.
type mandateOpts struct {
	claims      map[string]any // extra issuer payload claims
	disclosures [][]any        // extra disclosures, each referenced from _sd
	checkout    any            // the disclosed "checkout"; nil: none
	noKB        bool
	sdHash      string // overrides the KB-JWT sd_hash
	kbTyp       string // overrides "kb+jwt"
}

// buildMandate makes an SD-JWT+kb checkout mandate.
func buildMandate(t testing.TB, o mandateOpts) string {
	t.Helper()
	payload := map[string]any{"vct": "mandate.checkout.1", "_sd_alg": "sha-256", "iat": 1777342376,
		"cnf": map[string]any{"jwk": json.RawMessage(jwkOf(t, &holderKey(t).PublicKey, nil))}}
	var sd []any
	var parts []string
	if o.checkout != nil {
		d, digest := disclosureOf(t, "c2FsdC1jaGVja291dA", "checkout", o.checkout)
		parts = append(parts, d)
		sd = append(sd, digest)
	}
	for _, elems := range o.disclosures {
		d, digest := disclosureOf(t, elems...)
		parts = append(parts, d)
		sd = append(sd, digest)
	}
	if len(sd) > 0 {
		payload["_sd"] = sd
	}
	for k, v := range o.claims {
		payload[k] = v
	}
	return sdJWTKB(t, payload, parts, o)
}

// sdJWTKB signs payload as the issuer-signed JWT, appends the disclosures
// and, unless o.noKB, a key-binding JWT over them.
func sdJWTKB(t testing.TB, payload map[string]any, disclosures []string, o mandateOpts) string {
	t.Helper()
	issuer := compactJWS(t, issuerKey(t), map[string]string{"alg": "ES256", "typ": "dc+sd-jwt"}, payload)
	sdjwt := issuer + "~"
	for _, d := range disclosures {
		sdjwt += d + "~"
	}
	if o.noKB {
		return sdjwt
	}
	sum := sha256.Sum256([]byte(sdjwt))
	hash := b64.EncodeToString(sum[:])
	if o.sdHash != "" {
		hash = o.sdHash
	}
	typ := "kb+jwt"
	if o.kbTyp != "" {
		typ = o.kbTyp
	}
	kb := compactJWS(t, holderKey(t), map[string]string{"alg": "ES256", "typ": typ},
		map[string]any{"iat": 1777342400, "aud": "merchant.example", "nonce": "n-0001", "sd_hash": hash})
	return sdjwt + kb
}

// bound is the checkout a mandate for body carries: body without
// ap2.checkout_mandate, as a tree.
func bound(t testing.TB, body []byte) map[string]any {
	t.Helper()
	m := tree(t, body)
	if ap2, ok := m["ap2"].(map[string]any); ok {
		delete(ap2, "checkout_mandate")
		if len(ap2) == 0 {
			delete(m, "ap2")
		}
	}
	return m
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// official is the release's official ready_for_complete example.
func official(t testing.TB, r Release) []byte {
	return readFile(t, filepath.Join("testdata", string(r), "checkout-response-"+string(r)+"-ready-for-complete.json"))
}

// signed is the release's ap2 fixture (merchant_authorization only).
func signed(t testing.TB, r Release) []byte {
	return readFile(t, filepath.Join("testdata", string(r), "checkout-response-"+string(r)+"-ready-for-complete-ap2.json"))
}

// mandated is the release's fixture with a checkout mandate.
func mandated(t testing.TB, r Release) []byte {
	return readFile(t, filepath.Join("testdata", string(r), "checkout-response-"+string(r)+"-ready-for-complete-ap2-mandate.json"))
}

func lookupOf(keys ...MerchantKey) func(string) (MerchantKey, error) {
	return func(kid string) (MerchantKey, error) {
		for _, k := range keys {
			if k.KID == kid {
				return k, nil
			}
		}
		return MerchantKey{}, unknownKID(kid)
	}
}

// unknownKID is a lookup's own error wrapping ErrUnknownKey.
type unknownKID string

func (u unknownKID) Error() string { return "kid " + string(u) + " is not registered" }
func (u unknownKID) Unwrap() error { return ErrUnknownKey }
