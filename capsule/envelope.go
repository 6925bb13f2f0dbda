package capsule

import (
	"bytes"
	"crypto/ed25519"
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"github.com/veraison/go-cose"

	"github.com/clearancehq/clearance/grant"
)

// MaxEnvelopeSize bounds the envelopes VerifyEnvelope reads. A conforming
// envelope is 181 bytes.
const MaxEnvelopeSize = 4096

// COSE header labels of the Producer Envelope profile (draft §3.1).
const (
	labelAlg         = 1
	labelContentType = 3
	labelKID         = 4
)

var (
	// outerMode reads the tagged COSE_Sign1: definite lengths only, no
	// duplicate map keys, integers as int64, nothing after the value.
	outerMode = mustDecMode(cbor.DecOptions{
		DupMapKey:   cbor.DupMapKeyEnforcedAPF,
		IndefLength: cbor.IndefLengthForbidden,
		IntDec:      cbor.IntDecConvertSigned,
		TagsMd:      cbor.TagsAllowed,
	})
	// innerMode reads everything inside tag 18, where no tag is allowed.
	innerMode = mustDecMode(cbor.DecOptions{
		DupMapKey:   cbor.DupMapKeyEnforcedAPF,
		IndefLength: cbor.IndefLengthForbidden,
		IntDec:      cbor.IntDecConvertSigned,
		TagsMd:      cbor.TagsForbidden,
	})
)

func mustDecMode(o cbor.DecOptions) cbor.DecMode {
	m, err := o.DecMode()
	if err != nil {
		panic(err) // static options; a failure is a programming error
	}
	return m
}

// Sign creates a Producer Envelope over a Capsule ID (draft §3.1): a tagged
// COSE_Sign1 (tag 18) whose protected header is exactly {1: -8 (EdDSA),
// 3: "application/agent-action-capsule-id", 4: the raw 32-byte public key},
// whose unprotected header is empty and whose attached payload is the raw
// 32-byte ID. Ed25519 is deterministic: the same ID and key always give the
// same bytes. The envelope authenticates the key's commitment to the ID
// only; it neither changes the capsule nor says the key is authorized.
func Sign(id ID, key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrInvalidKey, len(key), ed25519.PrivateKeySize)
	}
	pub := ed25519.NewKeyFromSeed(key.Seed()).Public().(ed25519.PublicKey)
	if !bytes.Equal(pub, key[ed25519.SeedSize:]) {
		return nil, fmt.Errorf("%w: public half does not match the seed", ErrInvalidKey)
	}
	signer, err := cose.NewSigner(cose.AlgorithmEdDSA, key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	msg := cose.Sign1Message{
		Headers: cose.Headers{
			Protected: cose.ProtectedHeader{
				cose.HeaderLabelAlgorithm:   cose.AlgorithmEdDSA,
				cose.HeaderLabelContentType: IDMediaType,
				cose.HeaderLabelKeyID:       []byte(pub),
			},
			Unprotected: cose.UnprotectedHeader{},
		},
		Payload: bytes.Clone(id[:]),
	}
	// Ed25519 draws no randomness, so no reader is needed.
	if err := msg.Sign(nil, nil, signer); err != nil {
		return nil, fmt.Errorf("capsule: sign envelope: %w", err)
	}
	return msg.MarshalCBOR()
}

// VerifyEnvelope verifies one Producer Envelope against a Capsule ID (draft
// §6, envelope steps 1 to 4) and returns the authenticated public key, the
// raw key carried in kid. Whether that key may speak for the capsule's
// operator is the caller's policy (draft §3.2).
//
// Checks, in this order, each failing with an *EnvelopeError wrapping its
// sentinel: size (ErrEnvelopeTooLarge); strict CBOR structure
// (ErrEnvelopeMalformed): exactly one tag-18 four-element array with nothing
// after it, a non-empty protected bstr holding a map with integer labels
// only, no duplicate labels, no indefinite lengths, no nested tags, no
// reserved or malformed simple values, an empty unprotected map, an attached
// bstr payload and a bstr signature; alg exactly the integer -8
// (ErrEnvelopeAlgorithm; a float -8.0 is not -8); content type exactly
// "application/agent-action-capsule-id", no normalization
// (ErrEnvelopeContentType); kid a 32-byte Ed25519 key that is not a
// low-order point (ErrEnvelopeKID); no protected label beyond 1, 3 and 4
// (ErrEnvelopeProtectedHeaders); payload equal to the raw ID
// (ErrEnvelopePayload); a 64-byte signature that verifies over the
// Signature1 Sig_structure with empty external AAD (ErrEnvelopeSignature).
// It never panics.
func VerifyEnvelope(envelope []byte, id ID) (pub ed25519.PublicKey, err error) {
	defer func() {
		if p := recover(); p != nil {
			pub, err = nil, envelopeErr(ErrEnvelopeMalformed, fmt.Sprintf("unexpected input: %v", p))
		}
	}()
	if len(envelope) > MaxEnvelopeSize {
		return nil, envelopeErr(ErrEnvelopeTooLarge, fmt.Sprintf("%d bytes; at most %d", len(envelope), MaxEnvelopeSize))
	}
	e, perr := parseEnvelope(envelope)
	if perr != nil {
		return nil, perr
	}
	if alg, ok := e.protected[labelAlg].(int64); !ok || alg != int64(cose.AlgorithmEdDSA) {
		return nil, envelopeErr(ErrEnvelopeAlgorithm, fmt.Sprintf("protected alg (label 1) must be the integer -8 (EdDSA); got %v (%T)", e.protected[labelAlg], e.protected[labelAlg]))
	}
	if ct, ok := e.protected[labelContentType].(string); !ok || ct != IDMediaType {
		return nil, envelopeErr(ErrEnvelopeContentType, fmt.Sprintf("protected content type (label 3) must be %q; got %q", IDMediaType, e.protected[labelContentType]))
	}
	kid, ok := e.protected[labelKID].([]byte)
	if !ok || len(kid) != ed25519.PublicKeySize {
		return nil, envelopeErr(ErrEnvelopeKID, "protected kid (label 4) must be the raw 32-byte Ed25519 public key")
	}
	if err := grant.ValidatePublicKey(kid); err != nil {
		return nil, envelopeErr(ErrEnvelopeKID, err.Error())
	}
	if len(e.protected) != 3 {
		return nil, envelopeErr(ErrEnvelopeProtectedHeaders, fmt.Sprintf("protected header has %d entries; it must hold exactly alg, content type and kid", len(e.protected)))
	}
	if !bytes.Equal(e.payload, id[:]) {
		return nil, envelopeErr(ErrEnvelopePayload, "attached payload is not the raw 32-byte Capsule ID "+id.String())
	}
	if len(e.signature) != ed25519.SignatureSize {
		return nil, envelopeErr(ErrEnvelopeSignature, fmt.Sprintf("signature is %d bytes; Ed25519 signatures are 64", len(e.signature)))
	}
	var msg cose.Sign1Message
	if err := msg.UnmarshalCBOR(envelope); err != nil {
		return nil, envelopeErr(ErrEnvelopeMalformed, err.Error())
	}
	verifier, err := cose.NewVerifier(cose.AlgorithmEdDSA, ed25519.PublicKey(kid))
	if err != nil {
		return nil, envelopeErr(ErrEnvelopeKID, err.Error())
	}
	if err := msg.Verify(nil, verifier); err != nil {
		return nil, envelopeErr(ErrEnvelopeSignature, err.Error())
	}
	return ed25519.PublicKey(bytes.Clone(kid)), nil
}

type envelopeParts struct {
	protected map[int64]any
	payload   []byte
	signature []byte
}

// parseEnvelope does the structural part of envelope step 1.
func parseEnvelope(b []byte) (envelopeParts, *EnvelopeError) {
	malformed := func(format string, args ...any) (envelopeParts, *EnvelopeError) {
		return envelopeParts{}, envelopeErr(ErrEnvelopeMalformed, fmt.Sprintf(format, args...))
	}
	var tag cbor.RawTag
	if err := outerMode.Unmarshal(b, &tag); err != nil {
		return malformed("not one tagged CBOR value: %v", err)
	}
	if tag.Number != cose.CBORTagSign1Message {
		return malformed("tag %d; a Producer Envelope is a tagged COSE_Sign1 (tag 18)", tag.Number)
	}
	if majorType(tag.Content) != 4 {
		return malformed("tag 18 content is not an array")
	}
	var items []cbor.RawMessage
	if err := innerMode.Unmarshal(tag.Content, &items); err != nil {
		return malformed("COSE_Sign1 array: %v", err)
	}
	if len(items) != 4 {
		return malformed("COSE_Sign1 has %d elements, want 4", len(items))
	}
	protectedBytes, ok := bstr(items[0])
	if !ok || len(protectedBytes) == 0 {
		return malformed("protected header must be a non-empty byte string")
	}
	if majorType(protectedBytes) != 5 {
		return malformed("protected header does not hold a map")
	}
	var raw map[any]any
	if err := innerMode.Unmarshal(protectedBytes, &raw); err != nil {
		return malformed("protected header map: %v", err)
	}
	protected := make(map[int64]any, len(raw))
	for k, v := range raw {
		label, ok := k.(int64)
		if !ok {
			return malformed("protected header label %v is a %T; labels must be integers", k, k)
		}
		protected[label] = v
	}
	if majorType(items[1]) != 5 {
		return malformed("unprotected header is not a map")
	}
	var unprotected map[any]any
	if err := innerMode.Unmarshal(items[1], &unprotected); err != nil {
		return malformed("unprotected header map: %v", err)
	}
	if len(unprotected) != 0 {
		return malformed("unprotected header has %d entries; a bare Producer Envelope's is empty", len(unprotected))
	}
	payload, ok := bstr(items[2])
	if !ok {
		return malformed("payload must be an attached byte string")
	}
	signature, ok := bstr(items[3])
	if !ok {
		return malformed("signature must be a byte string")
	}
	return envelopeParts{protected: protected, payload: payload, signature: signature}, nil
}

// bstr decodes a CBOR byte string (major type 2), and nothing else.
func bstr(raw cbor.RawMessage) ([]byte, bool) {
	if majorType(raw) != 2 {
		return nil, false
	}
	var b []byte
	if err := innerMode.Unmarshal(raw, &b); err != nil {
		return nil, false
	}
	return b, true
}

func majorType(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0] >> 5)
}
