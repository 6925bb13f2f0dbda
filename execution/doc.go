// Package execution is what happens to a grant after enforce-and-bind
// issued it: VerifyGrant checks it without consuming it; Claim, right
// before the downstream commit, verifies the token and its complete
// binding, checks the dossier, re-evaluates the bound intent under the
// org's current policy and claims the grant's nonce and concurrency scope
// under a lease judged by the store's clock, answering a signed claim
// attestation; Finalize records what happened (COMMITTED, FAILED or
// INDETERMINATE) with digest-bound evidence or a provider's signed receipt;
// Reconcile settles an INDETERMINATE execution; RecordDispatch records what
// was sent downstream under a live claim. Indeterminate lists what awaits
// reconciliation, claims whose lease passed included, and writes nothing;
// ExpireLapsed and the RunExpiry worker record those claims INDETERMINATE.
// The reconciliation answers are Execution, a wire type apart from the
// stored claim.Grant. Every state change is ledgered in the transaction
// that makes it. Nothing authorizes but a ClaimResult:
// every failure is an error, and a storage failure is a 503.
package execution
