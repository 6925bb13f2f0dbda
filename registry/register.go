package registry

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/ucp"
)

// MaxKIDLength is the longest kid, in characters (ASCII, so bytes).
const MaxKIDLength = 200

// ValidKID reports whether kid can name a registered key: 1 to
// MaxKIDLength characters of ^[A-Za-z0-9._:-]+$, which holds RFC 7638
// thumbprints (base64url) and the usual "issuer:2026-11" names, and no
// look-alike (a zero-width space, a bidi override, a trailing space or a
// homoglyph would make two kids that read the same).
func ValidKID(kid string) bool {
	if kid == "" || len(kid) > MaxKIDLength {
		return false
	}
	for i := 0; i < len(kid); i++ {
		switch c := kid[i]; {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// MaxIssuerLength is the longest iss, in bytes.
const MaxIssuerLength = 512

// Registration is the body that registers a key: {"kid", "iss"?,
// "public_jwk"}.
type Registration struct {
	KID       string          `json:"kid"`
	Issuer    string          `json:"iss,omitempty"`
	PublicJWK json.RawMessage `json:"public_jwk"`
}

// publicJWK is the stored form of a registered JWK: public members only,
// re-encoded, never the bytes received.
type publicJWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	KID string `json:"kid,omitempty"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
}

// Register registers r as an ACTIVE key of kind in tx's org (orgID) at now.
//
// The kid must be ValidKID (ErrInvalidKID); the iss, when given, at most 512 bytes of UTF-8 without
// control characters (ErrInvalidIssuer). The JWK is parsed with
// grant.ParsePublicJWK: private members are ErrPrivateKeyMaterial, a
// low-order point ErrWeakKey, anything else malformed ErrInvalidKey (each
// also wrapping grant's error); a kid inside the JWK that differs from
// r.KID is ErrKIDMismatch. Only the public members (kty, crv, x and, when
// given, kid, alg, use) are stored, re-encoded.
//
// For a kid that is already registered:
//   - a REVOKED key becomes ACTIVE again with the new key and issuer, its
//     revocation cleared (created = true; CreatedAt is kept, UpdatedAt is
//     now);
//   - an ACTIVE key with the same public key and issuer is returned
//     unchanged (created = false), so a retried registration is harmless;
//   - an ACTIVE key with another public key or issuer is refused with
//     ErrKIDInUse: replacing a live key in place would silently change what
//     verifies; revoke it first.
//
// Lookups of a missing key made through tx must return an error wrapping
// ErrKeyNotFound (backends also wrap store.ErrNotFound).
func Register(ctx context.Context, tx Tx, orgID string, kind Kind, r Registration, now time.Time) (Key, bool, error) {
	if err := checkKind(kind); err != nil {
		return Key{}, false, err
	}
	if err := checkKID(r.KID); err != nil {
		return Key{}, false, err
	}
	if err := checkIssuer(r.Issuer); err != nil {
		return Key{}, false, err
	}
	var (
		pub []byte
		jwk json.RawMessage
		err error
	)
	if kind == KindMerchant {
		pub, jwk, err = parseMerchantJWK(r.PublicJWK, r.KID)
	} else {
		pub, jwk, err = parseJWK(r.PublicJWK, r.KID)
	}
	if err != nil {
		return Key{}, false, err
	}

	old, err := tx.RegisteredKey(ctx, kind, r.KID)
	switch {
	case errors.Is(err, ErrKeyNotFound):
		k := Key{
			OrgID: orgID, Kind: kind, KID: r.KID, Issuer: r.Issuer,
			PublicJWK: jwk, PublicKey: pub, Status: StatusActive,
			CreatedAt: now, UpdatedAt: now,
		}
		if err := tx.PutRegisteredKey(ctx, k); err != nil {
			return Key{}, false, err
		}
		return k, true, nil
	case err != nil:
		return Key{}, false, fmt.Errorf("registry: read %s key %q: %w", kind, r.KID, err)
	}
	if old.Status == StatusActive {
		if bytes.Equal(old.PublicKey, pub) && old.Issuer == r.Issuer {
			return old, false, nil
		}
		return Key{}, false, refuse(ErrKIDInUse, "%s key %q is active with another key or issuer; revoke it first", kind, r.KID)
	}
	k := old
	k.Issuer = r.Issuer
	k.PublicJWK = jwk
	k.PublicKey = pub
	k.Status = StatusActive
	k.RevokedAt = nil
	k.UpdatedAt = now
	if err := tx.PutRegisteredKey(ctx, k); err != nil {
		return Key{}, false, err
	}
	return k, true, nil
}

// Revoke revokes the key of kind with kid at now, keeping its metadata. A
// kid no key can have (one Register would refuse) is ErrInvalidKID, without
// asking tx; a missing key is ErrKeyNotFound; an already revoked key is
// returned unchanged.
func Revoke(ctx context.Context, tx Tx, kind Kind, kid string, now time.Time) (Key, error) {
	if err := checkKID(kid); err != nil {
		return Key{}, err
	}
	k, err := tx.RegisteredKey(ctx, kind, kid)
	switch {
	case errors.Is(err, ErrKeyNotFound):
		return Key{}, refuse(ErrKeyNotFound, "no %s key %q", kind, kid)
	case err != nil:
		return Key{}, fmt.Errorf("registry: read %s key %q: %w", kind, kid, err)
	}
	if k.Status == StatusRevoked {
		return k, nil
	}
	k.Status = StatusRevoked
	at := now
	k.RevokedAt = &at
	k.UpdatedAt = now
	if err := tx.PutRegisteredKey(ctx, k); err != nil {
		return Key{}, err
	}
	return k, nil
}

// Lookup returns the public key of the org's ACTIVE key of kind with kid,
// for verifying signatures. An unknown or revoked kid is an error wrapping
// both ErrKeyNotFound and grant.ErrUnknownKey, and so is a kid no key can
// have (not ValidKID), without asking r; a storage failure is returned as
// it is (it is not a refusal).
func Lookup(ctx context.Context, r Reader, orgID string, kind Kind, kid string) (ed25519.PublicKey, error) {
	k, err := LookupKey(ctx, r, orgID, kind, kid)
	if err != nil {
		return nil, err
	}
	return ed25519.PublicKey(k.PublicKey), nil
}

// LookupKey is Lookup returning the whole registered key, for checks that
// need more than the public key (a receipt's iss must be the key's Issuer).
// PublicKey is a copy, exactly ed25519.PublicKeySize bytes.
func LookupKey(ctx context.Context, r Reader, orgID string, kind Kind, kid string) (Key, error) {
	k, err := lookupActive(ctx, r, orgID, kind, kid)
	if err != nil {
		return Key{}, err
	}
	if len(k.PublicKey) != ed25519.PublicKeySize {
		return Key{}, fmt.Errorf("registry: stored %s key %q has %d bytes", kind, kid, len(k.PublicKey))
	}
	k.PublicKey = bytes.Clone(k.PublicKey)
	return k, nil
}

// LookupMerchant returns the org's ACTIVE merchant key with kid, for
// verifying checkout terms; errors as Lookup's, the unknown ones also
// wrapping ucp.ErrUnknownKey.
func LookupMerchant(ctx context.Context, r Reader, orgID, kid string) (ucp.MerchantKey, error) {
	k, err := lookupActive(ctx, r, orgID, KindMerchant, kid)
	if errors.Is(err, ErrKeyNotFound) {
		return ucp.MerchantKey{}, fmt.Errorf("%w: %w", ucp.ErrUnknownKey, err)
	}
	if err != nil {
		return ucp.MerchantKey{}, err
	}
	mk, err := ucp.ParseMerchantJWK(k.PublicJWK)
	if err != nil {
		return ucp.MerchantKey{}, fmt.Errorf("registry: stored merchant key %q: %w", kid, err)
	}
	mk.KID = kid
	return mk, nil
}

// lookupActive reads the org's ACTIVE key of kind with kid.
func lookupActive(ctx context.Context, r Reader, orgID string, kind Kind, kid string) (Key, error) {
	if err := checkKID(kid); err != nil {
		return Key{}, refuse(ErrKeyNotFound, "no %s key %q: %w: %w", kind, kid, grant.ErrUnknownKey, err)
	}
	k, err := r.RegisteredKeyOf(ctx, orgID, kind, kid)
	switch {
	case errors.Is(err, ErrKeyNotFound):
		return Key{}, refuse(ErrKeyNotFound, "no %s key %q: %w", kind, kid, grant.ErrUnknownKey)
	case err != nil:
		return Key{}, fmt.Errorf("registry: read %s key %q: %w", kind, kid, err)
	}
	if k.Status != StatusActive {
		return Key{}, refuse(ErrKeyNotFound, "%s key %q is %s: %w", kind, kid, k.Status, grant.ErrUnknownKey)
	}
	return k, nil
}

func checkKind(kind Kind) error {
	if kind != KindAgent && kind != KindProvider && kind != KindMerchant {
		return fmt.Errorf("registry: unknown key kind %q", kind)
	}
	return nil
}

func checkKID(kid string) error {
	switch {
	case kid == "":
		return refuse(ErrInvalidKID, "kid is empty")
	case len(kid) > MaxKIDLength:
		return refuse(ErrInvalidKID, "kid has %d bytes, at most %d allowed", len(kid), MaxKIDLength)
	case !ValidKID(kid):
		return refuse(ErrInvalidKID, "kid must be 1 to %d characters of [A-Za-z0-9._:-]", MaxKIDLength)
	}
	return nil
}

func checkIssuer(iss string) error {
	switch {
	case len(iss) > MaxIssuerLength:
		return refuse(ErrInvalidIssuer, "iss has %d bytes, at most %d allowed", len(iss), MaxIssuerLength)
	case !utf8.ValidString(iss):
		return refuse(ErrInvalidIssuer, "iss is not valid UTF-8")
	case strings.ContainsFunc(iss, unicode.IsControl):
		return refuse(ErrInvalidIssuer, "iss has a control character")
	}
	return nil
}

// parseJWK validates raw and returns the key and its stored public form.
func parseJWK(raw json.RawMessage, kid string) (ed25519.PublicKey, json.RawMessage, error) {
	pub, jwkKID, err := grant.ParsePublicJWK(raw)
	switch {
	case errors.Is(err, grant.ErrPrivateKeyMaterial):
		return nil, nil, refuse(ErrPrivateKeyMaterial, "%w", err)
	case errors.Is(err, grant.ErrWeakKey):
		return nil, nil, refuse(ErrWeakKey, "%w", err)
	case err != nil:
		return nil, nil, refuse(ErrInvalidKey, "%w", err)
	}
	if jwkKID != "" && jwkKID != kid {
		return nil, nil, refuse(ErrKIDMismatch, "the JWK's kid %q is not %q", jwkKID, kid)
	}
	// ParsePublicJWK refused repeated (and case-folded) member names and
	// checked alg and use when present, so the exact members are safe to
	// copy. Everything else is dropped.
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, nil, refuse(ErrInvalidKey, "%v", err)
	}
	out := publicJWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub), KID: jwkKID}
	for name, dst := range map[string]*string{"alg": &out.Alg, "use": &out.Use} {
		if v, ok := members[name]; ok {
			if err := json.Unmarshal(v, dst); err != nil {
				return nil, nil, refuse(ErrInvalidKey, "JWK member %q: %v", name, err)
			}
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, nil, fmt.Errorf("registry: encode JWK: %w", err)
	}
	return pub, b, nil
}

// parseMerchantJWK validates a merchant's EC JWK and returns its
// uncompressed point and its stored public form (ucp.MerchantKey.PublicJWK:
// public members only, re-encoded).
func parseMerchantJWK(raw json.RawMessage, kid string) ([]byte, json.RawMessage, error) {
	k, err := ucp.ParseMerchantJWK(raw)
	switch {
	case errors.Is(err, ucp.ErrPrivateKeyMaterial):
		return nil, nil, refuse(ErrPrivateKeyMaterial, "%w", err)
	case err != nil:
		return nil, nil, refuse(ErrInvalidKey, "%w", err)
	}
	if k.KID != "" && k.KID != kid {
		return nil, nil, refuse(ErrKIDMismatch, "the JWK's kid %q is not %q", k.KID, kid)
	}
	point, err := k.Public.Bytes()
	if err != nil {
		return nil, nil, refuse(ErrInvalidKey, "%v", err)
	}
	return point, k.PublicJWK(), nil
}
