package execution_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/execution"
)

// Immediately before the refund, the executor claims the grant that
// enforce-and-bind issued: one claim wins, under a lease; a second is
// refused. After the refund it finalizes the grant with digest-bound
// evidence of the effect.
func ExampleService_Claim() {
	ctx := context.Background()
	r, err := newRefunds(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.close()
	d, err := r.bind(ctx, "order-1", 120)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("decision:", d.Outcome, d.Mode, "grant issued:", d.ExecutionToken != "")

	exec := r.engine.Execution
	req := execution.ClaimRequest{OrgID: r.orgID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash}
	c, err := exec.Claim(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("should execute:", c.ShouldExecute, "lease until:", c.ClaimLeaseExpiresAt)

	_, err = exec.Claim(ctx, req)
	var refused *clearance.Error
	if errors.As(err, &refused) {
		fmt.Println("second claim refused:", refused.Code)
	}

	f, err := exec.Finalize(ctx, execution.FinalizeRequest{OrgID: r.orgID, ExecutionToken: d.ExecutionToken,
		ClaimToken: c.ClaimToken, Outcome: claim.OutcomeCommitted,
		Evidence: &execution.EffectEvidence{Kind: "psp.refund", Status: claim.EvidenceConfirmed, EffectDigest: effectOf("order-1")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("finalized:", f.Outcome, "at", f.FinalizedAt, "effect confirmed:", f.EffectConfirmed)
	// Output:
	// decision: ALLOW ENFORCEMENT grant issued: true
	// should execute: true lease until: 2026-11-01T12:00:30Z
	// second claim refused: CLAIM_REPLAY
	// finalized: COMMITTED at 2026-11-01T12:00:00Z effect confirmed: true
}

// The executor lost track of the refund (a timeout) and finalized it
// INDETERMINATE; the execution waits in the reconciliation queue until
// someone settles it with the provider's evidence. Reconciling never
// authorizes another attempt.
func ExampleService_Reconcile() {
	ctx := context.Background()
	r, err := newRefunds(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.close()
	d, err := r.bind(ctx, "order-2", 80)
	if err != nil {
		fmt.Println(err)
		return
	}
	exec := r.engine.Execution
	c, err := exec.Claim(ctx, execution.ClaimRequest{OrgID: r.orgID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := exec.Finalize(ctx, execution.FinalizeRequest{OrgID: r.orgID, ExecutionToken: d.ExecutionToken,
		ClaimToken: c.ClaimToken, Outcome: claim.OutcomeIndeterminate}); err != nil {
		fmt.Println(err)
		return
	}
	queue, err := exec.Indeterminate(ctx, r.orgID, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("waiting:", len(queue), queue[0].State, "is this grant:", queue[0].GrantID == d.GrantID)

	g, err := exec.Reconcile(ctx, execution.ReconcileRequest{OrgID: r.orgID, GrantID: d.GrantID,
		Resolution: claim.OutcomeCommitted, Note: "refund found in the provider's report",
		Evidence: &execution.EffectEvidence{Kind: "psp.refund", Status: claim.EvidenceConfirmed, EffectDigest: effectOf("order-2")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("reconciled:", g.Reconciliation.Resolution, "effect confirmed:", g.Reconciliation.EffectConfirmed)
	queue, err = exec.Indeterminate(ctx, r.orgID, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("waiting:", len(queue))
	// Output:
	// waiting: 1 INDETERMINATE is this grant: true
	// reconciled: COMMITTED effect confirmed: true
	// waiting: 0
}
