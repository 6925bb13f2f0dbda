package ucp

import (
	"bytes"
	"crypto/elliptic"
	"errors"
	"strings"
	"testing"
)

func TestParseMerchantJWKValid(t *testing.T) {
	for _, c := range []struct {
		name  string
		curve elliptic.Curve
		extra map[string]any
		want  MerchantKey // Public is checked apart
	}{
		{"P-256 full", elliptic.P256(), map[string]any{"kid": "m-1", "alg": "ES256", "use": "sig", "key_ops": []string{"verify"}},
			MerchantKey{KID: "m-1", Curve: "P-256", Alg: "ES256", Use: "sig"}},
		{"P-256 bare", elliptic.P256(), nil, MerchantKey{Curve: "P-256", Alg: "ES256"}},
		{"P-384", elliptic.P384(), map[string]any{"kid": "m-384", "alg": "ES384"}, MerchantKey{KID: "m-384", Curve: "P-384", Alg: "ES384"}},
		{"unknown members ignored", elliptic.P256(), map[string]any{"kid": "m-2", "x5t#S256": "abc", "ext": true},
			MerchantKey{KID: "m-2", Curve: "P-256", Alg: "ES256"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			priv := testKey(t, c.curve, "jwk "+c.name)
			k, err := ParseMerchantJWK(jwkOf(t, &priv.PublicKey, c.extra))
			if err != nil {
				t.Fatal(err)
			}
			if !k.Public.Equal(&priv.PublicKey) {
				t.Fatal("public key differs")
			}
			got := k
			got.Public = nil
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
			// PublicJWK round-trips and is canonical.
			again, err := ParseMerchantJWK(k.PublicJWK())
			if err != nil {
				t.Fatalf("PublicJWK %s: %v", k.PublicJWK(), err)
			}
			if !again.Public.Equal(k.Public) || again.KID != k.KID || again.Alg != k.Alg || again.Use != k.Use || again.Curve != k.Curve {
				t.Fatalf("round trip: %+v vs %+v", again, k)
			}
			if !bytes.Equal(again.PublicJWK(), k.PublicJWK()) {
				t.Fatal("PublicJWK is not stable")
			}
			for _, m := range []string{"d", "key_ops", "ext"} {
				if bytes.Contains(k.PublicJWK(), []byte(`"`+m+`"`)) {
					t.Fatalf("PublicJWK keeps %s: %s", m, k.PublicJWK())
				}
			}
		})
	}
}

func TestParseMerchantJWKRefusals(t *testing.T) {
	p256 := testKey(t, elliptic.P256(), "jwk refusals")
	good := tree(t, jwkOf(t, &p256.PublicKey, map[string]any{"kid": "m-1"}))
	x, y := good["x"].(string), good["y"].(string)
	with := func(extra map[string]any) []byte { return jwkOf(t, &p256.PublicKey, extra) }
	// Off the curve: a valid-length y that is not x's.
	yb, _ := b64.DecodeString(y)
	yb[31] ^= 1
	for _, c := range []struct {
		name, jwk, code, pointer string
	}{
		{"private d", string(with(map[string]any{"d": b64.EncodeToString(make([]byte, 32))})), CodePrivateKeyMaterial, "/d"},
		{"RSA private", `{"kty":"RSA","n":"sXch","e":"AQAB","d":"AQ","p":"AQ","q":"AQ"}`, CodePrivateKeyMaterial, "/d"},
		{"oct", `{"kty":"oct","k":"c2VjcmV0"}`, CodePrivateKeyMaterial, "/k"},
		{"private D", string(with(map[string]any{"D": b64.EncodeToString(make([]byte, 32))})), CodePrivateKeyMaterial, "/D"},
		{"private Dp", string(with(map[string]any{"Dp": "AQ"})), CodePrivateKeyMaterial, "/Dp"},
		{"private priv", string(with(map[string]any{"priv": "AQ"})), CodePrivateKeyMaterial, "/priv"},
		{"RSA", `{"kty":"RSA","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":"AQAB"}`, CodeInvalidKey, "/kty"},
		{"OKP Ed25519", `{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`, CodeInvalidKey, "/kty"},
		{"kty missing", `{"crv":"P-256","x":"` + x + `","y":"` + y + `"}`, CodeInvalidKey, "/kty"},
		{"P-521", `{"kty":"EC","crv":"P-521","x":"` + x + `","y":"` + y + `"}`, CodeInvalidKey, "/crv"},
		{"secp256k1", `{"kty":"EC","crv":"secp256k1","x":"` + x + `","y":"` + y + `"}`, CodeInvalidKey, "/crv"},
		{"off the curve", `{"kty":"EC","crv":"P-256","x":"` + x + `","y":"` + b64.EncodeToString(yb) + `"}`, CodeInvalidKey, ""},
		{"point at zero", `{"kty":"EC","crv":"P-256","x":"` + b64.EncodeToString(make([]byte, 32)) + `","y":"` + b64.EncodeToString(make([]byte, 32)) + `"}`, CodeInvalidKey, ""},
		{"x too short", `{"kty":"EC","crv":"P-256","x":"` + b64.EncodeToString(make([]byte, 31)) + `","y":"` + y + `"}`, CodeInvalidKey, "/x"},
		{"P-384 with P-256 coordinates", `{"kty":"EC","crv":"P-384","x":"` + x + `","y":"` + y + `"}`, CodeInvalidKey, "/x"},
		{"x padded", `{"kty":"EC","crv":"P-256","x":"` + x + `=","y":"` + y + `"}`, CodeInvalidKey, "/x"},
		{"x not base64url", `{"kty":"EC","crv":"P-256","x":"+` + x[1:] + `","y":"` + y + `"}`, CodeInvalidKey, "/x"},
		{"y a number", `{"kty":"EC","crv":"P-256","x":"` + x + `","y":1}`, CodeInvalidKey, "/y"},
		{"alg mismatch", string(with(map[string]any{"alg": "ES384"})), CodeInvalidKey, "/alg"},
		{"alg RS256", string(with(map[string]any{"alg": "RS256"})), CodeInvalidKey, "/alg"},
		{"use enc", string(with(map[string]any{"use": "enc"})), CodeInvalidKey, "/use"},
		{"key_ops sign", string(with(map[string]any{"key_ops": []string{"verify", "sign"}})), CodeInvalidKey, "/key_ops/1"},
		{"kid empty", string(with(map[string]any{"kid": ""})), CodeInvalidKey, "/kid"},
		{"kid a number", string(with(map[string]any{"kid": 7})), CodeInvalidKey, "/kid"},
		{"duplicate member", `{"kty":"EC","crv":"P-256","x":"` + x + `","x":"` + x + `","y":"` + y + `"}`, CodeInvalidKey, "/x"},
		{"duplicate kid", `{"kid":"a","kid":"b","kty":"EC","crv":"P-256","x":"` + x + `","y":"` + y + `"}`, CodeInvalidKey, "/kid"},
		{"array", `[]`, CodeInvalidKey, ""},
		{"string", `"EC"`, CodeInvalidKey, ""},
		{"not JSON", `{kty:EC}`, CodeInvalidKey, ""},
		{"empty", ``, CodeInvalidKey, ""},
		{"trailing data", string(with(nil)) + `{}`, CodeInvalidKey, ""},
		{"too large", `{"kty":"EC","pad":"` + strings.Repeat("a", MaxJWKBytes) + `"}`, CodeInvalidKey, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseMerchantJWK([]byte(c.jwk))
			var e *Error
			if !errors.As(err, &e) || e.Code != c.code || e.Pointer != c.pointer {
				t.Fatalf("got %v, want %s at %q", err, c.code, c.pointer)
			}
			if !errors.Is(err, sentinel(c.code)) {
				t.Fatal("sentinel not wrapped")
			}
		})
	}
}

func TestPublicJWKZero(t *testing.T) {
	if (MerchantKey{}).PublicJWK() != nil {
		t.Fatal("a zero key has a JWK")
	}
}
