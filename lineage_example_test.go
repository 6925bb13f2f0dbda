package clearance_test

import (
	"context"
	"fmt"
	"os"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// Two decisions of one workflow run share a correlation id, so they join
// one decision chain; a reviewer then records how the escalated one was
// resolved. The override is evidence only: it issues nothing.
func ExampleEngine_decisionChain() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "clearance-example-")
	defer os.RemoveAll(dir)
	backend, _ := pebblestore.Open(dir, pebblestore.Options{})
	defer backend.Close()
	engine, _ := clearance.Open(backend, clearance.Options{})
	org, _ := engine.Admin.CreateOrg(ctx, "Acme")

	decide := func(body string) clearance.Decision {
		d, err := engine.Evaluate(ctx, clearance.EvaluateRequest{OrgID: org.Org.ID, Route: clearance.RouteEvaluateDecision,
			Body: []byte(body), CorrelationID: "invoice-42"})
		if err != nil {
			panic(err)
		}
		return d
	}
	decide(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":500}`)
	escalated := decide(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":2500}`)

	chain, err := engine.Evidence.ChainByEvaluation(ctx, org.Org.ID, escalated.EvaluationID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("chain of the correlation:", chain.ChainID == clearance.CorrelationChainID(org.Org.ID, "ap.invoice", "invoice-42"))
	for _, m := range chain.Members {
		fmt.Println(m.Outcome, m.Mode)
	}
	fmt.Println("head is the escalation:", chain.Head.DecisionID == escalated.DecisionID, "count:", chain.Count)

	o, err := engine.Evidence.RecordOverride(ctx, clearance.OverrideRequest{OrgID: org.Org.ID, DossierID: escalated.DossierID,
		Resolution: clearance.OverrideApproved, Actor: clearance.OverrideActor{ID: "alice", Type: "human"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(o.Resolution, "of", o.DecisionOutcome)
	// Output:
	// chain of the correlation: true
	// ALLOW SHADOW
	// ESCALATE SHADOW
	// head is the escalation: true count: 2
	// APPROVED of ESCALATE
}
