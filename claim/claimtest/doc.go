// Package claimtest is the conformance suite for the claim part of a
// store.Backend: the claim.Tx and claim.Reader a backend provides, driven
// through the lifecycle functions of package claim exactly as Clearance
// drives them (one lifecycle call per Update). Every backend runs it
// through storetest.All, which calls
//
//	claimtest.Run(t, claimtest.Harness{Open: ..., DeleteScope: ...})
//
// Open gets the clock the backend must use as its store clock (Tx.Now), so
// the suite moves time instead of sleeping. The suite opens a fresh, empty
// backend per subtest and checks that:
//
//   - issue → claim → finalize records every field and moves the grant
//     through ISSUED, CLAIMED and COMMITTED, and GrantsInState follows it;
//   - a grant id is issued once; a grant is claimed once (CLAIM_REPLAY); a
//     claim with another intent hash is BINDING_MISMATCH and writes nothing;
//     a claim at or after exp is GRANT_EXPIRED; a nonce is claimed by one
//     grant (NONCE_ALREADY_USED);
//   - a lease ends on a whole second, at most the requested lease and less
//     than a second short of it, and the scope record carries the same end;
//   - a concurrency scope has one live claim (CONCURRENCY_SCOPE_BUSY); it is
//     free again once its holder finalizes COMMITTED or FAILED. A holder
//     whose outcome is unknown (finalized INDETERMINATE, refused into
//     INDETERMINATE, recorded by Expire, or CLAIMED with its lease passed)
//     keeps it held (CLAIM_SCOPE_UNRECONCILED) until Reconcile releases it;
//   - a grant that expires after a successful claim still finalizes within
//     its lease; finalization exactly at the lease boundary is recorded
//     INDETERMINATE with CLAIM_LEASE_EXPIRED, and a second finalization is
//     ALREADY_FINALIZED; a scope record deleted behind the lifecycle's back
//     (Harness.DeleteScope) is CLAIM_SCOPE_INVARIANT_VIOLATION, and the
//     INDETERMINATE grant holds its scope again;
//   - a wrong claim token, an unclaimed grant and an invalid outcome are
//     refused and write nothing; a failed Update writes nothing;
//   - Reconcile settles only INDETERMINATE grants, moving them to the
//     resolution, so GrantsInState(INDETERMINATE) stops listing them;
//   - 64 goroutines claiming one grant, or 64 grants of one scope, or 64
//     grants of one nonce, each in its own Update, produce exactly one
//     claim (run the suite with -race);
//   - orgs do not see each other's grants, and absent records are errors
//     wrapping store.ErrNotFound and claim.ErrNotFound.
//
// Times handed to the backend are whole microseconds, which PostgreSQL
// stores exactly; they are compared with time.Time.Equal.
package claimtest
