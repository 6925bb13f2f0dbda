package decide_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/outbox"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// The decision.resolved body is written at dispatch from the dossier the
// stored event references, and says what the decision's answer said.
func TestEventBodyFromTheDossier(t *testing.T) {
	ctx := context.Background()
	backend, err := pebblestore.Open("", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	engine, err := clearance.Open(backend, clearance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	org, err := engine.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	d, err := engine.Decide.Evaluate(ctx, decide.EvaluateRequest{OrgID: org.Org.ID, Route: decide.RouteEvaluateDecision,
		IdempotencyKey: "k-1", CorrelationID: "c-1",
		Body: []byte(`{"decision_type":"PAYOUT","workflow_key":"payouts","amount":20000}`)})
	if err != nil {
		t.Fatal(err)
	}
	ev := outbox.Event{OrgID: org.Org.ID, ID: d.EvaluationID, Name: decide.EventDecisionResolved,
		Body: []byte(`{"dossier_id":"` + d.DossierID + `"}`)}
	b, err := engine.Decide.EventBody(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	var got decide.DecisionResolved
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := decide.DecisionResolved{Type: decide.EventDecisionResolved, EventID: d.EvaluationID, OccurredAt: d.CreatedAt,
		OrgID: org.Org.ID, DossierID: d.DossierID, DecisionID: d.DecisionID, EvaluationID: d.EvaluationID,
		IdempotencyKey: "k-1", CorrelationID: "c-1", ProtocolOutcome: string(d.Outcome), Mode: string(d.Mode),
		ReasonCodes: d.ReasonCodes, PolicyVersion: d.PolicySnapshot.PolicyVersion, WorkflowKey: "payouts",
		DecisionType: "PAYOUT", ReconciliationStatus: decide.ReconciliationNotRequired, DossierURL: d.DossierURL,
		DossierDigest: d.DossierDigest, LedgerSeq: d.LedgerSeq}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Fatalf("body\n got %s\nwant %s", gotJSON, wantJSON)
	}

	// An event stored whole (by an earlier release) and any other event
	// are sent as stored.
	for _, e := range []outbox.Event{
		{OrgID: org.Org.ID, ID: "e-2", Name: decide.EventDecisionResolved, Body: []byte(`{"type":"decision.resolved","dossier_id":"x"}`)},
		{OrgID: org.Org.ID, ID: "e-3", Name: "other.event", Body: []byte(`{"dossier_id":"x"}`)},
	} {
		if b, err := engine.Decide.EventBody(ctx, e); err != nil || !bytes.Equal(b, e.Body) {
			t.Errorf("%s %s: got %s, %v; want it as stored", e.Name, e.Body, b, err)
		}
	}
	// A reference to no dossier of the org fails: it is not sent empty.
	for _, e := range []outbox.Event{
		{OrgID: org.Org.ID, ID: "e-4", Name: decide.EventDecisionResolved, Body: []byte(`{"dossier_id":"missing"}`)},
		{OrgID: "another-org", ID: d.EvaluationID, Name: decide.EventDecisionResolved, Body: ev.Body},
		{OrgID: org.Org.ID, ID: "e-5", Name: decide.EventDecisionResolved, Body: []byte(`[]`)},
	} {
		if b, err := engine.Decide.EventBody(ctx, e); err == nil {
			t.Errorf("%s of org %s: got %s, want an error", e.Body, e.OrgID, b)
		}
	}
}
