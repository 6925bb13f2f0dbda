package clearance

import (
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/evidence"
	"github.com/clearancehq/clearance/execution"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policies"
)

// Error kinds: sentinels for identity. server/errors.go maps each to one
// HTTP status; the *Error's Code is the stable machine code on the wire.
var (
	ErrInvalidRequest  = core.ErrInvalidRequest  // 400
	ErrUnauthenticated = core.ErrUnauthenticated // 401
	ErrForbidden       = core.ErrForbidden       // 403
	ErrNotFound        = core.ErrNotFound        // 404
	ErrConflict        = core.ErrConflict        // 409
	ErrUnprocessable   = core.ErrUnprocessable   // 422
	ErrTooManyRequests = core.ErrTooManyRequests // 429
	ErrUnavailable     = core.ErrUnavailable     // 503
)

// Stable error codes of the kernel.
const (
	CodeInvalidRequest        = core.CodeInvalidRequest
	CodeUnauthenticated       = core.CodeUnauthenticated
	CodeInsufficientScope     = core.CodeInsufficientScope
	CodeOrgMismatch           = core.CodeOrgMismatch
	CodePlatformKeyRequired   = core.CodePlatformKeyRequired
	CodeOrgRequired           = core.CodeOrgRequired
	CodeNotFound              = core.CodeNotFound
	CodeOrgNotFound           = core.CodeOrgNotFound
	CodeIdempotencyKeyReused  = core.CodeIdempotencyKeyReused
	CodeInvalidIdempotencyKey = core.CodeInvalidIdempotencyKey
	CodeInvalidCorrelationID  = core.CodeInvalidCorrelationID
	CodeInvalidRequestID      = core.CodeInvalidRequestID
	CodeStoreUnavailable      = core.CodeStoreUnavailable
	CodeSigningNotConfigured  = core.CodeSigningNotConfigured
	CodeSigningKeyRevoked     = core.CodeSigningKeyRevoked
	CodePolicyInvalid         = core.CodePolicyInvalid
)

// Stable codes of bundles and their activation.
const (
	CodeDossierNotFound       = core.CodeDossierNotFound
	CodePolicyNotFound        = policies.CodePolicyNotFound
	CodePolicyVersionConflict = policies.CodePolicyVersionConflict
	CodePolicyPinUnknown      = policies.CodePolicyPinUnknown
	// CodeActiveVersionMismatch: an activation's expected_active_version is
	// not the org's active version (409; nothing changed).
	CodeActiveVersionMismatch = policies.CodeActiveVersionMismatch
)

// Stable codes of decision chains, overrides and execution dispatches.
const (
	CodeChainNotFound         = evidence.CodeChainNotFound
	CodeInvalidParentDecision = decide.CodeInvalidParentDecision
	CodeParentDecisionUnknown = decide.CodeParentDecisionUnknown
	CodeInvalidOverride       = evidence.CodeInvalidOverride
	CodeOverrideNotApplicable = evidence.CodeOverrideNotApplicable
	CodeInvalidDispatch       = execution.CodeInvalidDispatch
)

// FieldError names one offending field.
type FieldError = core.FieldError

// Error is every error the Engine returns to callers on purpose.
type Error = core.Error

func newError(kind error, code, format string, args ...any) *Error {
	return core.New(kind, code, format, args...)
}

func invalid(code, field, format string, args ...any) *Error {
	return core.Invalid(code, field, format, args...)
}

// unavailable wraps a storage failure: it never authorizes anything.
func unavailable(op string, err error) *Error { return core.Unavailable(op, err) }

// asEngineError passes *Error through and turns anything else into the
// kernel's answer for it (core.Translate).
func asEngineError(op string, err error) error { return core.Translate(op, err) }
