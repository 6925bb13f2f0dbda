package clearance

import (
	"errors"
	"fmt"
)

// Error kinds: sentinels for identity. server/errors.go maps each to one
// HTTP status; the *Error's Code is the stable machine code on the wire.
var (
	ErrInvalidRequest  = errors.New("invalid request")            // 400
	ErrUnauthenticated = errors.New("unauthenticated")            // 401
	ErrForbidden       = errors.New("forbidden")                  // 403
	ErrNotFound        = errors.New("not found")                  // 404
	ErrConflict        = errors.New("conflict")                   // 409
	ErrUnprocessable   = errors.New("semantically invalid input") // 422
	ErrUnavailable     = errors.New("dependency unavailable")     // 503
)

// Stable error codes.
const (
	CodeInvalidRequest        = "INVALID_REQUEST"
	CodeUnauthenticated       = "UNAUTHENTICATED"
	CodeInsufficientScope     = "INSUFFICIENT_SCOPE"
	CodeOrgMismatch           = "ORG_MISMATCH"
	CodePlatformKeyRequired   = "PLATFORM_KEY_REQUIRED"
	CodeOrgRequired           = "ORG_ID_REQUIRED"
	CodeNotFound              = "NOT_FOUND"
	CodeOrgNotFound           = "ORG_NOT_FOUND"
	CodeDossierNotFound       = "DOSSIER_NOT_FOUND"
	CodePolicyNotFound        = "POLICY_VERSION_NOT_FOUND"
	CodeIdempotencyKeyReused  = "IDEMPOTENCY_KEY_REUSED"
	CodeInvalidIdempotencyKey = "INVALID_IDEMPOTENCY_KEY"
	CodeInvalidCorrelationID  = "INVALID_CORRELATION_ID"
	CodePolicyVersionConflict = "POLICY_VERSION_CONFLICT"
	CodePolicyPinUnknown      = "POLICY_VERSION_UNKNOWN"
	CodePolicyInvalid         = "POLICY_INVALID"
	// CodeActiveVersionMismatch: an activation's expected_active_version is
	// not the org's active version (409; nothing changed).
	CodeActiveVersionMismatch = "ACTIVE_VERSION_MISMATCH"
	CodeStoreUnavailable      = "STORE_UNAVAILABLE"
)

// Stable codes of decision chains, overrides and execution dispatches.
const (
	CodeChainNotFound         = "CHAIN_NOT_FOUND"
	CodeInvalidParentDecision = "INVALID_PARENT_DECISION"
	CodeParentDecisionUnknown = "PARENT_DECISION_UNKNOWN"
	CodeInvalidOverride       = "INVALID_OVERRIDE"
	CodeOverrideNotApplicable = "OVERRIDE_NOT_APPLICABLE"
	CodeInvalidDispatch       = "INVALID_DISPATCH"
)

// FieldError names one offending field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is every error the Engine returns to callers on purpose.
type Error struct {
	Kind   error  // one of the sentinels above
	Code   string // stable UPPER_SNAKE code
	Detail string
	Fields []FieldError
	Err    error // cause, if any
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Detail, e.Err)
	}
	return e.Code + ": " + e.Detail
}

// Unwrap exposes both the kind (for errors.Is) and the cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

func newError(kind error, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Detail: fmt.Sprintf(format, args...)}
}

func invalid(code, field, format string, args ...any) *Error {
	e := newError(ErrInvalidRequest, code, format, args...)
	if field != "" {
		e.Fields = []FieldError{{Field: field, Message: e.Detail}}
	}
	return e
}

// unavailable wraps a storage failure: it never authorizes anything.
func unavailable(op string, err error) *Error {
	return &Error{Kind: ErrUnavailable, Code: CodeStoreUnavailable, Detail: op + " failed: the store is unavailable", Err: err}
}
