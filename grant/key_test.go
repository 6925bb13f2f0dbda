package grant

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// RFC 8037 Appendix A: the Ed25519 example key, its thumbprint (A.3) and the
// EdDSA signature of the example JWS signing input (A.4).
const (
	rfcD          = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
	rfcX          = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
	rfcThumbprint = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
	rfcSigningIn  = "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc"
	rfcSignature  = "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
)

func b64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rfcKey(t testing.TB) Key {
	t.Helper()
	k, err := KeyFromSeed(b64(t, rfcD))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// seedKey returns a deterministic key for tests: seed = 32 bytes of b.
func seedKey(t testing.TB, b byte) Key {
	t.Helper()
	k, err := KeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKIDIsRFC7638Thumbprint(t *testing.T) {
	k := rfcKey(t)
	if got := base64.RawURLEncoding.EncodeToString(k.Public()); got != rfcX {
		t.Fatalf("public x = %s, want %s", got, rfcX)
	}
	if k.KID() != rfcThumbprint {
		t.Fatalf("KID() = %s, want RFC 8037 A.3 thumbprint %s", k.KID(), rfcThumbprint)
	}
	if k.KeyID() != k.KID() {
		t.Fatalf("KeyID() = %s, KID() = %s", k.KeyID(), k.KID())
	}
	// Recompute RFC 7638 by hand for other keys: SHA-256 over the required
	// members in lexicographic order, no whitespace.
	for b := range byte(8) {
		k := seedKey(t, b)
		in := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(k.Public()) + `"}`
		sum := sha256.Sum256([]byte(in))
		if want := base64.RawURLEncoding.EncodeToString(sum[:]); k.KID() != want {
			t.Errorf("seed %d: KID() = %s, want %s", b, k.KID(), want)
		}
		if kid, err := Thumbprint(k.Public()); err != nil || kid != k.KID() {
			t.Errorf("seed %d: Thumbprint = %q, %v; want %s", b, kid, err, k.KID())
		}
	}
}

func TestSignRFC8037Vector(t *testing.T) {
	k := rfcKey(t)
	sig, err := k.Sign([]byte(rfcSigningIn))
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(sig); got != rfcSignature {
		t.Fatalf("signature = %s, want RFC 8037 A.4 %s", got, rfcSignature)
	}
	var s Signer = k
	sig2, err := s.Sign([]byte("other"))
	if err != nil || !ed25519.Verify(k.Public(), []byte("other"), sig2) {
		t.Fatalf("Signer.Sign: %v, verifies=%v", err, ed25519.Verify(k.Public(), []byte("other"), sig2))
	}
}

func TestKeyFromSeedRejectsWrongLength(t *testing.T) {
	for _, n := range []int{0, 1, 31, 33, 64} {
		if _, err := KeyFromSeed(make([]byte, n)); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("seed of %d bytes: err = %v, want ErrInvalidKey", n, err)
		}
	}
}

func TestNewKey(t *testing.T) {
	seed := bytes.Repeat([]byte{7}, 32)
	k, err := NewKey(bytes.NewReader(seed))
	if err != nil {
		t.Fatal(err)
	}
	if want := seedKey(t, 7); !k.Equal(want) || k.KID() != want.KID() {
		t.Fatalf("NewKey from a fixed reader = %v, want %v", k, want)
	}
	if _, err := NewKey(bytes.NewReader(seed[:31])); err == nil {
		t.Fatal("NewKey with a short reader succeeded")
	}
	if _, err := NewKey(nil); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("NewKey(nil) err = %v, want ErrInvalidKey", err)
	}
}

func TestZeroKey(t *testing.T) {
	var k Key
	if !k.IsZero() || k.KID() != "" || k.Public() != nil || k.Seed() != nil {
		t.Fatalf("zero Key is not empty: %v", k)
	}
	if _, err := k.Sign([]byte("x")); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("zero Key Sign err = %v, want ErrInvalidKey", err)
	}
	if jwk := k.PublicJWK(); jwk.Key != nil {
		t.Fatalf("zero Key PublicJWK = %+v", jwk)
	}
	if !k.Equal(Key{}) || k.Equal(seedKey(t, 1)) || seedKey(t, 1).Equal(k) {
		t.Fatal("Equal on the zero Key is wrong")
	}
}

func TestKeyAccessorsReturnCopies(t *testing.T) {
	k := seedKey(t, 3)
	pub, seed := k.Public(), k.Seed()
	pub[0] ^= 0xff
	seed[0] ^= 0xff
	if bytes.Equal(k.Public(), pub) || bytes.Equal(k.Seed(), seed) {
		t.Fatal("mutating returned slices changed the key")
	}
	if !bytes.Equal(k.Seed(), bytes.Repeat([]byte{3}, 32)) {
		t.Fatal("Seed() is not the seed")
	}
}

func TestKeyFormattingHidesSeed(t *testing.T) {
	k := rfcKey(t)
	seed := k.Seed()
	secrets := []string{
		hex.EncodeToString(seed), rfcD, base64.StdEncoding.EncodeToString(seed),
		fmt.Sprint(seed), fmt.Sprint([]byte(k.priv)),
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
		out := fmt.Sprintf(verb, k) + fmt.Sprintf(verb, []Key{k}) + fmt.Sprintf(verb, struct{ K Key }{k})
		for _, s := range secrets {
			if strings.Contains(strings.ToLower(out), strings.ToLower(s)) {
				t.Errorf("%s prints the seed: %s", verb, out)
			}
		}
	}
	if got := fmt.Sprint(k); got != "grant.Key{kid: "+rfcThumbprint+"}" {
		t.Errorf("String() = %s", got)
	}
}

func TestPublicJWKMembers(t *testing.T) {
	k := rfcKey(t)
	raw, err := json.Marshal(k.PublicJWK())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"kty": "OKP", "crv": "Ed25519", "x": rfcX, "kid": rfcThumbprint, "alg": "EdDSA", "use": "sig"}
	if len(m) != len(want) {
		t.Fatalf("PublicJWK members = %v, want exactly %v", slices.Sorted(maps.Keys(m)), slices.Sorted(maps.Keys(want)))
	}
	for name, v := range want {
		if m[name] != v {
			t.Errorf("PublicJWK %s = %v, want %v", name, m[name], v)
		}
	}
	// Our own output registers cleanly.
	pub, kid, err := ParsePublicJWK(raw)
	if err != nil || !bytes.Equal(pub, k.Public()) || kid != k.KID() {
		t.Fatalf("ParsePublicJWK(PublicJWK) = %x, %q, %v", pub, kid, err)
	}
}
