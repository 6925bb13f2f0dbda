package grant

import "errors"

// Sentinel errors. Functions wrap them with detail; compare with errors.Is.
var (
	// ErrInvalidKey: a key is malformed (wrong type, curve or length, not a
	// canonical point on Ed25519, malformed JWK) or is the zero Key.
	ErrInvalidKey = errors.New("grant: invalid key")

	// ErrWeakKey: an Ed25519 public key is a low-order point.
	ErrWeakKey = errors.New("grant: weak key (low-order point)")

	// ErrPrivateKeyMaterial: a key offered as public carries private material.
	ErrPrivateKeyMaterial = errors.New("grant: private key material")
)
