package core

import (
	"errors"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/capsule"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/internal/outbound"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/reader"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/ucp"
)

// CodePolicyInvalid is the code of a bundle that parses but is wrong (422).
const CodePolicyInvalid = "POLICY_INVALID"

// kindOf is THE table from a domain package's sentinel to the Kind an entry
// point answers with. Every sentinel declared in an errors.go of the tree
// has a row (TestEverySentinelHasARow). A sentinel whose meaning depends on
// the operation (a store not-found is a 404 for a read and a conflict for a
// grant) is mapped here to its usual Kind and re-coded by the call site.
var kindOf = []struct{ sentinel, kind error }{
	// Claim lifecycle: a refusal of the current state.
	{claim.ErrGrantNotFound, ErrConflict},
	{claim.ErrGrantExists, ErrConflict},
	{claim.ErrGrantExpired, ErrConflict},
	{claim.ErrReplay, ErrConflict},
	{claim.ErrNonceUsed, ErrConflict},
	{claim.ErrScopeBusy, ErrConflict},
	{claim.ErrScopeUnreconciled, ErrConflict},
	{claim.ErrBindingMismatch, ErrConflict},
	{claim.ErrNotClaimed, ErrConflict},
	{claim.ErrClaimTokenMismatch, ErrConflict},
	{claim.ErrAlreadyFinalized, ErrConflict},
	{claim.ErrLeaseExpired, ErrConflict},
	{claim.ErrScopeInvariant, ErrConflict},
	{claim.ErrNotIndeterminate, ErrConflict},
	{claim.ErrInvalidFinalization, ErrInvalidRequest},

	// Key registry.
	{registry.ErrKeyNotFound, ErrNotFound},
	{registry.ErrKIDInUse, ErrConflict},
	{registry.ErrInvalidKey, ErrInvalidRequest},
	{registry.ErrPrivateKeyMaterial, ErrInvalidRequest},
	{registry.ErrWeakKey, ErrInvalidRequest},
	{registry.ErrKIDMismatch, ErrInvalidRequest},
	{registry.ErrInvalidKID, ErrInvalidRequest},
	{registry.ErrInvalidIssuer, ErrInvalidRequest},

	// UCP checkouts: what the caller sent (an unknown merchant key is
	// answered as unverified terms, never as an error).
	{ucp.ErrUnsupportedRelease, ErrInvalidRequest},
	{ucp.ErrInvalidEnvelope, ErrInvalidRequest},

	// Reader verification: what the caller posted (an artifact that does
	// not verify is a report, never an error).
	{reader.ErrInvalidInput, ErrInvalidRequest},
	{reader.ErrShareLinkInvalid, ErrNotFound},
	{reader.ErrShareLinkUnsealed, ErrConflict},
	{ucp.ErrInvalidMandate, ErrInvalidRequest},
	{ucp.ErrInvalidTerms, ErrInvalidRequest},
	{ucp.ErrPrivateKeyMaterial, ErrInvalidRequest},
	{ucp.ErrInvalidKey, ErrInvalidRequest},
	{ucp.ErrUnknownKey, ErrNotFound},

	// Tokens a caller presents: a grant that does not verify is a refusal
	// of the request's state, never a server fault.
	{grant.ErrTokenMalformed, ErrConflict},
	{grant.ErrTokenAlgorithm, ErrConflict},
	{grant.ErrTokenType, ErrConflict},
	{grant.ErrTokenHeader, ErrConflict},
	{grant.ErrUnknownKey, ErrConflict},
	{grant.ErrTokenSignature, ErrConflict},
	{grant.ErrTokenAudience, ErrConflict},
	{grant.ErrTokenIssuer, ErrConflict},
	{grant.ErrTokenExpired, ErrConflict},
	{grant.ErrTokenNotYetValid, ErrConflict},
	{grant.ErrTokenClaims, ErrConflict},
	{grant.ErrInvalidKey, ErrInvalidRequest},
	{grant.ErrWeakKey, ErrInvalidRequest},
	{grant.ErrPrivateKeyMaterial, ErrInvalidRequest},

	// Policy.
	{policy.ErrInvalidBundle, ErrUnprocessable},
	{policy.ErrInvalidInput, ErrInvalidRequest},
	{policy.ErrEvaluation, ErrUnavailable},
	{policy.ErrUnknownVersion, ErrInvalidRequest},

	// Ledger: proofs out of range are the caller's; a broken chain or an
	// unreadable checkpoint is the store's (never authorizes).
	{ledger.ErrOutOfRange, ErrInvalidRequest},
	{ledger.ErrNotSealed, ErrInvalidRequest},
	{ledger.ErrCheckpointNotFound, ErrNotFound},
	{ledger.ErrCheckpointFormat, ErrInvalidRequest},
	{ledger.ErrCheckpointSignature, ErrInvalidRequest},
	{ledger.ErrOriginMismatch, ErrInvalidRequest},
	{ledger.ErrProofInvalid, ErrInvalidRequest},
	{ledger.ErrBrokenChain, ErrUnavailable},
	{ledger.ErrInvalidKey, ErrUnavailable},

	// Capsules are built from our own records: a failure is ours.
	{capsule.ErrInvalidCapsule, ErrUnavailable},
	{capsule.ErrInvalidEvidence, ErrUnavailable},
	{capsule.ErrUncomputableID, ErrUnavailable},
	{capsule.ErrInvalidKey, ErrUnavailable},
	{capsule.ErrEnvelopeTooLarge, ErrUnavailable},
	{capsule.ErrEnvelopeMalformed, ErrUnavailable},
	{capsule.ErrEnvelopeAlgorithm, ErrUnavailable},
	{capsule.ErrEnvelopeContentType, ErrUnavailable},
	{capsule.ErrEnvelopeKID, ErrUnavailable},
	{capsule.ErrEnvelopeProtectedHeaders, ErrUnavailable},
	{capsule.ErrEnvelopePayload, ErrUnavailable},
	{capsule.ErrEnvelopeSignature, ErrUnavailable},

	// Idempotency: a key names one request.
	{idempotency.ErrKeyReused, ErrConflict},
	{idempotency.ErrNotFound, ErrNotFound},

	// Artifacts: an argument no record may have.
	{artifact.ErrInvalid, ErrInvalidRequest},
	{artifact.ErrOrgMismatch, ErrInvalidRequest},

	// Jobs: a worker's refusals of the job's current state.
	{jobs.ErrInvalid, ErrInvalidRequest},
	{jobs.ErrOrgMismatch, ErrInvalidRequest},
	{jobs.ErrNotFound, ErrNotFound},
	{jobs.ErrNotDue, ErrConflict},
	{jobs.ErrNotOwner, ErrConflict},
	{jobs.ErrLeaseExpired, ErrConflict},

	// Outbound HTTP: a destination a caller registers is its input; an
	// answer that cannot be had is a dependency's failure.
	{outbound.ErrInvalidURL, ErrInvalidRequest},
	{outbound.ErrBlockedDestination, ErrInvalidRequest},
	{outbound.ErrRedirect, ErrUnavailable},
	{outbound.ErrResponseTooLarge, ErrUnavailable},
	{outbound.ErrUnreachable, ErrUnavailable},

	// Storage. A record a lookup did not find: the caller re-codes it when
	// its absence means something else (an unknown grant is a conflict).
	{store.ErrNotFound, ErrNotFound},
	{claim.ErrNotFound, ErrNotFound},
	{store.ErrCorrupt, ErrUnavailable},
	{store.ErrClosed, ErrUnavailable},
	{store.ErrWritesRefused, ErrUnavailable},
}

// KindOf returns the Kind of the first row whose sentinel err wraps, and
// whether there is one. An *Error, and a feature's kinded error, answers
// its own Kind.
func KindOf(err error) (error, bool) {
	var ee *Error
	if errors.As(err, &ee) {
		return ee.Kind, true
	}
	if k, ok := kindedOf(err); ok {
		return k.Kind(), true
	}
	for _, row := range kindOf {
		if errors.Is(err, row.sentinel) {
			return row.kind, true
		}
	}
	return nil, false
}

// coder is the coded error shape of the domain packages (internal/coded).
type coder interface{ Code() string }

// kinded is the coded error of a feature package that names its own Kind:
// the kernel cannot import features, so such a package maps its sentinels
// to Kinds in a kindOf table of its own errors.go (which
// TestEverySentinelHasARow reads) and its errors carry the result.
type kinded interface {
	Code() string
	Kind() error
}

// kindedOf finds a kinded error in err's chain whose Kind is one of the
// Kinds.
func kindedOf(err error) (kinded, bool) {
	var k kinded
	if !errors.As(err, &k) {
		return nil, false
	}
	switch k.Kind() {
	case ErrInvalidRequest, ErrUnauthenticated, ErrForbidden, ErrNotFound, ErrConflict, ErrUnprocessable, ErrUnavailable:
		return k, true
	}
	return nil, false
}

// Translate turns any error an entry point meets into the *Error it
// returns: an *Error passes through; a strict-JSON, policy input or bundle
// validation error keeps its code and fields; a coded domain error takes
// the Kind of its sentinel's row and its own code; a feature's kinded error
// keeps its Kind and code (also a 503: the dependency it names is not the
// store); anything else — above
// all a storage failure — is STORE_UNAVAILABLE (503), which never
// authorizes. op names the operation in the detail of a 503.
func Translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := translate(err); ok {
		return e
	}
	return Unavailable(op, err)
}

// TranslateInput is Translate for an error only the request can cause
// (decoding or validating what the caller sent): what the table does not
// know is 400 INVALID_REQUEST with the error's text.
func TranslateInput(err error) error {
	if err == nil {
		return nil
	}
	if e, ok := translate(err); ok {
		return e
	}
	return &Error{Kind: ErrInvalidRequest, Code: CodeInvalidRequest, Detail: err.Error(), Err: err}
}

func translate(err error) (*Error, bool) {
	var ee *Error
	if errors.As(err, &ee) {
		return ee, true
	}
	if k, ok := kindedOf(err); ok {
		return &Error{Kind: k.Kind(), Code: k.Code(), Detail: err.Error(), Err: err}, true
	}
	var se *strictjson.Error
	if errors.As(err, &se) {
		e := &Error{Kind: ErrInvalidRequest, Code: se.Code, Detail: se.Detail, Err: err}
		if se.Field != "" {
			e.Fields = []FieldError{{Field: se.Field, Message: se.Detail}}
		}
		return e, true
	}
	var ie *policy.InputError
	if errors.As(err, &ie) {
		return &Error{Kind: ErrInvalidRequest, Code: ie.Code, Detail: ie.Message,
			Fields: []FieldError{{Field: ie.Field, Message: ie.Message}}, Err: err}, true
	}
	var ve *policy.ValidationError
	if errors.As(err, &ve) {
		e := &Error{Kind: ErrUnprocessable, Code: CodePolicyInvalid, Detail: ve.Error(), Err: err}
		for _, p := range ve.Problems {
			msg := p.Message
			if p.RuleID != "" {
				msg = "rule " + p.RuleID + ": " + msg
			}
			e.Fields = append(e.Fields, FieldError{Field: p.Field, Message: msg})
		}
		return e, true
	}
	var c coder
	if errors.As(err, &c) {
		if k, ok := KindOf(err); ok && k != ErrUnavailable {
			return &Error{Kind: k, Code: c.Code(), Detail: err.Error(), Err: err}, true
		}
	}
	return nil, false
}
