package analytics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/analytics"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// Five consented external production orgs decide in October; on November
// 2nd the platform freezes October's report: the one cell all five share
// is published, the others are suppressed, and the artifact verifies
// against the reporting key.
func ExampleService_FreezeBlastRadius() {
	ctx := context.Background()
	now := time.Date(2026, 10, 20, 9, 0, 0, 0, time.UTC)
	backend, _ := pebblestore.Open("", pebblestore.Options{FS: vfs.NewMem()})
	defer backend.Close()
	reporting, _ := grant.KeyFromSeed(make([]byte, 32))
	engine, _ := clearance.Open(backend, clearance.Options{Now: func() time.Time { return now }, ReportingKey: reporting})

	for i := range 5 {
		org, _ := engine.Admin.CreateOrg(ctx, fmt.Sprint("Shop ", i))
		id := org.Org.ID
		engine.Analytics.Classify(ctx, id, []byte(`{"environment":"prod","audience":"external","surface":"web"}`))
		engine.Analytics.SetConsent(ctx, id, []byte(`{"opted_in":true,"consent_reference":"contract-2026"}`))
		engine.Decide.Evaluate(ctx, decide.EvaluateRequest{OrgID: id, Route: decide.RouteEvaluateDecision,
			Body: []byte(`{"decision_type":"PAYMENT","workflow_key":"ap","amount":120}`)})
		if i == 0 {
			engine.Decide.Evaluate(ctx, decide.EvaluateRequest{OrgID: id, Route: decide.RouteEvaluateDecision,
				Body: []byte(`{"decision_type":"PAYMENT","workflow_key":"ap","amount":25000}`)})
		}
	}

	now = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	body, created, err := engine.Analytics.FreezeBlastRadius(ctx, "2026-10")
	if err != nil {
		fmt.Println(err)
		return
	}
	var frozen analytics.FrozenReport
	json.Unmarshal(body, &frozen)
	report, err := analytics.VerifyReport(frozen.Artifact, reporting.Public())
	fmt.Println("created:", created, "verified:", err == nil, "status:", report.Status)
	for _, c := range report.Cells {
		if c.Published {
			fmt.Println(c.Mode, c.Outcome, *c.Organizations, "orgs", *c.Decisions, "decisions")
		} else if c.Mode == "SHADOW" && c.Outcome == "BLOCK" {
			fmt.Println(c.Mode, c.Outcome, "suppressed")
		}
	}
	_, created, _ = engine.Analytics.FreezeBlastRadius(ctx, "2026-10")
	fmt.Println("created again:", created)
	// Output:
	// created: true verified: true status: PENDING_EDITORIAL_REVIEW
	// SHADOW ALLOW 5 orgs 5 decisions
	// SHADOW BLOCK suppressed
	// created again: false
}
