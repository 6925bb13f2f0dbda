package ledger

import "errors"

// Sentinel errors. Functions wrap them with the details; test with errors.Is.
var (
	// ErrBrokenChain: Seal found entries that do not form one valid chain
	// after the sealed tree (a seq gap, a changed entry, a broken link,
	// another org's entry, or a ledger shorter than its latest checkpoint).
	// Nothing is signed over a broken chain.
	ErrBrokenChain = errors.New("ledger: chain broken")

	// ErrNotSealed: a proof was asked for a tree size beyond the org's
	// latest checkpoint. Seal first.
	ErrNotSealed = errors.New("ledger: tree size not sealed")

	// ErrOutOfRange: a seq or tree size outside the tree a proof is about
	// (seq 0, seq beyond the size, an old size beyond the new one).
	ErrOutOfRange = errors.New("ledger: seq or tree size out of range")

	// ErrCheckpointNotFound: no checkpoint of that tree size is stored.
	// Backends wrap it together with their own not-found error.
	ErrCheckpointNotFound = errors.New("ledger: checkpoint not found")

	// ErrCheckpointSignature: a signed checkpoint does not carry a valid
	// signature by the ledger key.
	ErrCheckpointSignature = errors.New("ledger: checkpoint signature invalid")

	// ErrCheckpointFormat: a note is malformed, or its text is not a C2SP
	// tlog-checkpoint body.
	ErrCheckpointFormat = errors.New("ledger: malformed checkpoint")

	// ErrOriginMismatch: a checkpoint names another log (origin line).
	ErrOriginMismatch = errors.New("ledger: checkpoint origin mismatch")

	// ErrProofInvalid: an inclusion or consistency proof does not verify.
	ErrProofInvalid = errors.New("ledger: proof does not verify")

	// ErrInvalidKey: a ledger signing or verifier key is malformed, has an
	// invalid name, or is a weak (low-order) Ed25519 public key.
	ErrInvalidKey = errors.New("ledger: invalid key")
)
