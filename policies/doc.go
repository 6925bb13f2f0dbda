// Package policies is the lifecycle of an org's policy bundles: publish an
// immutable version (validated, canonical, digested), stage it without
// activating, activate a version (the only one that authorizes; newer, or
// older to roll back), list and read them — every change ledgered — and
// Resolve, the policy a request is evaluated under: the org's active
// version, or a pinned other one, which is evaluated and recorded in SHADOW
// and never authorizes. Resolve reads the active version from the store on
// every call (another server may have changed it); ResolveSeen uses the one
// this process saw last, and its caller confirms it with Current inside the
// org's transaction, evaluating again when it moved. Compiled bundles are
// cached, being immutable. StillActive re-checks the active version inside
// the transaction that issues or claims a grant, so an activation racing a
// request wins.
package policies
