package escalation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/approval/approvaltest"
	"github.com/clearancehq/clearance/escalation"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store/pebblestore"
)

func exampleNow() time.Time { return time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC) }

// exampleTB lets the in-memory approval service run outside a test.
type exampleTB struct{}

func (exampleTB) Helper()                        {}
func (exampleTB) Cleanup(func())                 {}
func (exampleTB) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

// oneService gives every org the same approval service and credential.
type oneService struct{ ep approval.Endpoint }

func (d oneService) Endpoint(context.Context, string) (approval.Endpoint, error) { return d.ep, nil }

// A payment of 2,500 needs a human's approval: enforce-and-bind answers
// ESCALATE with a managed escalation and no grant; once the approver
// approved at the approval service, a completion hint makes Clearance
// verify the approval directly with the service and evaluate the intent
// again, and the escalation carries the grant.
func ExampleService_Complete() {
	ctx := context.Background()
	service := approvaltest.New(exampleTB{}, approvaltest.Options{Now: exampleNow})
	defer service.Close()
	backend, _ := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: exampleNow})
	defer backend.Close()
	signing, _ := grant.KeyFromSeed(bytes.Repeat([]byte{1}, 32))
	engine, _ := clearance.Open(backend, clearance.Options{Now: exampleNow, GrantKeys: grant.NewKeyRing(signing),
		AllowPrivateDestinations: true, // the approval service runs on this machine
		ApprovalServices:         oneService{approval.Endpoint{BaseURL: service.URL, Credential: "cred-acme", Issuer: service.Issuer()}}})
	org, _ := engine.Admin.CreateOrg(ctx, "Acme")
	service.AddCredential("cred-acme", org.Org.ID)
	agent, _ := grant.KeyFromSeed(bytes.Repeat([]byte{2}, 32))
	jwk, _ := json.Marshal(agent.PublicJWK())
	_, _, _ = engine.Admin.RegisterKey(ctx, org.Org.ID, registry.KindAgent, registry.Registration{KID: agent.KID(), PublicJWK: jwk})
	_, _ = engine.Policies.PublishBundle(ctx, org.Org.ID, []byte(`{"bundle_id":"payments","version":"v1","mode":"ENFORCEMENT",
	 "rules":[{"id":"approve","match":[{"field":"amount","op":"ge","value":1000},{"field":"approval.verified","op":"eq","value":false}],
	           "outcome":"ESCALATE","reason_codes":["NEEDS_APPROVAL"]}],
	 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`))

	payload, _ := json.Marshal(map[string]any{ // canonical: sorted ASCII keys, integers
		"intent_id": "pay-1", "org_id": org.Org.ID, "actor": map[string]any{"id": "agent-7", "type": "agent"},
		"action": map[string]any{"type": "payment.send", "amount": 2500, "currency": "EUR", "target": "vendor-9"},
		"nonce":  "nonce-1", "concurrency_scope": "vendor-9", "escalation": map[string]any{"mode": "MANAGED"},
		"issued_at": exampleNow().Format(time.RFC3339),
	})
	signed, _ := grant.SignIntent(agent, payload)
	d, err := engine.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: org.Org.ID, SignedIntent: signed})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.Outcome, "grant:", d.ExecutionToken != "", "escalation:", d.ManagedEscalation.Status)

	st, _ := engine.Escalations.Get(ctx, org.Org.ID, d.ManagedEscalation.EscalationID)
	service.Approve(st.ApprovalRequest, "ana@example.com") // the human, with a passkey

	st, err = engine.Escalations.Complete(ctx, escalation.Completion{OrgID: org.Org.ID, EscalationID: st.EscalationID})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Status, "approved by", st.Approval.Approver, "grant:", st.ExecutionToken != "")
	// Output:
	// ESCALATE grant: false escalation: PENDING_APPROVAL
	// GRANT_READY approved by ana@example.com grant: true
}
