package reader

import (
	"errors"

	"github.com/clearancehq/clearance/internal/coded"
)

// Sentinel errors. A refusal of the input wraps ErrInvalidInput under one
// of the Code constants; an artifact that is read but does not verify is
// never an error (it is a Report with Valid false).
var (
	// ErrInvalidInput: the request is malformed (an unknown kind, an
	// artifact that is none of the kinds, a malformed key or link).
	ErrInvalidInput = errors.New("reader: invalid input")
	// ErrShareLinkInvalid is what a ShareLinks answers for a link it does
	// not honour (malformed, tampered with, expired, revoked, of another
	// server or naming no dossier), whatever the reason.
	ErrShareLinkInvalid = errors.New("reader: share link not valid")
	// ErrShareLinkUnsealed is what a ShareLinks answers for a link it
	// honours whose ledger entry is too far past the latest signed
	// checkpoint to be checked now: the verdict is "not verified", with
	// ReasonEntryNotYetSealed, never a refusal of the request.
	ErrShareLinkUnsealed = errors.New("reader: share link's entry not yet sealed")
)

// Codes of refused input (400).
const (
	// CodeKindUnknown: kind is none of the Kinds.
	CodeKindUnknown = "READER_KIND_UNKNOWN"
	// CodeKindUndetected: no kind was given and the artifact is none of
	// the kinds this reader knows.
	CodeKindUndetected = "READER_KIND_UNDETECTED"
	// CodeArtifactRequired: not exactly one of artifact, artifact_base64
	// and share_link was given.
	CodeArtifactRequired = "READER_ARTIFACT_REQUIRED"
	// CodeArtifactInvalid: the artifact cannot be read as its kind's
	// container (artifact_base64 not base64, an artifact that is not a JSON
	// object, a share link that is not one, options of another kind).
	CodeArtifactInvalid = "READER_ARTIFACT_INVALID"
	// CodeArtifactTooLarge: a zipped pack unpacks beyond MaxUnpackedBytes.
	CodeArtifactTooLarge = "READER_ARTIFACT_TOO_LARGE"
	// CodeLedgerKeyInvalid: ledger_key is not a C2SP note verifier key.
	CodeLedgerKeyInvalid = "READER_LEDGER_KEY_INVALID"
)

// Error is a refused input: errors.Is finds ErrInvalidInput and Code
// names why.
type Error = coded.Error

func invalid(code, format string, args ...any) *Error {
	return coded.New(code, ErrInvalidInput, format, args...)
}
