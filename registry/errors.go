package registry

import (
	"errors"
	"github.com/clearancehq/clearance/internal/coded"
)

// Sentinel errors. Every refusal of this package is a *Error wrapping one of
// them (and, for a refused JWK, the grant package's error too); compare with
// errors.Is and read the stable machine code with (*Error).Code.
var (
	// ErrKeyNotFound: no key with that kid, or (for Lookup) none ACTIVE.
	ErrKeyNotFound = errors.New("registry: key not found")
	// ErrInvalidKey: the JWK is not a well-formed Ed25519 public key.
	ErrInvalidKey = errors.New("registry: invalid public key")
	// ErrPrivateKeyMaterial: the JWK carries private key material.
	ErrPrivateKeyMaterial = errors.New("registry: private key material")
	// ErrWeakKey: the public key is a low-order point.
	ErrWeakKey = errors.New("registry: weak public key")
	// ErrKIDMismatch: the JWK's own kid differs from the registered kid.
	ErrKIDMismatch = errors.New("registry: kid mismatch")
	// ErrKIDInUse: an ACTIVE key already has the kid with another key or
	// issuer; revoke it first.
	ErrKIDInUse = errors.New("registry: kid in use")
	// ErrInvalidKID: the kid is not ValidKID (1 to 200 characters of
	// [A-Za-z0-9._:-]).
	ErrInvalidKID = errors.New("registry: invalid kid")
	// ErrInvalidIssuer: the iss is longer than MaxIssuerLength bytes, not
	// valid UTF-8 or has control characters.
	ErrInvalidIssuer = errors.New("registry: invalid iss")
)

// Stable machine codes of the sentinels.
const (
	CodeKeyNotFound        = "KEY_NOT_FOUND"
	CodeInvalidKey         = "INVALID_PUBLIC_KEY"
	CodePrivateKeyMaterial = "PRIVATE_KEY_MATERIAL"
	CodeWeakKey            = "WEAK_PUBLIC_KEY"
	CodeKIDMismatch        = "KID_MISMATCH"
	CodeKIDInUse           = "KID_IN_USE"
	CodeInvalidKID         = "INVALID_KID"
	CodeInvalidIssuer      = "INVALID_REQUEST" // the API's general code: iss has no code of its own
)

var codes = map[error]string{
	ErrKeyNotFound:        CodeKeyNotFound,
	ErrInvalidKey:         CodeInvalidKey,
	ErrPrivateKeyMaterial: CodePrivateKeyMaterial,
	ErrWeakKey:            CodeWeakKey,
	ErrKIDMismatch:        CodeKIDMismatch,
	ErrKIDInUse:           CodeKIDInUse,
	ErrInvalidKID:         CodeInvalidKID,
	ErrInvalidIssuer:      CodeInvalidIssuer,
}

// Error is a refusal: Err wraps one sentinel with detail; Code() is its
// stable machine code.
type Error = coded.Error

// refuse wraps sentinel with detail formatted from format and args (which may
// contain more %w verbs for causes).
func refuse(sentinel error, format string, args ...any) *Error {
	return coded.New(codes[sentinel], sentinel, format, args...)
}
