package approval

import (
	"errors"
	"fmt"

	"github.com/clearancehq/clearance/internal/core"
)

// Sentinel errors. Every error the package returns is (or wraps) an *Error
// that wraps exactly one of them (and, for ErrUnavailable and ErrEvidenceInvalid,
// often a cause from internal/outbound or grant); compare with errors.Is
// and read the stable code with (*Error).Code.
var (
	// ErrNotConfigured: the Directory has no approval service for the org.
	ErrNotConfigured = errors.New("approval: no approval service configured")

	// ErrInvalidEndpoint: an Endpoint is malformed (base URL, credential,
	// issuer) or its base URL is refused by the outbound client's rules
	// (TLS required, blocked destination).
	ErrInvalidEndpoint = errors.New("approval: invalid approval-service endpoint")

	// ErrInvalidRequest: the caller's input is malformed (an OpenRequest,
	// a request id, a Binding); nothing was sent.
	ErrInvalidRequest = errors.New("approval: invalid input")

	// ErrUnavailable: no usable answer from the approval service: it was
	// unreachable, timed out, redirected, answered 5xx or 429, refused the
	// credential, or sent an answer too large, not JSON, or without the
	// members and formats the protocol requires; also an unknown signing
	// key whose key set was fetched too recently to fetch again. Nothing
	// can be concluded; the caller answers 503 and may try again.
	ErrUnavailable = errors.New("approval: approval service unavailable")

	// ErrRejected: the approval service refused the call with a 4xx other
	// than 401, 403, 404, 409 and 429 (invalid input, above all).
	ErrRejected = errors.New("approval: refused by the approval service")

	// ErrNotFound: the approval service knows no such request for the
	// credential's org (404).
	ErrNotFound = errors.New("approval: approval request not found")

	// ErrConflict: the escalation already opened a request with another
	// body (409); Open is idempotent only on the same body.
	ErrConflict = errors.New("approval: approval request conflicts with an earlier one")

	// ErrEvidenceInvalid: the service's answer or a receipt contradicts
	// what was asked or what it must prove: another org, intent or
	// request, a receipt missing, forged, of another request or with the
	// wrong decision, a presented receipt that is not the service's. It
	// never authorizes; the caller answers 409.
	ErrEvidenceInvalid = errors.New("approval: approval evidence invalid")

	// ErrNotApproved: the request is DENIED, EXPIRED, CANCELLED or REVOKED;
	// (*Error).Status says which. The caller answers 409.
	ErrNotApproved = errors.New("approval: not approved")
)

// Stable codes of the sentinels.
const (
	CodeNotConfigured   = "APPROVAL_NOT_CONFIGURED"
	CodeInvalidEndpoint = "APPROVAL_ENDPOINT_INVALID"
	CodeInvalidRequest  = "APPROVAL_INPUT_INVALID"
	CodeUnavailable     = "APPROVAL_SERVICE_UNAVAILABLE"
	CodeRejected        = "APPROVAL_SERVICE_REJECTED"
	CodeNotFound        = "APPROVAL_REQUEST_NOT_FOUND"
	CodeConflict        = "APPROVAL_REQUEST_CONFLICT"
	CodeEvidenceInvalid = "APPROVAL_EVIDENCE_INVALID"
	CodeNotApproved     = "APPROVAL_NOT_APPROVED"
)

var codes = map[error]string{
	ErrNotConfigured:   CodeNotConfigured,
	ErrInvalidEndpoint: CodeInvalidEndpoint,
	ErrInvalidRequest:  CodeInvalidRequest,
	ErrUnavailable:     CodeUnavailable,
	ErrRejected:        CodeRejected,
	ErrNotFound:        CodeNotFound,
	ErrConflict:        CodeConflict,
	ErrEvidenceInvalid: CodeEvidenceInvalid,
	ErrNotApproved:     CodeNotApproved,
}

// kindOf is the package's table from sentinel to the Kind an entry point
// answers with (the kernel's table cannot name a feature's sentinels).
// Evidence that does not prove an approval is a conflict with the
// escalation's state (409); an approval service that cannot be asked, or
// is not configured, is an unavailable dependency (503), never a refusal
// of the caller.
var kindOf = map[error]error{
	ErrNotConfigured:   core.ErrUnavailable,
	ErrInvalidEndpoint: core.ErrUnavailable,
	ErrInvalidRequest:  core.ErrInvalidRequest,
	ErrUnavailable:     core.ErrUnavailable,
	ErrRejected:        core.ErrUnavailable,
	ErrNotFound:        core.ErrNotFound,
	ErrConflict:        core.ErrConflict,
	ErrEvidenceInvalid: core.ErrConflict,
	ErrNotApproved:     core.ErrConflict,
}

// Error is a failure of the package: Err wraps one sentinel with detail;
// Code is its stable machine code and Kind the kernel's Kind for it
// (core.Translate keeps both).
type Error struct {
	code string
	kind error
	// Status is the request's status when the service reported one:
	// always set for ErrNotApproved (DENIED, EXPIRED, CANCELLED or
	// REVOKED), otherwise "" or the status of an answer found
	// contradictory.
	Status Status
	Err    error
}

// Code returns the stable machine code, e.g. APPROVAL_NOT_APPROVED.
func (e *Error) Code() string { return e.code }

func (e *Error) Error() string { return e.Err.Error() }

// Kind returns the kernel's Kind of the error (core.ErrConflict,
// core.ErrUnavailable, …).
func (e *Error) Kind() error { return e.kind }

// Unwrap returns Err and the Kind, so errors.Is finds the sentinel, any
// cause and the Kind.
func (e *Error) Unwrap() []error { return []error{e.Err, e.kind} }

// newError wraps sentinel with err, whose text must start with the
// sentinel's.
func newError(sentinel error, status Status, err error) *Error {
	return &Error{code: codes[sentinel], kind: kindOf[sentinel], Status: status, Err: err}
}

// fail wraps sentinel with detail formatted from format and args (which may
// hold a %w for a cause that wraps no sentinel of this package).
func fail(sentinel error, format string, args ...any) *Error {
	return newError(sentinel, "", fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...))
}

// is reports whether err is an *Error of sentinel.
func is(err, sentinel error) bool {
	var e *Error
	return errors.As(err, &e) && e.code == codes[sentinel]
}
