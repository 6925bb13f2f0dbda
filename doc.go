// Package clearance is the in-process API of Clearance: it decides, before an
// AI agent or a workflow acts, whether the action may run (ALLOW, ESCALATE,
// REVIEW_REQUIRED or BLOCK) and leaves evidence an auditor can check.
//
// An Engine composes the domain packages over one storage backend:
//
//   - policy evaluates a request against the org's active, immutable bundle
//     (or the starter policy in SHADOW mode when the org has none);
//   - every decision writes one dossier (the exact request, its canonical
//     digest, the outcome, reason codes and policy snapshot) and one ledger
//     entry, together with its idempotency record, in ONE atomic, synced write;
//   - the ledger is a per-org hash chain that VerifyLedger recomputes.
//
// Contract: an Engine method either returns a result whose evidence is
// durably stored, or an error; a failed write never yields a decision.
// Errors are *Error values whose Kind is one of the Err* sentinels and whose
// Code is a stable machine code. Engines are safe for concurrent use.
package clearance
