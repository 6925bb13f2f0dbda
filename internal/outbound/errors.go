package outbound

import "errors"

// Sentinel errors. Every error of the package wraps exactly one of them;
// compare with errors.Is.
var (
	// ErrInvalidURL: the URL is malformed or breaks a rule of CheckURL
	// other than the destination (scheme, userinfo, fragment, port, host
	// syntax).
	ErrInvalidURL = errors.New("outbound: invalid URL")

	// ErrBlockedDestination: the destination is a blocked address (see
	// Blocked) or an obviously local host name, found at registration
	// (CheckURL) or at dial time on the resolved address.
	ErrBlockedDestination = errors.New("outbound: blocked destination")

	// ErrRedirect: the other side answered 3xx; redirects are not followed.
	ErrRedirect = errors.New("outbound: redirect not followed")

	// ErrResponseTooLarge: the response body is larger than
	// Options.MaxResponseBytes.
	ErrResponseTooLarge = errors.New("outbound: response too large")

	// ErrUnreachable: no answer was received or read in full: the
	// connection was refused or reset, a timeout expired, the TLS handshake
	// failed, the name did not resolve or the context ended. The error also
	// wraps the cause (context.DeadlineExceeded, a *net.OpError, …).
	ErrUnreachable = errors.New("outbound: destination unreachable")
)

// Stable codes of the sentinels, as CodeOf reports them.
const (
	CodeInvalidURL         = "OUTBOUND_INVALID_URL"
	CodeBlockedDestination = "OUTBOUND_BLOCKED_DESTINATION"
	CodeRedirect           = "OUTBOUND_REDIRECT"
	CodeResponseTooLarge   = "OUTBOUND_RESPONSE_TOO_LARGE"
	CodeUnreachable        = "OUTBOUND_UNREACHABLE"
)

var codes = []struct {
	err  error
	code string
}{
	{ErrInvalidURL, CodeInvalidURL},
	{ErrBlockedDestination, CodeBlockedDestination},
	{ErrRedirect, CodeRedirect},
	{ErrResponseTooLarge, CodeResponseTooLarge},
	{ErrUnreachable, CodeUnreachable},
}

// CodeOf returns the stable code of the sentinel err wraps, or "" when err
// wraps none of them.
func CodeOf(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}
