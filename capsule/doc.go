// Package capsule implements the Agent Action Capsule of
// draft-mih-scitt-agent-action-capsule-04 (SpecVersion) and its COSE_Sign1
// Producer Envelopes: producing format-4 capsules, computing Capsule IDs,
// Class 1 verification, and signing and verifying envelopes.
//
// The package is pure: no storage, no network, no clock, no randomness.
// Times are inputs; Ed25519 signing is deterministic.
//
// # Identity
//
// A Capsule ID is SHA-256 over the capsule's identity preimage (ComputeID).
// Format "4", the only format produced here, declares canonicalization_id
// "jcs": the preimage is the plain RFC 8785 JCS of the capsule with only
// capsule_id removed, so the chain block, nulls, empty arrays and empty
// objects all participate. Vintage format "2" (canonicalization_id absent)
// is verification-only: capsule_id and chain are removed and members whose
// value is null, [] or {} are dropped bottom-up before JCS. Digest-bearing
// material holds no floating-point number and no integer outside
// ±(2^53−1); such a capsule has no ID.
//
// # Verification
//
// Verify runs the Class 1 checks of draft §6 over raw capsule JSON and
// returns a Result: OK, findings {check, severity, code, detail} in fixed
// check order, the assurance modes re-derived from the capsule's own bytes,
// and the recomputed ID. Only error findings make OK false; unknown registry
// values are informational; the disposition-honesty assert is a non-gating
// warning with check 0 (null in JSON). Verify never panics and never
// derives "anchored": transparency receipts are verified elsewhere.
// VerifyLedger adds the store-level chain checks over a producer's ledger.
// The package's own conformance test runs all 45 Class 1 vectors of the
// draft and all 14 Producer Envelope vectors (testdata/).
//
// # Envelopes
//
// Sign makes a Producer Envelope over an ID; VerifyEnvelope checks one
// strictly against an ID and returns the public key carried in kid. A valid
// envelope authenticates only that key's commitment to the ID: whether the
// key may speak for the capsule's operator is the caller's policy.
// Envelopes are independent of the capsule and never change its ID.
//
// # Projection
//
// Build projects a Clearance decision (Evidence) into capsules; MAPPING.md
// is the table. The capsules are a compatibility projection: they bind the
// dossier by digest, and the dossier stays the canonical record. Effects
// are never inferred from an authorization verdict: the verdict capsule has
// no effect, and only a finalization reported by the executor yields one,
// graded runtime_claimed, and confirmed only with digest-bound evidence
// that confirmed it. Every capsule is self-attested and claims no
// transparency anchoring. Seal is the general producer path: it refuses any
// capsule that would not verify.
package capsule
