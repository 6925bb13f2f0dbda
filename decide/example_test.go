package decide_test

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// Evaluate takes the body exactly as received on a route and decodes it
// itself; a gate route's answer is the verdict a workflow branches on.
func ExampleService_Evaluate() {
	ctx := context.Background()
	backend, _ := pebblestore.Open("", pebblestore.Options{FS: vfs.NewMem()})
	defer backend.Close()
	engine, _ := clearance.Open(backend, clearance.Options{})
	org, _ := engine.Admin.CreateOrg(ctx, "Acme")

	d, err := engine.Decide.Evaluate(ctx, decide.EvaluateRequest{
		OrgID: org.Org.ID, Route: decide.RouteActionGate,
		Body: []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":12000}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	a := decide.GateAnswerOf(d)
	fmt.Println(d.Outcome, d.Mode, "→", a.Verdict, "enforced:", a.Enforced, "would be:", a.EnforcedVerdict)

	_, err = engine.Decide.Evaluate(ctx, decide.EvaluateRequest{
		OrgID: org.Org.ID, Route: decide.RouteActionGate, Body: []byte(`{"amount":12000,"amount":5}`),
	})
	fmt.Println(err.(*clearance.Error).Code)
	// Output:
	// BLOCK SHADOW → continue enforced: false would be: stop
	// DUPLICATE_MEMBER
}
