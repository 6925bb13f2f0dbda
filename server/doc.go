// Package server is Clearance's thin HTTP layer: one route table of Go
// ServeMux patterns, middleware (request id, metrics, auth, rate limit, body
// limit) and handlers that decode, call one Engine method and encode.
//
// Contract: every error answer is RFC 9457 application/problem+json with a
// stable UPPER_SNAKE code; errors.go is the only place that chooses an HTTP
// status. Bad input is a 4xx and changes nothing; a failure of the store is
// a 503 and never a decision. Aliases (POST /v1/decisions/evaluate,
// POST /v1/policies) are route lines, not copied logic.
package server
