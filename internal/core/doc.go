// Package core is the kernel every feature package stands on: the one clock
// and id source, the Error every entry point returns with its Kinds, the ONE
// table from a domain package's sentinel to a Kind (Translate), the Caller
// of a request validated once, the org-guarded store, the grant signing
// keys in use, and Deps, which carries them to each feature's New.
//
// Nothing here knows a feature: a feature's own codes live in its package.
// The kernel never decides an HTTP status; server/errors.go maps Kinds.
package core
