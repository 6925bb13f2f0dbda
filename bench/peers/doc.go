// Package peers benchmarks Clearance's policy evaluator against OPA (Rego)
// and cedar-go on the starter policy and on larger generated bundles. It is
// its own module so that the main module never depends on either peer.
package peers
