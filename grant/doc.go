// Package grant holds Clearance's signing keys and, later, the tokens signed
// with them: execution grants, claim attestations and verification envelopes.
//
// # Keys
//
// A Key is an Ed25519 signing key. Its kid is the RFC 7638 JWK thumbprint
// (SHA-256, base64url without padding) of its public OKP/Ed25519 JWK, so a
// kid names exactly one public key and anyone holding the JWKS can recompute
// it. The zero Key is not a key: it has no kid and refuses to sign.
//
// A KeyRing is the active Key plus previous keys, each kept until KeepUntil:
// the moment the last grant it could have signed has expired and the longest
// claim lease after it has run out. Rings are immutable values; Rotate and
// Prune return new rings, so a *KeyRing may be shared between goroutines.
// JWKS publishes the active key and every previous key whose KeepUntil is
// still in the future, and never any private member.
//
// # Registered public keys
//
// ParsePublicJWK and ValidatePublicKey are the only doors through which
// foreign Ed25519 public keys (provider and agent keys) enter. A key that
// passes is exactly 32 bytes, a canonical encoding of a point on the curve,
// and not one of the eight low-order points (the identity among them, which
// "verifies" forged signatures). A JWK that carries any private member is
// refused with ErrPrivateKeyMaterial before anything else is looked at.
//
// # Purity
//
// The package does no file or network I/O and never reads the clock or
// crypto/rand: randomness is an io.Reader argument and time is a time.Time
// argument. Key files live in internal/keyfile.
package grant
