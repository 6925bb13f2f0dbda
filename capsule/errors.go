package capsule

import (
	"errors"

	"github.com/clearancehq/clearance/internal/coded"
)

// Sentinel errors. Producer-side failures (Seal, Build, ComputeID) wrap one
// of the first three; envelope failures are *EnvelopeError values that wrap
// one of the Envelope sentinels, so errors.Is works on both.
var (
	// ErrInvalidCapsule: Seal refused a capsule that breaks a producer
	// invariant of the draft (it could not be verified ok).
	ErrInvalidCapsule = errors.New("capsule: invalid capsule")
	// ErrInvalidEvidence: Build refused inconsistent or incomplete evidence.
	ErrInvalidEvidence = errors.New("capsule: invalid evidence")
	// ErrUncomputableID: the Capsule ID cannot be computed (malformed JSON,
	// a float or unsafe integer, an unknown canonicalization_id).
	ErrUncomputableID = errors.New("capsule: capsule id cannot be computed")

	// ErrInvalidKey: Sign was given a private key that is not Ed25519.
	ErrInvalidKey = errors.New("capsule: invalid Ed25519 private key")

	ErrEnvelopeTooLarge         = errors.New("capsule: producer envelope too large")
	ErrEnvelopeMalformed        = errors.New("capsule: producer envelope malformed")
	ErrEnvelopeAlgorithm        = errors.New("capsule: producer envelope algorithm is not EdDSA")
	ErrEnvelopeContentType      = errors.New("capsule: producer envelope content type mismatch")
	ErrEnvelopeKID              = errors.New("capsule: producer envelope kid is not a usable raw Ed25519 public key")
	ErrEnvelopeProtectedHeaders = errors.New("capsule: producer envelope protected headers are not exactly alg, content type and kid")
	ErrEnvelopePayload          = errors.New("capsule: producer envelope payload is not the Capsule ID")
	ErrEnvelopeSignature        = errors.New("capsule: producer envelope signature invalid")
)

// Envelope finding codes, one per Envelope sentinel. They are the labels the
// draft's reference vectors use.
const (
	CodeEnvelopeTooLarge         = "envelope_too_large"
	CodeEnvelopeMalformed        = "envelope_malformed"
	CodeEnvelopeAlgorithm        = "envelope_algorithm_mismatch"
	CodeEnvelopeContentType      = "envelope_content_type_mismatch"
	CodeEnvelopeKID              = "envelope_kid_invalid"
	CodeEnvelopeProtectedHeaders = "envelope_protected_headers_invalid"
	CodeEnvelopePayload          = "envelope_payload_mismatch"
	CodeEnvelopeSignature        = "envelope_signature_invalid"
)

var envelopeCodes = map[error]string{
	ErrEnvelopeTooLarge:         CodeEnvelopeTooLarge,
	ErrEnvelopeMalformed:        CodeEnvelopeMalformed,
	ErrEnvelopeAlgorithm:        CodeEnvelopeAlgorithm,
	ErrEnvelopeContentType:      CodeEnvelopeContentType,
	ErrEnvelopeKID:              CodeEnvelopeKID,
	ErrEnvelopeProtectedHeaders: CodeEnvelopeProtectedHeaders,
	ErrEnvelopePayload:          CodeEnvelopePayload,
	ErrEnvelopeSignature:        CodeEnvelopeSignature,
}

// EnvelopeError is why VerifyEnvelope rejected an envelope: it wraps one of
// the Envelope sentinels (errors.Is) with what exactly was wrong, and Code
// gives its stable finding code, e.g. "envelope_signature_invalid". It is
// the one coded error shape of the domain packages.
type EnvelopeError = coded.Error

func envelopeErr(sentinel error, detail string) *EnvelopeError {
	return coded.New(envelopeCodes[sentinel], sentinel, "%s", detail)
}
