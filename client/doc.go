// Package client is the Go HTTP client of a Clearance server: one method per
// route of the HTTP API, with the request and response types of
// docs/openapi.yaml (types.gen.go is generated from it), and an agent helper
// that runs the whole guarded cycle.
//
// Contract:
//   - Every answer outside 2xx is returned as a *Error carrying the status and
//     the problem's stable code (errors.As, or [IsCode]); a refused claim's
//     FailedClaim body is one too, with ShouldExecute false, and so is a
//     refused UCP checkout, whose 403 carries the recorded authorization
//     ([CheckoutRefusal] reads it).
//   - A request is sent again (after a network error, 429, 502, 503 or 504)
//     only when repeating it cannot act twice: GETs, and POSTs to the routes
//     that honour an Idempotency-Key,
//     which then always carry one (the caller's, or a random one made once per
//     call; for enforce-and-bind the signed intent_id, which the server
//     requires). Claims, finalizations, PUTs, DELETEs and every other POST
//     are sent once.
//   - [Agent.Run] never calls the caller's function unless the claim answered
//     should_execute true, and finalizes every claim it won: COMMITTED when the
//     function returned nil, FAILED when it returned an error, INDETERMINATE
//     when it returned ErrIndeterminate, panicked, or its context or the
//     claim lease ended, since then nobody knows whether the effect
//     happened. It does not start the function with less than LeaseMargin
//     of the lease left.
//
// Account sessions: an owner's sign-in is a cookie, never a body member.
// [Client.SignInVerify] returns it, and the routes that need it take it as
// an argument; nil sends none of its own, for a Client whose http.Client
// has a cookie jar (which keeps the cookie the sign-in set and sends it).
// The signed-in routes that change something get the header
// X-Clearance-CSRF: 1 from their methods.
//
// Methods take path parameters as arguments and escape them, required query
// parameters as arguments too, and optional ones as [Query] options.
package client

//go:generate sh -c "cd ../apicheck && go tool oapi-codegen -config ../client/oapi-codegen.yaml -o ../client/types.gen.go ../docs/openapi.yaml"
