package keyfile

import "errors"

// Sentinel errors; functions wrap them with the path and the reason.
var (
	// ErrInsecurePermissions: a key or secret file, or the keys directory,
	// is accessible to group or others, or is not a regular file.
	ErrInsecurePermissions = errors.New("keyfile: insecure permissions")

	// ErrCorrupt: a key or secret file cannot be parsed or is inconsistent.
	ErrCorrupt = errors.New("keyfile: malformed key file")

	// ErrInvalidSecret: WriteSecret was given an empty, oversized or
	// non-printable secret.
	ErrInvalidSecret = errors.New("keyfile: invalid secret")

	// ErrInvalidName: a key name is not [a-z0-9][a-z0-9_-]{0,63}.
	ErrInvalidName = errors.New("keyfile: invalid key name")

	// ErrNotRing: rotation or revocation was asked of a file holding a
	// single key (PEM or a bare key object) rather than a ring.
	ErrNotRing = errors.New("keyfile: not a key ring file")

	// ErrUnknownKID: RevokeFile was given a kid the ring does not hold.
	ErrUnknownKID = errors.New("keyfile: no such key in the ring")
)
