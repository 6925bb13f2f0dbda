// Package apicheck proves docs/openapi.yaml fit for client generators; it
// holds tests only.
//
// Contract: the test generates a Go client with oapi-codegen (the version
// this module's go.mod pins as a tool) into a temporary directory of the
// module and builds it together with testdata/client_usage.go, and generates
// TypeScript types with openapi-typescript (pinned by ts/package-lock.json)
// and type-checks ts/usage.ts against them with tsc. The TypeScript check
// needs node and npm (and the npm registry for `npm ci`): without them it
// skips, unless CLEARANCE_REQUIRE_NODE=1 makes it fail. This module is
// separate so the root module never depends on the generators.
package apicheck
