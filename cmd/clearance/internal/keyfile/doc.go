// Package keyfile keeps Clearance's signing keys and secrets on disk.
//
// # Layout
//
// A data dir holds one ring file per named key, <dir>/keys/<name>.json
// (names such as "grant" or "ledger": lower-case letters, digits, '-' and
// '_'). The keys directory is created 0700 and each file 0600. A ring file is
//
//	{
//	  "version": 1,
//	  "active":   {"kid": "…", "seed": "<base64url>", "created_at": "<RFC 3339>"},
//	  "previous": [{"kid": "…", "seed": "…", "created_at": "…",
//	                "retired_at": "…", "keep_until": "…"}],
//	  "revoked":  [{"kid": "…", "revoked_at": "…"}]
//	}
//
// where seed is the 32-byte Ed25519 seed in unpadded base64url and kid its
// RFC 7638 thumbprint, checked on every load; "revoked" (kids only, no
// seeds) is present only once a key was revoked. LoadOrCreate makes the file
// on first use and returns the active key; LoadRing reads the whole ring and
// Rotate replaces the active key, keeping the old one until now + drain.
//
// The same ring format can live anywhere, as an operator's key file shared
// by several servers: Create makes one (never over an existing file),
// ReadRing reads it (or a single key, as a ring of one), RotateFile rotates
// it and RevokeFile revokes a leaked key (a fresh key first if it is the
// active one). LoadFile reads an operator-provided key's active key: a ring
// file, a single {"kid"?, "seed", "created_at"?} object, or a PEM PKCS#8
// Ed25519 private key ("BEGIN PRIVATE KEY", unencrypted). WriteSecret and
// ReadSecret keep a one-line secret such as the platform API key.
//
// # Guarantees
//
// Writes are atomic and durable: a temporary file in the same directory is
// written, fsynced and renamed into place (or hard-linked, for a file that
// must not already exist, so two processes creating the same key agree on
// one), and then the directory is fsynced. A crash leaves the old file or
// the new one, never a torn one.
//
// Reads are strict. A file readable or writable by group or others (any of
// the 0077 bits), a keys directory writable by group or others, or a file
// that is not a regular file is refused with ErrInsecurePermissions rather
// than used with a warning: a key others could read is already leaked, and
// one they could write is not ours. Fix with chmod 600 (or, for a
// Kubernetes Secret, defaultMode 0400). Permission bits are not checked on
// Windows. A malformed file, unknown member, wrong-length seed or kid that
// does not match the seed is refused with ErrCorrupt.
//
// Rotate, RotateFile and RevokeFile are a read-modify-write of one file; do
// not change the same ring from two processes at once.
package keyfile
