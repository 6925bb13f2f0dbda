package ucp

import (
	"errors"
	"strconv"
)

// Codes of Error, stable for API answers.
const (
	CodeUnsupportedRelease = "UCP_VERSION_UNSUPPORTED"
	CodeInvalidEnvelope    = "UCP_ENVELOPE_INVALID"
	CodeInvalidMandate     = "UCP_MANDATE_INVALID"
	CodeInvalidTerms       = "UCP_MERCHANT_AUTHORIZATION_INVALID"
	CodePrivateKeyMaterial = "PRIVATE_KEY_MATERIAL"
	CodeInvalidKey         = "INVALID_PUBLIC_KEY"
)

// Sentinels an *Error wraps, one per code, for errors.Is.
var (
	ErrUnsupportedRelease = errors.New("ucp: unsupported release")
	ErrInvalidEnvelope    = errors.New("ucp: invalid checkout envelope")
	ErrInvalidMandate     = errors.New("ucp: invalid checkout mandate")
	ErrInvalidTerms       = errors.New("ucp: invalid merchant authorization")
	ErrPrivateKeyMaterial = errors.New("ucp: private key material")
	ErrInvalidKey         = errors.New("ucp: invalid merchant key")
)

// ErrUnknownKey is what a VerifyTerms lookup wraps when the kid names no
// registered, active merchant key.
var ErrUnknownKey = errors.New("ucp: unknown merchant key")

// Error is every refusal of this package.
type Error struct {
	Code    string // one of the Code constants
	Pointer string // RFC 6901 pointer of the failing location; "" is the root
	Detail  string // one line for humans
	Err     error  // the sentinel of Code, possibly joined with a cause
}

func (e *Error) Error() string {
	at := "the body"
	if e.Pointer != "" {
		at = strconv.Quote(e.Pointer)
	}
	return e.Code + " at " + at + ": " + e.Detail
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns Code.
func (e *Error) ErrorCode() string { return e.Code }

// ErrorDetail returns Detail.
func (e *Error) ErrorDetail() string { return e.Detail }

func sentinel(code string) error {
	switch code {
	case CodeUnsupportedRelease:
		return ErrUnsupportedRelease
	case CodeInvalidEnvelope:
		return ErrInvalidEnvelope
	case CodeInvalidMandate:
		return ErrInvalidMandate
	case CodeInvalidTerms:
		return ErrInvalidTerms
	case CodePrivateKeyMaterial:
		return ErrPrivateKeyMaterial
	case CodeInvalidKey:
		return ErrInvalidKey
	}
	panic("ucp: unknown code " + code)
}

func newError(code, pointer, detail string) *Error {
	return &Error{Code: code, Pointer: pointer, Detail: detail, Err: sentinel(code)}
}

func envelopeError(pointer, detail string) *Error {
	return newError(CodeInvalidEnvelope, pointer, detail)
}

// pointerOf joins tokens into an RFC 6901 pointer.
func pointerOf(tokens ...string) string {
	var b []byte
	for _, t := range tokens {
		b = append(b, '/')
		for i := 0; i < len(t); i++ {
			switch t[i] {
			case '~':
				b = append(b, '~', '0')
			case '/':
				b = append(b, '~', '1')
			default:
				b = append(b, t[i])
			}
		}
	}
	return string(b)
}
