// Package ledger is the per-org hash-linked audit log.
//
// Every state change Clearance records (a decision, a published policy, an
// org or key created) appends one Entry to its org's ledger in the same atomic
// write as the change itself. Entries are numbered from 1 without gaps; each
// carries the hash of its predecessor (Genesis for seq 1) and its own hash,
// SHA-256 over the RFC 8785 form of the entry without entry_hash. Verify
// recomputes the chain and reports the first broken seq and why.
//
// The package is pure: storage comes in through the small Tx and Reader
// interfaces that backends implement, and time is an argument.
package ledger
