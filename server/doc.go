// Package server is Clearance's thin HTTP layer: ONE route table of Go
// ServeMux patterns with declarative attributes (auth, scopes, deprecation,
// the refusal body of a fail-closed route), middleware (request id, trace
// span, metrics, access log, auth, rate limit, body limit) and one handler
// file per feature. Handlers
// read the HTTP parts (query, path, headers) and hand the body to the
// engine: the decision routes pass it exactly as received, and the engine
// decodes it, so what is evaluated is what is recorded.
//
// Contract: every error answer is RFC 9457 application/problem+json with a
// stable UPPER_SNAKE code, except on routes whose refusal is a fail-closed
// body of their own (claim: should_execute false; finalize: the recorded
// result); errors.go is the only place that chooses an error status (a test
// keeps it so) and maps the engine's Kinds. Bad input is a 4xx and changes
// nothing; a failure of the store is a 503 and never a decision. Aliases
// (POST /v1/decisions/evaluate, POST /v1/policies) are route lines, not
// copied logic. Observability never carries secrets: spans and access log
// lines name the route pattern, never the path or query string, and no
// header or body (observe.go).
package server
