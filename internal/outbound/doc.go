// Package outbound is Clearance's one client for HTTP requests it makes to
// other services: approval-service checks, and later callback delivery
// (DESIGN §10, "Outbound HTTP"). Nothing else in the module opens outbound
// HTTP connections.
//
// Its contract:
//
//   - TLS by default: CheckURL accepts only absolute https URLs; plain http
//     is accepted only when Options.AllowPrivate is set (development and
//     tests on one machine). TLS 1.2 is the least version offered.
//   - No proxy: the environment's HTTP_PROXY, HTTPS_PROXY and NO_PROXY are
//     ignored, because a proxy would dial the destination itself and so
//     bypass the dial guard below.
//   - No redirects: a 3xx answer is returned as ErrRedirect, never followed.
//   - Timeouts on every step (dial, TLS handshake, response headers, the
//     whole exchange: Options.Timeout) and response bodies read only up to
//     Options.MaxResponseBytes (ErrResponseTooLarge beyond).
//   - An SSRF guard applied twice. At registration, CheckURL refuses URLs
//     with userinfo or a fragment, non-HTTP(S) schemes, hosts that are IP
//     literals in a blocked range (ErrBlockedDestination) or obviously local
//     names (single labels, localhost and *.localhost, *.local, *.internal,
//     *.home.arpa). At dial time, the address the dialer is about to connect
//     to, after name resolution, is judged again by Blocked; a name that
//     resolves (or rebinds) to a blocked address is refused there. Only the
//     dial-time check guarantees anything: DNS answers change between
//     registration and use. Options.AllowPrivate turns both checks of the
//     address off (it is --allow-private-destinations, off by default).
//
// Errors wrap one of the sentinels of errors.go; CodeOf gives its stable
// code. Transport failures (refused or reset connections, timeouts, TLS
// failures, a cancelled context) wrap ErrUnreachable together with their
// cause, so callers can tell "the other side could not be reached" from
// "the other side answered". Error texts name the method and the origin
// (scheme, host and port) only, never a path or query, which may hold a
// secret, and never a request header.
package outbound
