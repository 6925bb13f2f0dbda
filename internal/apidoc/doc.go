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
//
// Those codes are read from the tree, not from a list of files: every
// non-test Go file of the module (without testdata, nested modules,
// test-support packages, and the packages whose codes are not problem
// codes) is parsed for constants named Code*/code*. That finds every code
// because another test forbids spelling one as a string literal anywhere
// else: in a Code field, assigned to .Code, or as the code argument of a
// known constructor.
//
// For client generators (which run in the separate apicheck module), the
// tests also require every number to be `format: double` and every integer
// that may exceed 2^31-1 to be `format: int64`, component names unique
// across sections, an operationId on every operation (callbacks included),
// and an example on every request body and every 2xx answer with content,
// each of which (error examples too) must validate against its schema as
// JSON Schema 2020-12 with formats asserted.
package apidoc
