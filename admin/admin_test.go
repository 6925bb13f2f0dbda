package admin_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/tenant"
)

// newService is the admin feature alone over an in-memory store, signing
// with ring (nil: signing not configured).
func newService(t *testing.T, ring *grant.KeyRing) (*admin.Service, core.Deps) {
	t.Helper()
	b, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	d := core.Deps{Store: core.NewStore(b), Clock: core.Clock(time.Now), IDs: core.IDs{Rand: rand.Reader},
		Logger: slog.New(slog.DiscardHandler), Keys: core.NewKeys(ring), Issuer: "clearance"}
	return admin.New(d), d
}

// wantErrorCode asserts err is a *core.Error of kind with code (and field, if given).
func wantErrorCode(t *testing.T, what string, err, kind error, code, field string) {
	t.Helper()
	var ce *core.Error
	if !errors.Is(err, kind) || !errors.As(err, &ce) || ce.Code != code {
		t.Errorf("%s: got %v; want %s", what, err, code)
		return
	}
	if field != "" && (len(ce.Fields) != 1 || ce.Fields[0].Field != field) {
		t.Errorf("%s: fields %+v; want %s", what, ce.Fields, field)
	}
}

// TestRevokeKeyRefusesImpossibleKIDs: the spec's "kid 1 to 200 chars" is a
// 400, as at registration, not a 404.
func TestRevokeKeyRefusesImpossibleKIDs(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, nil)
	o, err := s.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, kid := range []string{strings.Repeat("k", registry.MaxKIDLength+1), "", "k\u200b", "agent-1 "} {
		_, err := s.RevokeKey(ctx, o.Org.ID, registry.KindAgent, kid)
		wantErrorCode(t, fmt.Sprintf("kid %.20q", kid), err, core.ErrInvalidRequest, registry.CodeInvalidKID, "kid")
	}
	_, err = s.RevokeKey(ctx, o.Org.ID, registry.KindAgent, strings.Repeat("k", registry.MaxKIDLength))
	wantErrorCode(t, "unknown kid", err, core.ErrNotFound, registry.CodeKeyNotFound, "")
}

// TestCreateOrgRefusesBadNames: a name is 1 to 200 characters without
// control characters, surrounding space trimmed; nothing is created otherwise.
func TestCreateOrgRefusesBadNames(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, nil)
	for _, name := range []string{"", "   ", strings.Repeat("é", admin.MaxOrgNameLength+1), "Acme\x00", "Ac\u0085me"} {
		_, err := s.CreateOrg(ctx, name)
		wantErrorCode(t, fmt.Sprintf("name %.20q", name), err, core.ErrInvalidRequest, core.CodeInvalidRequest, "name")
	}
	o, err := s.CreateOrg(ctx, "  "+strings.Repeat("é", admin.MaxOrgNameLength)+" ")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Org(ctx, o.Org.ID); err != nil || got.Name != strings.Repeat("é", admin.MaxOrgNameLength) {
		t.Fatalf("Org = %+v, %v", got, err)
	}
}

// TestAuthenticate: only an issued secret authenticates, as its own key and
// org; a platform secret works once registered, and registering is idempotent.
func TestAuthenticate(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, nil)
	o, err := s.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second answer comes from the cache
		p, err := s.Authenticate(ctx, o.Key.Secret)
		if err != nil || p.KeyID != o.Key.KeyID || p.OrgID != o.Org.ID || p.IsPlatform() {
			t.Fatalf("Authenticate = %+v, %v", p, err)
		}
	}
	for _, secret := range []string{"", "Bearer " + o.Key.Secret, o.Key.Secret[:len(o.Key.Secret)-1] + "x"} {
		_, err := s.Authenticate(ctx, secret)
		wantErrorCode(t, fmt.Sprintf("secret %.20q", secret), err, core.ErrUnauthenticated, core.CodeUnauthenticated, "")
	}

	plat, err := s.NewPlatformSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, plat); err == nil {
		t.Fatal("an unregistered platform secret authenticated")
	}
	for range 2 {
		if err := s.EnsurePlatformKey(ctx, plat); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := s.Authenticate(ctx, plat); err != nil || !p.IsPlatform() {
		t.Fatalf("platform Authenticate = %+v, %v", p, err)
	}
	wantErrorCode(t, "an org secret as platform key", s.EnsurePlatformKey(ctx, o.Key.Secret), core.ErrInvalidRequest, core.CodeInvalidRequest, "")
}

// TestRevokeGrantKey: a grant key revoked in the store leaves the JWKS,
// verifies nothing and, being the active key, signs nothing.
func TestRevokeGrantKey(t *testing.T) {
	ctx := context.Background()
	oldKey, _ := grant.KeyFromSeed(bytes.Repeat([]byte{1}, 32))
	newKey, _ := grant.KeyFromSeed(bytes.Repeat([]byte{2}, 32))
	ring := grant.NewKeyRing(oldKey).Rotate(newKey, time.Now(), time.Hour)
	s, d := newService(t, ring)
	if set, ok := s.JWKS(); !ok || len(set.Keys) != 2 {
		t.Fatalf("JWKS before = %d keys, %v", len(set.Keys), ok)
	}
	wantErrorCode(t, "impossible kid", s.RevokeGrantKey(ctx, "k\u200b"), core.ErrInvalidRequest, registry.CodeInvalidKID, "kid")

	if err := s.RevokeGrantKey(ctx, oldKey.KID()); err != nil {
		t.Fatal(err)
	}
	set, _ := s.JWKS()
	if len(set.Keys) != 1 || set.Keys[0].KeyID != newKey.KID() {
		t.Fatalf("JWKS after revoking the previous key: %+v", set.Keys)
	}
	keys, err := d.Keys.Current()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := keys.Lookup(oldKey.KID(), time.Now()); ok {
		t.Error("a revoked key still verifies")
	}
	if _, err := keys.Signer(); err != nil {
		t.Fatalf("the active key should still sign: %v", err)
	}

	if err := s.RevokeGrantKey(ctx, newKey.KID()); err != nil {
		t.Fatal(err)
	}
	keys, _ = d.Keys.Current()
	_, err = keys.Signer()
	wantErrorCode(t, "revoked active key", err, core.ErrUnavailable, core.CodeSigningKeyRevoked, "")
	if err := s.RefreshKeyRevocations(ctx); err != nil || !d.Keys.ActiveRevoked() {
		t.Fatalf("a refresh withdrew nothing: %v, active revoked %v", err, d.Keys.ActiveRevoked())
	}
}

// TestJWKSWithoutSigning: no ring, no JWKS.
func TestJWKSWithoutSigning(t *testing.T) {
	s, _ := newService(t, nil)
	if _, ok := s.JWKS(); ok {
		t.Fatal("JWKS without a ring")
	}
}

// TestAuthenticateCredentialLifetimes: a credential with a lifetime (an
// onboarding grant) authenticates until it expires or is revoked, and its
// revocation holds at the next use: it is never served from memory.
func TestAuthenticateCredentialLifetimes(t *testing.T) {
	ctx := context.Background()
	b, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	d := core.Deps{Store: core.NewStore(b), Clock: core.Clock(func() time.Time { return now }), IDs: core.IDs{Rand: rand.Reader},
		Logger: slog.New(slog.DiscardHandler), Keys: core.NewKeys(nil), Issuer: "clearance"}
	s := admin.New(d)
	o, err := s.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(id string, expires time.Time) (string, tenant.APIKey) {
		secret, hash, err := tenant.NewSecret(rand.Reader, tenant.PrefixOnboarding)
		if err != nil {
			t.Fatal(err)
		}
		k := tenant.APIKey{ID: id, OrgID: o.Org.ID, Kind: tenant.KindOnboarding, Hash: hash, CreatedAt: now, ExpiresAt: expires}
		if err := b.Update(ctx, o.Org.ID, func(tx store.Tx) error { return tx.PutAPIKey(ctx, k) }); err != nil {
			t.Fatal(err)
		}
		return secret, k
	}
	revocable, k := issue("onb_1", now.Add(30*time.Minute))
	expiring, _ := issue("onb_2", now.Add(10*time.Minute))
	for range 2 {
		p, err := s.Authenticate(ctx, revocable)
		if err != nil || p.KeyID != "onb_1" || p.OrgID != o.Org.ID || p.Kind != tenant.KindOnboarding {
			t.Fatalf("Authenticate(grant) = %+v, %v", p, err)
		}
	}
	k.RevokedAt = now
	if err := b.Update(ctx, o.Org.ID, func(tx store.Tx) error { return tx.PutAPIKey(ctx, k) }); err != nil {
		t.Fatal(err)
	}
	_, err = s.Authenticate(ctx, revocable)
	wantErrorCode(t, "a revoked grant", err, core.ErrUnauthenticated, core.CodeUnauthenticated, "")

	if _, err := s.Authenticate(ctx, expiring); err != nil {
		t.Fatalf("grant before its expiry: %v", err)
	}
	now = now.Add(10 * time.Minute)
	_, err = s.Authenticate(ctx, expiring)
	wantErrorCode(t, "a grant at its expiry", err, core.ErrUnauthenticated, core.CodeUnauthenticated, "")
	// The org's own key, with no lifetime, is unaffected.
	if _, err := s.Authenticate(ctx, o.Key.Secret); err != nil {
		t.Fatal(err)
	}
}

// TestRevokeOrgCredentials: every credential of the org stops working, on
// this server at once (cached ones included) and on a server that reads
// the store; the replacement works; other orgs are untouched.
func TestRevokeOrgCredentials(t *testing.T) {
	ctx := context.Background()
	s, d := newService(t, nil)
	o, err := s.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CreateOrg(ctx, "Other")
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.CreateAPIKey(ctx, o.Org.ID, []string{"decision:write"})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{o.Key.Secret, second.Secret, other.Key.Secret} {
		if _, err := s.Authenticate(ctx, secret); err != nil { // cached now
			t.Fatal(err)
		}
	}
	r, err := s.RevokeOrgCredentials(ctx, o.Org.ID, "acct_1", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.KeyIDs) != 2 || r.KeyIDs[0] != o.Key.KeyID || r.KeyIDs[1] != second.KeyID || r.Replacement == nil {
		t.Fatalf("revoked %v, replacement %v", r.KeyIDs, r.Replacement)
	}
	elsewhere := admin.New(d) // another server on the same store, nothing cached
	for _, a := range []*admin.Service{s, elsewhere} {
		for _, secret := range []string{o.Key.Secret, second.Secret} {
			_, err := a.Authenticate(ctx, secret)
			wantErrorCode(t, "a revoked key", err, core.ErrUnauthenticated, core.CodeUnauthenticated, "")
		}
		if p, err := a.Authenticate(ctx, r.Replacement.Secret); err != nil || p.OrgID != o.Org.ID {
			t.Fatalf("replacement: %+v, %v", p, err)
		}
		if _, err := a.Authenticate(ctx, other.Key.Secret); err != nil {
			t.Fatalf("another org's key: %v", err)
		}
	}
	entries, err := d.Store.LedgerEntries(ctx, o.Org.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if last := entries[len(entries)-1]; last.Kind != "credentials.revoked" {
		t.Fatalf("last entry %s, want credentials.revoked", last.Kind)
	}
	// Again, without a replacement: only the replacement is left to revoke.
	r2, err := s.RevokeOrgCredentials(ctx, o.Org.ID, "acct_1", false)
	if err != nil || len(r2.KeyIDs) != 1 || r2.KeyIDs[0] != r.Replacement.KeyID || r2.Replacement != nil {
		t.Fatalf("second revocation = %+v, %v", r2, err)
	}
}
