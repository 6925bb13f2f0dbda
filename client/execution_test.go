package client_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/client"
)

// The whole grant → claim → dispatch → finalize cycle with the spend gate,
// the key registries, reconciliation and the grant JWKS.
func TestExecutionCycle(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Exec")
	o.publish(t, bandsBundle)
	ctx := t.Context()

	jwks, err := o.c.GrantJWKS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []struct{ Kid, Kty, Crv string }
	}
	if err := json.Unmarshal(jwks, &set); err != nil || len(set.Keys) != 1 || set.Keys[0].Kid != seededKey(t, 1).KID() || set.Keys[0].Crv != "Ed25519" {
		t.Fatalf("grant JWKS %s: %v", jwks, err)
	}

	// The key registries.
	agents, err := o.c.ListKeys(ctx, client.AgentKeys)
	if err != nil || len(agents.Keys) != 1 || agents.Keys[0].Kid != o.agent.KID() || agents.Keys[0].Status != "ACTIVE" {
		t.Fatalf("agent keys %+v: %v", agents, err)
	}
	provider := seededKey(t, 3)
	var got client.Response
	reg, err := o.c.RegisterKey(ctx, client.ProviderKeys, keyRegistration(t, provider, "psp.example"), client.Received(&got))
	if err != nil || got.Status != http.StatusCreated || reg.Kid != provider.KID() || reg.Kind != "provider" || *reg.Iss != "psp.example" {
		t.Fatalf("register provider key (%d) %+v: %v", got.Status, reg, err)
	}
	providers, err := o.c.ListKeys(ctx, client.ProviderKeys)
	if err != nil || len(providers.Keys) != 1 || providers.Keys[0].Kid != provider.KID() {
		t.Fatalf("provider keys %+v: %v", providers, err)
	}
	revoked, err := o.c.RevokeKey(ctx, client.ProviderKeys, provider.KID())
	if err != nil || revoked.Status != "REVOKED" || revoked.RevokedAt == nil {
		t.Fatalf("revoke provider key %+v: %v", revoked, err)
	}

	// Bind, verify, claim.
	d := s.bind(o, 100)
	token, hash := *d.ExecutionToken, d.IntentHash
	status, err := o.c.VerifyToken(ctx, client.ExecutionTokenRequest{ExecutionToken: token, IntentHash: hash})
	if err != nil || !status.Valid || status.State != "ISSUED" || status.GrantId != d.GrantId.String() || status.IntentHash != hash {
		t.Fatalf("verify token %+v: %v", status, err)
	}
	claim, err := o.c.Claim(ctx, client.ExecutionClaimTokenRequest{ExecutionToken: token, IntentHash: hash})
	if err != nil || !bool(claim.ShouldExecute) || claim.ClaimToken == "" || claim.ClaimAttestation == "" || claim.GrantId != d.GrantId.String() {
		t.Fatalf("claim %+v: %v", claim, err)
	}

	// The spend gate holds the claimed amount.
	gates, err := o.c.SpendGates(ctx)
	if err != nil || len(gates.SpendGates) != 1 || gates.SpendGates[0].Gate.Id != "refunds.daily" || gates.SpendGates[0].Limit != "1000000" {
		t.Fatalf("spend gates %+v: %v", gates, err)
	}
	gate, err := o.c.SpendGate(ctx, "refunds.daily")
	if err != nil || gate.Reserved != "100" || gate.Remaining != "999900" {
		t.Fatalf("spend gate %+v: %v", gate, err)
	}
	res, err := o.c.SpendReservation(ctx, d.GrantId.String())
	if err != nil || res.GrantId != d.GrantId.String() || len(res.Charges) != 1 || res.Charges[0].GateId != "refunds.daily" ||
		res.Charges[0].AmountMicros != 100_000_000 {
		t.Fatalf("spend reservation %+v: %v", res, err)
	}

	// What the executor sent downstream, then the outcome.
	dispatch, err := o.c.RecordDispatch(ctx, client.DispatchRequest{ExecutionToken: &token, ClaimToken: claim.ClaimToken,
		RequestDigest: "sha256:" + strings.Repeat("ab", 32), Target: "https://psp.example/v1/refunds", DispatchedAt: s.now()})
	if err != nil || dispatch.GrantId != *d.GrantId || dispatch.DossierId != d.DossierId || dispatch.Target != "https://psp.example/v1/refunds" {
		t.Fatalf("dispatch %+v: %v", dispatch, err)
	}
	fin, err := o.c.Finalize(ctx, client.ExecutionFinalizeRequest{ExecutionToken: token, ClaimToken: claim.ClaimToken, Outcome: "COMMITTED"})
	if err != nil || fin.Outcome != "COMMITTED" || fin.GrantId != d.GrantId.String() {
		t.Fatalf("finalize %+v: %v", fin, err)
	}

	// A grant is claimed once: the refusal is a *Error that says so.
	_, err = o.c.Claim(ctx, client.ExecutionClaimTokenRequest{ExecutionToken: token, IntentHash: hash})
	e := wantCode(t, err, http.StatusConflict, "CLAIM_REPLAY")
	if e.ShouldExecute || !strings.Contains(string(e.Body), `"should_execute":false`) {
		t.Fatalf("a refused claim: %+v", e)
	}

	// Consume (the older name), INDETERMINATE, then reconciliation.
	d2 := s.bind(o, 200)
	claim2, err := o.c.Consume(ctx, client.ExecutionClaimTokenRequest{ExecutionToken: *d2.ExecutionToken, IntentHash: d2.IntentHash})
	if err != nil || !bool(claim2.ShouldExecute) || claim2.GrantId != d2.GrantId.String() {
		t.Fatalf("consume %+v: %v", claim2, err)
	}
	fin2, err := o.c.Finalize(ctx, client.ExecutionFinalizeRequest{ExecutionToken: *d2.ExecutionToken, ClaimToken: claim2.ClaimToken, Outcome: "INDETERMINATE"})
	if err != nil || fin2.Outcome != "INDETERMINATE" {
		t.Fatalf("finalize INDETERMINATE %+v: %v", fin2, err)
	}
	open, err := o.c.Indeterminate(ctx)
	if err != nil || len(open.Executions) != 1 || open.Executions[0].GrantId != d2.GrantId.String() {
		t.Fatalf("indeterminate %+v: %v", open, err)
	}
	settled, err := o.c.Reconcile(ctx, d2.GrantId.String(), client.ReconcileRequest{Resolution: "COMMITTED", Note: ptr("the PSP shows the refund")})
	if err != nil || settled.GrantId != d2.GrantId.String() || settled.State != "COMMITTED" {
		t.Fatalf("reconcile %+v: %v", settled, err)
	}
	if open, err := o.c.Indeterminate(ctx); err != nil || len(open.Executions) != 0 {
		t.Fatalf("after reconciliation %+v: %v", open, err)
	}
}

// A managed escalation: its status, a presence hint, its cancellation.
func TestExecutionManagedEscalation(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Escalating")
	o.publish(t, bandsBundle)
	ctx := t.Context()

	d, err := o.c.EnforceAndBind(ctx, client.ExecutionAuthorityRequest{SignedIntent: s.sign(o, intent{amount: 2500, managed: true})})
	if err != nil || d.Outcome != "ESCALATE" || d.ExecutionToken != nil || d.ManagedEscalation == nil {
		t.Fatalf("bind a managed escalation %+v: %v", d, err)
	}
	id := d.ManagedEscalation.EscalationId
	st, err := o.c.Escalation(ctx, id.String())
	if err != nil || st.EscalationId != id || st.Status != "PENDING_APPROVAL" || st.IntentHash != d.IntentHash || st.ApprovalRequestId == "" {
		t.Fatalf("escalation %+v: %v", st, err)
	}
	hinted, err := o.c.CompletePresence(ctx, client.PresenceAuthorityCompletion{EscalationId: id})
	if err != nil || hinted.EscalationId != id || hinted.Status != "PENDING_APPROVAL" || hinted.ExecutionToken != nil {
		t.Fatalf("a presence hint before the approval %+v: %v", hinted, err)
	}
	cancelled, err := o.c.CancelEscalation(ctx, id.String())
	if err != nil || cancelled.Status != "CANCELLED" {
		t.Fatalf("cancel %+v: %v", cancelled, err)
	}
	states := make([]string, 0, len(cancelled.Transitions))
	for _, tr := range cancelled.Transitions {
		states = append(states, string(tr.Status))
	}
	if !slices.Contains(states, "CANCELLED") {
		t.Fatalf("transitions %v", states)
	}
	_, err = o.c.Escalation(ctx, "01900000-0000-7000-8000-000000000000")
	wantCode(t, err, http.StatusNotFound, "ESCALATION_NOT_FOUND")
}
