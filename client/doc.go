// Package client is the Go HTTP client of a Clearance server: one method per
// route of the HTTP API, with the request and response types of
// docs/openapi.yaml (types.gen.go is generated from it), and an agent helper
// that runs the whole guarded cycle.
//
// Contract:
//   - Every answer outside 2xx is returned as a *Error carrying the status and
//     the problem's stable code (errors.As, or [IsCode]); a refused claim's
//     FailedClaim body is one too, with ShouldExecute false.
//   - A request is sent again only when repeating it cannot act twice: GET,
//     PUT and DELETE, and POSTs to the routes that honour an Idempotency-Key,
//     which then always carry one (the caller's, or a random one made once per
//     call). Claims, finalizations and every other POST are sent once.
//   - [Agent.Run] never calls the caller's function unless the claim answered
//     should_execute true, and finalizes every claim it won: COMMITTED when the
//     function returned nil, FAILED when it returned an error, INDETERMINATE
//     when it panicked or its context ended, since then nobody knows whether
//     the effect happened.
package client
