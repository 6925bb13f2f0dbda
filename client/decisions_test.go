package client_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/clearancehq/clearance/client"
)

// Every decision entry point answers the one evaluation.
func TestDecisionRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Decisions")
	o.publish(t, bandsBundle)
	ctx := t.Context()

	d, err := o.c.EvaluateDecision(ctx, decisionRequest(t, 2000), client.WithCorrelationID("ticket-9"))
	if err != nil || d.Outcome != "ESCALATE" || d.Mode != "ENFORCEMENT" || !slices.Contains(d.ReasonCodes, "MID") ||
		d.CorrelationId == nil || *d.CorrelationId != "ticket-9" || d.OrgId.String() != o.ID {
		t.Fatalf("evaluate %+v: %v", d, err)
	}
	var got client.Response
	old, err := o.c.EvaluateDecisionDeprecated(ctx, decisionRequest(t, 50), client.Received(&got))
	if err != nil || old.Outcome != "ALLOW" || got.Header.Get("Deprecation") == "" {
		t.Fatalf("deprecated alias (%v) %+v: %v", got.Header, old, err)
	}

	var hook client.HookRequest
	mustJSON(t, `{"workflow_key":"refunds","decision_type":"REFUND","amount":20000,"action":{"type":"refund","currency":"EUR"}}`, &hook)
	gate, err := o.c.ActionGate(ctx, hook)
	if err != nil || gate.Outcome != "BLOCK" || gate.Verdict != "stop" || gate.Decision.Outcome != "BLOCK" || gate.Links.Dossier == "" {
		t.Fatalf("action gate %+v: %v", gate, err)
	}
	crm, err := o.c.CRMActionGate(ctx, o.ID, hook)
	if err != nil || crm.Outcome != "BLOCK" || crm.Decision.OrgId.String() != o.ID {
		t.Fatalf("CRM gate %+v: %v", crm, err)
	}
	mustJSON(t, `{"workflow_key":"refunds","decision_type":"REFUND","amount":10,"action":{"type":"refund","currency":"EUR"}}`, &hook)
	ws, err := o.c.WorkspaceActionGate(ctx, hook)
	if err != nil || ws.Outcome != "ALLOW" || ws.Verdict != "continue" {
		t.Fatalf("workspace gate %+v: %v", ws, err)
	}
	var agent client.AgentVerifyRequest
	mustJSON(t, `{"workflow_key":"refunds","decision_type":"REFUND","intent":{"action_type":"refund","amount":1500,"currency":"EUR"}}`, &agent)
	cloud, err := o.c.CloudAgentVerify(ctx, agent)
	if err != nil || cloud.Outcome != "ESCALATE" || cloud.Decision.Outcome != "ESCALATE" {
		t.Fatalf("cloud agent gate %+v: %v", cloud, err)
	}
	_, err = o.c.CRMActionGate(ctx, "01900000-0000-7000-8000-000000000000", hook)
	wantCode(t, err, http.StatusForbidden, "ORG_MISMATCH")

	codes, err := o.c.ReasonCodes(ctx)
	if err != nil || !slices.ContainsFunc(codes.ReasonCodes, func(c client.ReasonCode) bool { return c.Code == "POLICY_MATCHED" }) {
		t.Fatalf("reason codes %+v: %v", codes, err)
	}
}

// The shadow report counts the SHADOW decisions of the starter policy.
func TestShadowReport(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Shadow")
	for _, amount := range []float64{10, 20, 30} {
		if d := o.decide(t, amount); d.Mode != "SHADOW" {
			t.Fatalf("the starter policy decided in %s", d.Mode)
		}
	}
	rep, err := o.c.ShadowReport(t.Context())
	if err != nil || rep.Total != 3 || rep.OrgId != o.ID || len(rep.ByWorkflow) != 1 || rep.ByWorkflow[0].WorkflowKey != "refunds" ||
		rep.ByWorkflow[0].Total != 3 {
		t.Fatalf("shadow report %+v: %v", rep, err)
	}
	_, err = o.c.ShadowReport(t.Context(), client.Query("from", "yesterday"))
	wantCode(t, err, http.StatusBadRequest, "INVALID_QUERY")
}
