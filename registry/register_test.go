package registry_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

const (
	orgA = "org_reg_a"
	orgB = "org_reg_b"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func open(t *testing.T) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func key(seed byte) ed25519.PublicKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)).Public().(ed25519.PublicKey)
}

func x(pub []byte) string { return base64.RawURLEncoding.EncodeToString(pub) }

func jwk(pub []byte, extra string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"kty":"OKP","crv":"Ed25519","x":%q%s}`, x(pub), extra))
}

func register(t *testing.T, s *pebblestore.Store, org string, kind registry.Kind, r registry.Registration, now time.Time) (registry.Key, bool, error) {
	t.Helper()
	var k registry.Key
	var created bool
	err := s.Update(t.Context(), org, func(tx store.Tx) error {
		var err error
		k, created, err = registry.Register(t.Context(), tx, org, kind, r, now)
		return err
	})
	return k, created, err
}

func revoke(t *testing.T, s *pebblestore.Store, org string, kind registry.Kind, kid string, now time.Time) (registry.Key, error) {
	t.Helper()
	var k registry.Key
	err := s.Update(t.Context(), org, func(tx store.Tx) error {
		var err error
		k, err = registry.Revoke(t.Context(), tx, kind, kid, now)
		return err
	})
	return k, err
}

func wantCode(t *testing.T, what string, err, sentinel error, code string) {
	t.Helper()
	var re *registry.Error
	if !errors.Is(err, sentinel) || !errors.As(err, &re) || re.Code() != code {
		t.Fatalf("%s: error %v, want %s (%v)", what, err, code, sentinel)
	}
}

func TestRegisterRevokeReactivate(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	reg := registry.Registration{KID: "psp-2026", Issuer: "https://psp.example", PublicJWK: jwk(key(1), `,"kid":"psp-2026","alg":"EdDSA","use":"sig","ext":"dropped","key_ops":["verify"]`)}
	k, created, err := register(t, s, orgA, registry.KindProvider, reg, t0)
	if err != nil || !created {
		t.Fatalf("Register = %v, created %v", err, created)
	}
	wantJWK := fmt.Sprintf(`{"kty":"OKP","crv":"Ed25519","x":%q,"kid":"psp-2026","alg":"EdDSA","use":"sig"}`, x(key(1)))
	if string(k.PublicJWK) != wantJWK {
		t.Fatalf("stored JWK %s, want %s", k.PublicJWK, wantJWK)
	}
	if k.OrgID != orgA || k.Kind != registry.KindProvider || k.Status != registry.StatusActive || k.Issuer != reg.Issuer ||
		!bytes.Equal(k.PublicKey, key(1)) || !k.CreatedAt.Equal(t0) || !k.UpdatedAt.Equal(t0) || k.RevokedAt != nil {
		t.Fatalf("registered key %+v", k)
	}

	// The same registration again is harmless.
	again, created, err := register(t, s, orgA, registry.KindProvider, reg, t0.Add(time.Minute))
	if err != nil || created || !again.UpdatedAt.Equal(t0) {
		t.Fatalf("repeated Register = %+v, created %v, %v", again, created, err)
	}
	// Another key, or another issuer, under an active kid is refused.
	_, _, err = register(t, s, orgA, registry.KindProvider, registry.Registration{KID: "psp-2026", Issuer: reg.Issuer, PublicJWK: jwk(key(2), "")}, t0)
	wantCode(t, "another key under an active kid", err, registry.ErrKIDInUse, "KID_IN_USE")
	_, _, err = register(t, s, orgA, registry.KindProvider, registry.Registration{KID: "psp-2026", Issuer: "https://evil.example", PublicJWK: jwk(key(1), "")}, t0)
	wantCode(t, "another issuer under an active kid", err, registry.ErrKIDInUse, "KID_IN_USE")

	pub, err := registry.Lookup(ctx, s, orgA, registry.KindProvider, "psp-2026")
	if err != nil || !bytes.Equal(pub, key(1)) {
		t.Fatalf("Lookup = %x, %v", pub, err)
	}
	if k, err := registry.LookupKey(ctx, s, orgA, registry.KindProvider, "psp-2026"); err != nil ||
		!bytes.Equal(k.PublicKey, key(1)) || k.Issuer != reg.Issuer || k.KID != "psp-2026" {
		t.Fatalf("LookupKey = %+v, %v", k, err)
	}

	revokedAt := t0.Add(time.Hour)
	r, err := revoke(t, s, orgA, registry.KindProvider, "psp-2026", revokedAt)
	if err != nil || r.Status != registry.StatusRevoked || r.RevokedAt == nil || !r.RevokedAt.Equal(revokedAt) ||
		!bytes.Equal(r.PublicKey, key(1)) || r.Issuer != reg.Issuer || string(r.PublicJWK) != wantJWK {
		t.Fatalf("Revoke = %+v, %v", r, err)
	}
	r2, err := revoke(t, s, orgA, registry.KindProvider, "psp-2026", revokedAt.Add(time.Hour))
	if err != nil || !r2.RevokedAt.Equal(revokedAt) {
		t.Fatalf("second Revoke = %+v, %v; want unchanged", r2, err)
	}
	_, err = revoke(t, s, orgA, registry.KindProvider, "nope", revokedAt)
	wantCode(t, "Revoke of a missing kid", err, registry.ErrKeyNotFound, "KEY_NOT_FOUND")

	for _, kid := range []string{"psp-2026", "never-registered"} {
		_, err = registry.Lookup(ctx, s, orgA, registry.KindProvider, kid)
		wantCode(t, "Lookup "+kid, err, registry.ErrKeyNotFound, "KEY_NOT_FOUND")
		if !errors.Is(err, grant.ErrUnknownKey) {
			t.Fatalf("Lookup %s: %v does not wrap grant.ErrUnknownKey", kid, err)
		}
		_, err = registry.LookupKey(ctx, s, orgA, registry.KindProvider, kid)
		wantCode(t, "LookupKey "+kid, err, registry.ErrKeyNotFound, "KEY_NOT_FOUND")
	}

	// Registering the revoked kid again replaces the key and clears the
	// revocation.
	back := registry.Registration{KID: "psp-2026", Issuer: "https://psp.example/v2", PublicJWK: jwk(key(3), "")}
	k3, created, err := register(t, s, orgA, registry.KindProvider, back, t0.Add(2*time.Hour))
	if err != nil || !created || k3.Status != registry.StatusActive || k3.RevokedAt != nil || !bytes.Equal(k3.PublicKey, key(3)) ||
		!k3.CreatedAt.Equal(t0) || !k3.UpdatedAt.Equal(t0.Add(2*time.Hour)) || k3.Issuer != back.Issuer {
		t.Fatalf("re-Register = %+v, created %v, %v", k3, created, err)
	}
	pub, err = registry.Lookup(ctx, s, orgA, registry.KindProvider, "psp-2026")
	if err != nil || !bytes.Equal(pub, key(3)) {
		t.Fatalf("Lookup after re-registration = %x, %v", pub, err)
	}
}

func TestListingAndIsolation(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	for i, kid := range []string{"k-b", "k-a", "k-c"} {
		if _, _, err := register(t, s, orgA, registry.KindProvider, registry.Registration{KID: kid, PublicJWK: jwk(key(byte(10+i)), "")}, t0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := revoke(t, s, orgA, registry.KindProvider, "k-c", t0); err != nil {
		t.Fatal(err)
	}
	// The same kid as an agent key and in another org are separate keys.
	if _, _, err := register(t, s, orgA, registry.KindAgent, registry.Registration{KID: "k-a", PublicJWK: jwk(key(20), "")}, t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := register(t, s, orgB, registry.KindProvider, registry.Registration{KID: "k-a", PublicJWK: jwk(key(21), "")}, t0); err != nil {
		t.Fatal(err)
	}
	keys, err := s.RegisteredKeys(ctx, orgA, registry.KindProvider)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys {
		got = append(got, k.KID+":"+string(k.Status))
	}
	if strings.Join(got, " ") != "k-a:ACTIVE k-b:ACTIVE k-c:REVOKED" {
		t.Fatalf("RegisteredKeys = %v", got)
	}
	for _, c := range []struct {
		org  string
		kind registry.Kind
		seed byte
	}{{orgA, registry.KindProvider, 11}, {orgA, registry.KindAgent, 20}, {orgB, registry.KindProvider, 21}} {
		pub, err := registry.Lookup(ctx, s, c.org, c.kind, "k-a")
		if err != nil || !bytes.Equal(pub, key(c.seed)) {
			t.Fatalf("Lookup(%s, %s, k-a) = %x, %v", c.org, c.kind, pub, err)
		}
	}
	if _, err := registry.Lookup(ctx, s, orgB, registry.KindAgent, "k-a"); !errors.Is(err, registry.ErrKeyNotFound) {
		t.Fatalf("Lookup across kinds and orgs = %v", err)
	}
	if _, err := s.RegisteredKeyOf(ctx, orgB, registry.KindProvider, "k-b"); !errors.Is(err, store.ErrNotFound) || !errors.Is(err, registry.ErrKeyNotFound) {
		t.Fatalf("RegisteredKeyOf(other org) = %v, want store.ErrNotFound and registry.ErrKeyNotFound", err)
	}
}

func TestRegisterRefuses(t *testing.T) {
	lowOrder := append([]byte{1}, make([]byte, 31)...) // the identity point
	tests := []struct {
		name     string
		r        registry.Registration
		sentinel error
		code     string
		cause    error // grant's sentinel, also wrapped
	}{
		{"private member d", registry.Registration{KID: "k", PublicJWK: jwk(key(1), `,"d":"AAAA"`)}, registry.ErrPrivateKeyMaterial, "PRIVATE_KEY_MATERIAL", grant.ErrPrivateKeyMaterial},
		{"private member D", registry.Registration{KID: "k", PublicJWK: jwk(key(1), `,"D":"AAAA"`)}, registry.ErrPrivateKeyMaterial, "PRIVATE_KEY_MATERIAL", grant.ErrPrivateKeyMaterial},
		{"31-byte key", registry.Registration{KID: "k", PublicJWK: jwk(key(1)[:31], "")}, registry.ErrInvalidKey, "INVALID_PUBLIC_KEY", grant.ErrInvalidKey},
		{"33-byte key", registry.Registration{KID: "k", PublicJWK: jwk(append(key(1), 0), "")}, registry.ErrInvalidKey, "INVALID_PUBLIC_KEY", grant.ErrInvalidKey},
		{"low-order point", registry.Registration{KID: "k", PublicJWK: jwk(lowOrder, "")}, registry.ErrWeakKey, "WEAK_PUBLIC_KEY", grant.ErrWeakKey},
		{"EC key", registry.Registration{KID: "k", PublicJWK: json.RawMessage(`{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}`)}, registry.ErrInvalidKey, "INVALID_PUBLIC_KEY", grant.ErrInvalidKey},
		{"not JSON", registry.Registration{KID: "k", PublicJWK: json.RawMessage(`nope`)}, registry.ErrInvalidKey, "INVALID_PUBLIC_KEY", grant.ErrInvalidKey},
		{"no JWK", registry.Registration{KID: "k"}, registry.ErrInvalidKey, "INVALID_PUBLIC_KEY", grant.ErrInvalidKey},
		{"kid mismatch", registry.Registration{KID: "k", PublicJWK: jwk(key(1), `,"kid":"other"`)}, registry.ErrKIDMismatch, "KID_MISMATCH", nil},
		{"empty kid", registry.Registration{KID: "", PublicJWK: jwk(key(1), "")}, registry.ErrInvalidKID, "INVALID_KID", nil},
		{"201-character kid", registry.Registration{KID: strings.Repeat("k", 201), PublicJWK: jwk(key(1), "")}, registry.ErrInvalidKID, "INVALID_KID", nil},
		{"non-ASCII kid", registry.Registration{KID: "clé", PublicJWK: jwk(key(1), "")}, registry.ErrInvalidKID, "INVALID_KID", nil},
		{"zero-width space in kid", registry.Registration{KID: "psp-2026\u200b", PublicJWK: jwk(key(1), "")}, registry.ErrInvalidKID, "INVALID_KID", nil},
		{"bidi override in kid", registry.Registration{KID: "\u202epsp-2026", PublicJWK: jwk(key(1), "")}, registry.ErrInvalidKID, "INVALID_KID", nil},
		{"trailing space in kid", registry.Registration{KID: "psp-2026 ", PublicJWK: jwk(key(1), "")}, registry.ErrInvalidKID, "INVALID_KID", nil},
		{"slash in kid", registry.Registration{KID: "psp/2026", PublicJWK: jwk(key(1), "")}, registry.ErrInvalidKID, "INVALID_KID", nil},
		{"control character in kid", registry.Registration{KID: "a\nb", PublicJWK: jwk(key(1), "")}, registry.ErrInvalidKID, "INVALID_KID", nil},
		{"invalid UTF-8 kid", registry.Registration{KID: "a\xffb", PublicJWK: jwk(key(1), "")}, registry.ErrInvalidKID, "INVALID_KID", nil},
	}
	s := open(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := register(t, s, orgA, registry.KindProvider, tc.r, t0)
			wantCode(t, "Register", err, tc.sentinel, tc.code)
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Fatalf("%v does not wrap %v", err, tc.cause)
			}
		})
	}
	keys, err := s.RegisteredKeys(t.Context(), orgA, registry.KindProvider)
	if err != nil || len(keys) != 0 {
		t.Fatalf("refused registrations stored %v (%v)", keys, err)
	}
	// 200 characters is the limit, inclusive; RFC 7638 thumbprints
	// (base64url) and the usual separators are kids.
	for i, kid := range []string{strings.Repeat("k", 200), x(key(9)), "psp.example:2026-11_a"} {
		if _, _, err := register(t, s, orgA, registry.KindProvider, registry.Registration{KID: kid, PublicJWK: jwk(key(byte(1+i)), "")}, t0); err != nil {
			t.Fatalf("kid %q: %v", kid, err)
		}
	}
	err = s.Update(t.Context(), orgA, func(tx store.Tx) error {
		_, _, err := registry.Register(context.Background(), tx, orgA, "merchant", registry.Registration{KID: "m", PublicJWK: jwk(key(1), "")}, t0)
		return err
	})
	if err == nil {
		t.Fatal("Register accepted an unknown kind")
	}
}
