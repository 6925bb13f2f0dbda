package clearance_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
)

func (x *execEnv) claimOf(t *testing.T, d clearance.AuthorityDecision) (clearance.ClaimResult, error) {
	t.Helper()
	return x.e.Claim(context.Background(), clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
}

// TestUnknownOutcomeHoldsTheScope: an execution whose outcome is unknown
// (finalized INDETERMINATE, or claimed and never finalized) keeps its
// concurrency scope until it is reconciled, so a new intent on the scope is
// not an automatic retry.
func TestUnknownOutcomeHoldsTheScope(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	org := x.org.Org.ID
	bind := func() clearance.AuthorityDecision {
		jws, _ := x.intent(t, 10, "account-1", "")
		return x.bind(t, jws)
	}

	a := bind()
	ca, err := x.claimOf(t, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: org, ExecutionToken: a.ExecutionToken, ClaimToken: ca.ClaimToken,
		Outcome: claim.OutcomeIndeterminate}); err != nil {
		t.Fatalf("finalize INDETERMINATE: %v", err)
	}
	b := bind()
	_, err = x.claimOf(t, b)
	wantCode(t, "claim after an INDETERMINATE finalization", err, clearance.ErrConflict, claim.CodeScopeUnreconciled)
	x.advance(time.Minute) // the lease of a is long gone: still held
	_, err = x.claimOf(t, b)
	wantCode(t, "claim after a's lease", err, clearance.ErrConflict, claim.CodeScopeUnreconciled)
	if _, err := x.e.Execution.Reconcile(ctx, clearance.ReconcileRequest{OrgID: org, GrantID: a.GrantID, Resolution: claim.OutcomeFailed}); err != nil {
		t.Fatalf("reconcile a: %v", err)
	}
	cb, err := x.claimOf(t, b)
	if err != nil || !cb.ShouldExecute {
		t.Fatalf("claim after reconciliation: %+v %v", cb, err)
	}
	if _, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: org, ExecutionToken: b.ExecutionToken, ClaimToken: cb.ClaimToken,
		Outcome: claim.OutcomeCommitted}); err != nil {
		t.Fatal(err)
	}

	// A claim whose executor never finalized: once its lease passed its
	// outcome is unknown, and reconciling it directly (without listing
	// first) records it INDETERMINATE and then settles it.
	c := bind()
	if _, err := x.claimOf(t, c); err != nil {
		t.Fatal(err)
	}
	x.advance(31 * time.Second)
	d := bind()
	_, err = x.claimOf(t, d)
	wantCode(t, "claim after a lapsed lease", err, clearance.ErrConflict, claim.CodeScopeUnreconciled)
	g, err := x.e.Execution.Reconcile(ctx, clearance.ReconcileRequest{OrgID: org, GrantID: c.GrantID, Resolution: claim.OutcomeCommitted})
	if err != nil || g.State != claim.StateCommitted || g.FinalCode != claim.CodeLeaseExpired || g.Reconciliation == nil {
		t.Fatalf("reconcile a lapsed claim: %+v %v", g, err)
	}
	if cd, err := x.claimOf(t, d); err != nil || !cd.ShouldExecute {
		t.Fatalf("claim after reconciling the lapsed claim: %+v %v", cd, err)
	}
	if rep, err := x.e.Audit.VerifyLedger(ctx, org); err != nil || !rep.Valid {
		t.Fatalf("ledger %+v %v", rep, err)
	}
}

// TestAttestationExpiryIsTheLease: the claim attestation's exp is exactly
// the claim lease's end, also for a claim made mid-second: the lease ends on
// a whole second, at most ClaimLease after the claim.
func TestAttestationExpiryIsTheLease(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	jws, _ := x.intent(t, 10, "", "")
	d := x.bind(t, jws)
	x.advance(1500 * time.Millisecond)
	claimedAt := time.Unix(0, x.now.Load()).UTC()
	c, err := x.claimOf(t, d)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := time.Parse(time.RFC3339Nano, c.ClaimLeaseExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	att, err := grant.VerifyAttestation(c.ClaimAttestation, x.ring, grant.VerifyOptions{Now: claimedAt, Issuer: clearance.DefaultIssuer})
	if err != nil {
		t.Fatal(err)
	}
	if !time.Unix(att.Expiry, 0).Equal(lease) {
		t.Fatalf("attestation exp %d, lease ends %s", att.Expiry, c.ClaimLeaseExpiresAt)
	}
	if lease.After(claimedAt.Add(clearance.DefaultClaimLease)) || !lease.After(claimedAt.Add(clearance.DefaultClaimLease-time.Second)) {
		t.Fatalf("claimed at %s, lease ends %s", claimedAt, lease)
	}
	// The attestation and the lease end together: one nanosecond before,
	// both hold; at the end, neither.
	x.advance(lease.Sub(claimedAt) - time.Nanosecond)
	if _, err := grant.VerifyAttestation(c.ClaimAttestation, x.ring, grant.VerifyOptions{Now: lease.Add(-time.Nanosecond)}); err != nil {
		t.Fatalf("attestation just before the lease end: %v", err)
	}
	if _, err := grant.VerifyAttestation(c.ClaimAttestation, x.ring, grant.VerifyOptions{Now: lease}); !errors.Is(err, grant.ErrTokenExpired) {
		t.Fatalf("attestation at the lease end: %v", err)
	}
	if _, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, ClaimToken: c.ClaimToken,
		Outcome: claim.OutcomeCommitted}); err != nil {
		t.Fatalf("finalize one nanosecond before the lease end: %v", err)
	}
}
