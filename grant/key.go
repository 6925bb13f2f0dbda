package grant

import (
	"crypto"
	"crypto/ed25519"
	_ "crypto/sha256" // crypto.SHA256 for JWK thumbprints
	"encoding/base64"
	"fmt"
	"io"

	jose "github.com/go-jose/go-jose/v4"
)

// Signer is what signs Clearance tokens: a key id and raw Ed25519 signatures.
// Key implements it; an HSM or KMS can too.
type Signer interface {
	KeyID() string
	Sign(msg []byte) ([]byte, error)
}

var _ Signer = Key{}

// Key is an Ed25519 signing key with its kid. Copies share nothing mutable:
// every accessor returns fresh slices. The zero Key is not usable.
//
// Key formats as "grant.Key{kid: …}" under every fmt verb, so logging a Key
// never prints its seed.
type Key struct {
	priv ed25519.PrivateKey // nil for the zero Key
	kid  string
}

// NewKey draws a 32-byte seed from rand and returns the key it determines.
func NewKey(rand io.Reader) (Key, error) {
	if rand == nil {
		return Key{}, fmt.Errorf("%w: nil random source", ErrInvalidKey)
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(rand, seed); err != nil {
		return Key{}, fmt.Errorf("grant: reading key seed: %w", err)
	}
	return KeyFromSeed(seed)
}

// KeyFromSeed returns the key determined by a 32-byte RFC 8032 seed. The same
// seed always gives the same key and kid, which makes examples and tests
// deterministic.
func KeyFromSeed(seed []byte) (Key, error) {
	if len(seed) != ed25519.SeedSize {
		return Key{}, fmt.Errorf("%w: seed is %d bytes, want %d", ErrInvalidKey, len(seed), ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	kid, err := Thumbprint(priv.Public().(ed25519.PublicKey))
	if err != nil {
		return Key{}, err
	}
	return Key{priv: priv, kid: kid}, nil
}

// Thumbprint returns the RFC 7638 JWK thumbprint (SHA-256, base64url without
// padding) of pub's OKP/Ed25519 JWK: the kid Clearance gives that key.
func Thumbprint(pub ed25519.PublicKey) (string, error) {
	if len(pub) != ed25519.PublicKeySize {
		return "", fmt.Errorf("%w: public key is %d bytes, want %d", ErrInvalidKey, len(pub), ed25519.PublicKeySize)
	}
	jwk := jose.JSONWebKey{Key: pub}
	sum, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	return base64.RawURLEncoding.EncodeToString(sum), nil
}

// KID returns the key's id, the RFC 7638 thumbprint of its public JWK; "" for
// the zero Key.
func (k Key) KID() string { return k.kid }

// KeyID is KID; it makes Key a Signer.
func (k Key) KeyID() string { return k.kid }

// IsZero reports whether k is the zero Key.
func (k Key) IsZero() bool { return k.priv == nil }

// Equal reports whether k and o are the same key.
func (k Key) Equal(o Key) bool {
	if k.priv == nil || o.priv == nil {
		return k.priv == nil && o.priv == nil
	}
	return k.priv.Equal(o.priv)
}

// Public returns a copy of the 32-byte public key; nil for the zero Key.
func (k Key) Public() ed25519.PublicKey {
	if k.priv == nil {
		return nil
	}
	return ed25519.PublicKey(append([]byte(nil), k.priv[ed25519.SeedSize:]...))
}

// Seed returns a copy of the 32-byte private seed; nil for the zero Key.
// Only key storage should call it.
func (k Key) Seed() []byte {
	if k.priv == nil {
		return nil
	}
	return k.priv.Seed()
}

// Sign returns the raw 64-byte Ed25519 signature of msg (pure Ed25519, no
// prehash). It fails only for the zero Key.
func (k Key) Sign(msg []byte) ([]byte, error) {
	if k.priv == nil {
		return nil, fmt.Errorf("%w: the zero Key cannot sign", ErrInvalidKey)
	}
	return ed25519.Sign(k.priv, msg), nil
}

// PublicJWK returns the public key as a JWK with kty OKP, crv Ed25519,
// alg EdDSA, use sig and the key's kid. It never holds private material.
// For the zero Key it returns the zero JSONWebKey.
func (k Key) PublicJWK() jose.JSONWebKey {
	if k.priv == nil {
		return jose.JSONWebKey{}
	}
	return jose.JSONWebKey{
		Key:       k.Public(),
		KeyID:     k.kid,
		Algorithm: string(jose.EdDSA),
		Use:       "sig",
	}
}

// String describes the key by its kid only.
func (k Key) String() string {
	if k.priv == nil {
		return "grant.Key{}"
	}
	return "grant.Key{kid: " + k.kid + "}"
}

// GoString is String, so %#v does not print the seed either.
func (k Key) GoString() string { return k.String() }

// Format prints String under every verb, so no verb prints the seed.
func (k Key) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, k.String()) }
