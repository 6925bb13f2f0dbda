// Package coded is the one error shape of Clearance's domain packages: a
// sentinel for identity (errors.Is), a stable UPPER_SNAKE machine code for
// the wire, and human detail. Packages alias the type (claim.Error,
// registry.Error, grant.TokenError) and keep their own sentinels and codes.
package coded

import "fmt"

// Error is a refusal with a stable code. Err wraps the sentinel (and any
// cause) with detail.
type Error struct {
	code string
	Err  error
}

// New wraps sentinel with detail formatted from format and args (which may
// hold more %w verbs for causes) under code.
func New(code string, sentinel error, format string, args ...any) *Error {
	return &Error{code: code, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
}

// Of is the sentinel itself under code, without more detail.
func Of(code string, sentinel error) *Error { return &Error{code: code, Err: sentinel} }

// Code returns the stable machine code, e.g. CLAIM_LEASE_EXPIRED.
func (e *Error) Code() string { return e.code }

func (e *Error) Error() string {
	if e.Err == nil {
		return e.code
	}
	return e.Err.Error()
}

// Unwrap returns Err, so errors.Is finds the sentinel and any cause.
func (e *Error) Unwrap() error { return e.Err }
