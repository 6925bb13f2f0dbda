package evidence_test

import (
	"context"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/evidence"
	"github.com/clearancehq/clearance/policy"
)

// The console lists an org's blocked decisions of a day, newest first,
// from the dossier index alone.
func ExampleService_Decisions() {
	ctx := context.Background()
	x, err := newDecided(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.close()

	noon := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC) // the example's clock
	day := evidence.Between(noon.Add(-24*time.Hour), noon.Add(time.Minute))
	list, err := x.evidence.Decisions(ctx, x.orgID, evidence.DecisionFilter{Window: day, Outcome: policy.OutcomeBlock})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range list.Decisions {
		fmt.Println(d.Outcome, d.Mode, d.WorkflowKey, d.DecisionID == x.decision.DecisionID)
	}
	fmt.Println("truncated:", list.Truncated)
	// Output:
	// BLOCK SHADOW ap.invoice true
	// truncated: false
}

// The console's chart: an org's decisions by hour, outcome and mode.
func ExampleService_Activity() {
	ctx := context.Background()
	x, err := newDecided(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.close()

	noon := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	a, err := x.evidence.Activity(ctx, x.orgID, evidence.Between(noon.Add(-2*time.Hour), noon.Add(time.Hour)), evidence.BucketHour)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range a.Series {
		fmt.Println(s.Start.Format("15:04"), "BLOCK", s.ByOutcome[policy.OutcomeBlock], "SHADOW", s.ByMode[policy.ModeShadow])
	}
	fmt.Println("reconciliation queue:", a.ReconciliationQueue)
	// Output:
	// 10:00 BLOCK 0 SHADOW 0
	// 11:00 BLOCK 0 SHADOW 0
	// 12:00 BLOCK 1 SHADOW 1
	// reconciliation queue: 0
}
