package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/store"
)

// Kinds: sentinels for identity. server/errors.go maps each to one HTTP
// status; an *Error's Code is the stable machine code on the wire.
var (
	ErrInvalidRequest  = errors.New("invalid request")            // 400
	ErrUnauthenticated = errors.New("unauthenticated")            // 401
	ErrForbidden       = errors.New("forbidden")                  // 403
	ErrNotFound        = errors.New("not found")                  // 404
	ErrConflict        = errors.New("conflict")                   // 409
	ErrUnprocessable   = errors.New("semantically invalid input") // 422
	// ErrTooManyRequests: a limit the store keeps (so every server
	// applies it) refused the request; Error.RetryAfter says when to retry.
	ErrTooManyRequests = errors.New("too many requests")      // 429
	ErrUnavailable     = errors.New("dependency unavailable") // 503
)

// Codes the kernel itself reports; features declare their own.
const (
	CodeInvalidRequest      = "INVALID_REQUEST"
	CodeUnauthenticated     = "UNAUTHENTICATED"
	CodeInsufficientScope   = "INSUFFICIENT_SCOPE"
	CodeOrgMismatch         = "ORG_MISMATCH"
	CodePlatformKeyRequired = "PLATFORM_KEY_REQUIRED"
	CodeOrgRequired         = "ORG_ID_REQUIRED"
	CodeNotFound            = "NOT_FOUND"
	CodeOrgNotFound         = "ORG_NOT_FOUND"
	CodeDossierNotFound     = "DOSSIER_NOT_FOUND"
	// CodeLedgerBroken: an org's hash chain does not verify, or an entry is
	// missing (409).
	CodeLedgerBroken = "LEDGER_BROKEN"
	// CodeStaleAuthorization: the org's active policy changed, or no longer
	// allows the action, between a decision and its grant's issue or claim
	// (409): send the request again.
	CodeStaleAuthorization    = "STALE_AUTHORIZATION"
	CodeIdempotencyKeyReused  = idempotency.CodeKeyReused
	CodeInvalidIdempotencyKey = "INVALID_IDEMPOTENCY_KEY"
	CodeInvalidCorrelationID  = "INVALID_CORRELATION_ID"
	CodeInvalidRequestID      = "INVALID_REQUEST_ID"
	CodeStoreUnavailable      = "STORE_UNAVAILABLE"
	// CodeSecretsNotConfigured: a feature must seal a secret at rest (or
	// open one) and the engine has no secrets key (503).
	CodeSecretsNotConfigured = "SECRETS_NOT_CONFIGURED"
	// CodePersonalDataUnreadable: personal data sealed under a data
	// subject's key that exists does not open (503): tampering, another
	// secrets key, or no data-protection feature to open it.
	CodePersonalDataUnreadable = "PERSONAL_DATA_UNREADABLE"
	// A header and its body member disagree; a path segment and its body
	// member disagree; a member the request requires is absent.
	CodeHeaderBodyMismatch = "HEADER_BODY_MISMATCH"
	CodePathBodyMismatch   = "PATH_BODY_MISMATCH"
	CodeMissingField       = "MISSING_FIELD"
	// CodeSigningNotConfigured: no grant key ring (503).
	CodeSigningNotConfigured = "SIGNING_NOT_CONFIGURED"
	// CodeSigningKeyRevoked: the active grant key is revoked in the store
	// (503): nothing is signed until the key file is rotated.
	CodeSigningKeyRevoked = "SIGNING_KEY_REVOKED"
)

// FieldError names one offending field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is every error an entry point returns on purpose.
type Error struct {
	Kind   error  // one of the Kinds above
	Code   string // stable UPPER_SNAKE code
	Detail string
	Fields []FieldError
	Err    error // cause, if any
	// RetryAfter is when a refusal that resolves by itself may be retried
	// (0: not said).
	RetryAfter time.Duration
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

// New returns an *Error of kind with code and formatted detail.
func New(kind error, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Invalid is a 400-kind error naming field ("" for none).
func Invalid(code, field, format string, args ...any) *Error {
	e := New(ErrInvalidRequest, code, format, args...)
	if field != "" {
		e.Fields = []FieldError{{Field: field, Message: e.Detail}}
	}
	return e
}

// Unavailable wraps a storage failure: it never authorizes anything. A
// store that refuses writes because its storage fails says so (the reason
// is in GET /v1/health); the code stays STORE_UNAVAILABLE, which clients
// already retry.
func Unavailable(op string, err error) *Error {
	detail := op + " failed: the store is unavailable"
	if errors.Is(err, store.ErrWritesRefused) {
		detail = op + " failed: the store refuses writes while its storage fails (see GET /v1/health)"
	}
	return &Error{Kind: ErrUnavailable, Code: CodeStoreUnavailable, Detail: detail, Err: err}
}

// IsNotFound reports whether err is the store's not-found.
func IsNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
