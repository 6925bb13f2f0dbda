// Package apidoc holds the tests that keep docs/openapi.yaml true.
//
// Contract: docs/openapi.yaml parses as OpenAPI 3.1 and documents every
// served route. Its tests read the route table from server/routes.go with
// go/parser (they import no Clearance package, so they run while other
// packages are under construction) and fail when a route is missing from
// the document, when the document describes a method and path the table
// does not serve, or when any $ref does not resolve. They also check that
// public routes say `security: []`, that the other routes name the scopes
// the table requires, that deprecated routes are marked deprecated, and
// that the Problem schema lists every stable error code the code defines.
package apidoc
