package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/clearancehq/clearance/client"
)

// The execution routes through the Go client (package client) over real
// HTTP, on the e2e backend (Pebble or PostgreSQL): the agent's guarded
// cycle and every route it and its operators use.

// agentFor is the env's agent with a Go client of the env's org.
func (x *execEnv) agentFor(t *testing.T) (*client.Client, *client.Agent) {
	t.Helper()
	c, err := client.New(x.srv.URL, x.o.Key, client.WithHTTPClient(x.client))
	if err != nil {
		t.Fatal(err)
	}
	return c, &client.Agent{Client: c, Key: x.agent, OrgID: x.o.ID, Now: x.clock}
}

// refundIntent asks to refund amount EUR on its own concurrency scope.
func refundIntent(scope string, amount float64) client.ExecutionIntent {
	return client.ExecutionIntent{
		Actor:            client.Actor{Id: client.Ptr("agent-7"), Type: client.Ptr("agent")},
		Action:           client.Action{Type: client.Ptr("refund"), Amount: &amount, Currency: client.Ptr("EUR"), Target: client.Ptr("order-1")},
		WorkflowKey:      client.Ptr("refunds"),
		DecisionType:     client.Ptr("REFUND"),
		ConcurrencyScope: scope,
	}
}

func TestClientGuardedCycle(t *testing.T) {
	x := newExecEnv(t, bandsBundle)
	c, agent := x.agentFor(t)
	ctx := context.Background()

	keys, err := c.ListKeys(ctx, client.AgentKeys)
	if err != nil || !slices.ContainsFunc(keys.Keys, func(k client.RegisteredKey) bool { return k.Kid == x.agent.KID() }) {
		t.Fatalf("agent keys: %+v, %v", keys, err)
	}
	jwks, err := c.GrantJWKS(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("allowed: runs once, committed", func(t *testing.T) {
		var runs atomic.Int32
		effect := effectDigestOf("refund order-1")
		cyc, err := agent.Run(ctx, refundIntent("s-commit", 100), func(ctx context.Context, claim *client.ClaimResponse) (*client.EffectEvidence, error) {
			runs.Add(1)
			return &client.EffectEvidence{Kind: "psp.refund", Status: "CONFIRMED", EffectDigest: effect}, nil
		})
		if err != nil || runs.Load() != 1 || !cyc.Ran || cyc.Outcome != client.ExecutionFinalizeRequestOutcomeCOMMITTED {
			t.Fatalf("cycle %+v, runs %d, err %v", cyc, runs.Load(), err)
		}
		if cyc.Finalized == nil || cyc.Finalized.Outcome != "COMMITTED" || cyc.Finalized.GrantId != cyc.Decision.GrantId.String() {
			t.Fatalf("finalized %+v", cyc.Finalized)
		}
		// The grant is spent: claiming it again is refused, as an error with
		// the stable code.
		_, err = c.Claim(ctx, client.ExecutionClaimTokenRequest{ExecutionToken: *cyc.Decision.ExecutionToken, IntentHash: cyc.Decision.IntentHash})
		var e *client.Error
		if !errors.As(err, &e) || e.Status != http.StatusConflict || e.Code != "CLAIM_REPLAY" || e.ShouldExecute || !client.IsCode(err, "CLAIM_REPLAY") {
			t.Fatalf("second claim: %v", err)
		}
		// The downstream system checks the attestation offline, against the
		// request it is about to execute.
		want := client.AttestationCheck{Issuer: "clearance", Now: x.clock(), IntentHash: cyc.Decision.IntentHash,
			GrantID: cyc.Decision.GrantId.String(), OrgID: x.o.ID}
		a, err := client.VerifyAttestation(jwks, cyc.Claim.ClaimAttestation, want)
		if err != nil || a.Binding.Scope != "s-commit" || a.GrantId != cyc.Claim.GrantId {
			t.Fatalf("attestation: %+v, %v", a, err)
		}
		// Refused: tampered, another issuer, another request, another org, no
		// request named, the lease over.
		// One signature character changed (not the last two, whose low
		// bits are padding and which a fixed replacement can leave equal).
		tok := []byte(cyc.Claim.ClaimAttestation)
		i := len(tok) - 10
		tok[i] = map[bool]byte{true: 'B', false: 'A'}[tok[i] == 'A']
		bad := string(tok)
		for name, c := range map[string]struct {
			token string
			check func(*client.AttestationCheck)
		}{
			"tampered":        {bad, func(*client.AttestationCheck) {}},
			"issuer":          {cyc.Claim.ClaimAttestation, func(w *client.AttestationCheck) { w.Issuer = "other" }},
			"intent hash":     {cyc.Claim.ClaimAttestation, func(w *client.AttestationCheck) { w.IntentHash = effectDigestOf("another request") }},
			"org":             {cyc.Claim.ClaimAttestation, func(w *client.AttestationCheck) { w.OrgID = "another-org" }},
			"no intent hash":  {cyc.Claim.ClaimAttestation, func(w *client.AttestationCheck) { w.IntentHash = "" }},
			"lease over":      {cyc.Claim.ClaimAttestation, func(w *client.AttestationCheck) { w.Now = x.clock().Add(time.Hour) }},
			"grant as attest": {*cyc.Decision.ExecutionToken, func(*client.AttestationCheck) {}},
		} {
			w := want
			c.check(&w)
			if _, err := client.VerifyAttestation(jwks, c.token, w); !errors.Is(err, client.ErrAttestation) {
				t.Errorf("%s: %v", name, err)
			}
		}
	})

	t.Run("blocked: never runs", func(t *testing.T) {
		cyc, err := agent.Run(ctx, refundIntent("s-block", 20000), func(context.Context, *client.ClaimResponse) (*client.EffectEvidence, error) {
			t.Error("the action ran without a grant")
			return nil, nil
		})
		if !errors.Is(err, client.ErrNotGranted) || cyc.Ran || cyc.Decision == nil || cyc.Decision.Outcome != "BLOCK" || cyc.Claim != nil {
			t.Fatalf("cycle %+v, err %v", cyc, err)
		}
	})

	t.Run("action fails: FAILED", func(t *testing.T) {
		boom := errors.New("psp said no")
		cyc, err := agent.Run(ctx, refundIntent("s-fail", 100), func(context.Context, *client.ClaimResponse) (*client.EffectEvidence, error) {
			return nil, boom
		})
		if !errors.Is(err, boom) || cyc.Outcome != client.ExecutionFinalizeRequestOutcomeFAILED || cyc.Finalized == nil || cyc.Finalized.Outcome != "FAILED" {
			t.Fatalf("cycle %+v, err %v", cyc, err)
		}
	})

	t.Run("may have acted: INDETERMINATE", func(t *testing.T) {
		cyc, err := agent.Run(ctx, refundIntent("s-unknown", 100), func(context.Context, *client.ClaimResponse) (*client.EffectEvidence, error) {
			return nil, fmt.Errorf("psp read timeout after the request was sent: %w", client.ErrIndeterminate)
		})
		if !errors.Is(err, client.ErrIndeterminate) || cyc.Outcome != client.ExecutionFinalizeRequestOutcomeINDETERMINATE ||
			cyc.Finalized == nil || cyc.Finalized.Outcome != "INDETERMINATE" {
			t.Fatalf("cycle %+v, err %v", cyc, err)
		}
	})

	t.Run("the lease: too little left to start, outlived while running", func(t *testing.T) {
		late := *agent
		late.LeaseMargin = 31 * time.Second // more than the 30 s lease
		cyc, err := late.Run(ctx, refundIntent("s-late", 100), func(context.Context, *client.ClaimResponse) (*client.EffectEvidence, error) {
			t.Error("the action started with no time left to finalize")
			return nil, nil
		})
		if !errors.Is(err, client.ErrNoTimeToAct) || cyc.Ran || cyc.Finalized == nil || cyc.Finalized.Outcome != "FAILED" {
			t.Fatalf("cycle %+v, err %v", cyc, err)
		}
		slow := *agent
		slow.LeaseMargin = 30*time.Second - 100*time.Millisecond // the action's context ends 0.1 s after the claim
		cyc, err = slow.Run(ctx, refundIntent("s-slow", 100), func(ctx context.Context, _ *client.ClaimResponse) (*client.EffectEvidence, error) {
			<-ctx.Done() // a slow refund, cut off at the lease's end
			return nil, nil
		})
		if !errors.Is(err, client.ErrIndeterminate) || !cyc.Ran || cyc.Outcome != client.ExecutionFinalizeRequestOutcomeINDETERMINATE {
			t.Fatalf("cycle %+v, err %v", cyc, err)
		}
	})

	t.Run("panic and cancel: INDETERMINATE, then reconciled", func(t *testing.T) {
		func() {
			defer func() {
				if p := recover(); p != "crashed mid-refund" {
					t.Fatalf("panic not raised again: %v", p)
				}
			}()
			in := refundIntent("s-panic", 100)
			in.IntentId = "intent-panic"
			_, _ = agent.Run(ctx, in, func(context.Context, *client.ClaimResponse) (*client.EffectEvidence, error) {
				panic("crashed mid-refund")
			})
		}()
		cctx, cancel := context.WithCancel(ctx)
		cancelled, err := agent.Run(cctx, refundIntent("s-cancel", 100), func(context.Context, *client.ClaimResponse) (*client.EffectEvidence, error) {
			cancel() // the caller gives up while the refund is in flight
			return nil, nil
		})
		if !errors.Is(err, context.Canceled) || cancelled.Outcome != client.ExecutionFinalizeRequestOutcomeINDETERMINATE ||
			cancelled.Finalized == nil || cancelled.Finalized.Outcome != "INDETERMINATE" {
			t.Fatalf("cancelled cycle %+v, err %v", cancelled, err)
		}
		list, err := c.Indeterminate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		panicked := ""
		for _, g := range list.Executions {
			ids = append(ids, g.GrantId)
			if g.IntentId == "intent-panic" {
				panicked = g.GrantId
			}
		}
		if panicked == "" || !slices.Contains(ids, cancelled.Decision.GrantId.String()) {
			t.Fatalf("grants waiting for reconciliation: %v", ids)
		}
		if g, err := c.Reconcile(ctx, panicked, client.ReconcileRequest{Resolution: "FAILED", Note: client.Ptr("no refund at the PSP")}); err != nil || g.GrantId != panicked {
			t.Fatalf("reconcile: %+v, %v", g, err)
		}
	})
}

func TestClientExecutionRoutes(t *testing.T) {
	x := newExecEnv(t, bandsBundle)
	c, agent := x.agentFor(t)
	ctx := context.Background()

	signed, err := agent.Prepare(refundIntent("s-routes", 100))
	if err != nil {
		t.Fatal(err)
	}
	jws, err := client.SignIntent(agent.Key, signed)
	if err != nil {
		t.Fatal(err)
	}
	var got client.Response
	d, err := c.EnforceAndBind(ctx, client.ExecutionAuthorityRequest{SignedIntent: jws}, client.WithCorrelationID("run-1"), client.Received(&got))
	if err != nil || d.ExecutionToken == nil || got.Header.Get("X-Correlation-Id") != "run-1" {
		t.Fatalf("enforce-and-bind: %+v, %v", d, err)
	}
	st, err := c.VerifyToken(ctx, client.ExecutionTokenRequest{ExecutionToken: *d.ExecutionToken, IntentHash: d.IntentHash})
	if err != nil || !st.Valid || st.GrantId != d.GrantId.String() {
		t.Fatalf("verify-token: %+v, %v", st, err)
	}
	claim, err := c.Consume(ctx, client.ExecutionClaimTokenRequest{ExecutionToken: *d.ExecutionToken, IntentHash: d.IntentHash})
	if err != nil || !bool(claim.ShouldExecute) {
		t.Fatalf("consume-token: %+v, %v", claim, err)
	}
	disp, err := c.RecordDispatch(ctx, client.DispatchRequest{ExecutionToken: d.ExecutionToken, ClaimToken: claim.ClaimToken,
		DispatchedAt: x.clock(), RequestDigest: effectDigestOf("POST /refunds order-1"), Target: "psp.example/refunds"})
	if err != nil || disp.GrantId != *d.GrantId || disp.Target != "psp.example/refunds" {
		t.Fatalf("dispatch: %+v, %v", disp, err)
	}
	f, err := c.Finalize(ctx, client.ExecutionFinalizeRequest{ExecutionToken: *d.ExecutionToken, ClaimToken: claim.ClaimToken, Outcome: client.ExecutionFinalizeRequestOutcomeCOMMITTED})
	if err != nil || f.Outcome != "COMMITTED" || f.EffectConfirmed {
		t.Fatalf("finalize-token: %+v, %v", f, err)
	}

	// Keys: a provider key registered, listed, revoked.
	prov := mustKey(t, 9)
	reg := client.AgentKeyRegistration(prov)
	reg.Iss = client.Ptr("psp.example")
	if k, err := c.RegisterKey(ctx, client.ProviderKeys, reg); err != nil || k.Kid != prov.KID() {
		t.Fatalf("register provider key: %+v, %v", k, err)
	}
	if l, err := c.ListKeys(ctx, client.ProviderKeys); err != nil || !slices.ContainsFunc(l.Keys, func(k client.RegisteredKey) bool { return k.Kid == prov.KID() }) {
		t.Fatalf("list provider keys: %+v, %v", l, err)
	}
	if k, err := c.RevokeKey(ctx, client.ProviderKeys, prov.KID()); err != nil || k.Kid != prov.KID() {
		t.Fatalf("revoke provider key: %+v, %v", k, err)
	}

	// Refusals are errors with their codes.
	if _, err := c.Escalation(ctx, "00000000-0000-4000-8000-000000000000"); !is404(err) {
		t.Fatalf("unknown escalation: %v", err)
	}
	if _, err := c.CancelEscalation(ctx, "00000000-0000-4000-8000-000000000000"); !is404(err) {
		t.Fatalf("cancel unknown escalation: %v", err)
	}
	if _, err := c.CompletePresence(ctx, client.PresenceAuthorityCompletion{EscalationId: uuid.MustParse("00000000-0000-4000-8000-000000000000")}); !is404(err) {
		t.Fatalf("presence of unknown escalation: %v", err)
	}
	gates, err := c.SpendGates(ctx)
	if err != nil || len(gates.SpendGates) != 0 {
		t.Fatalf("spend gates: %+v, %v", gates, err)
	}
	if _, err := c.SpendGate(ctx, "none"); !is404(err) {
		t.Fatalf("unknown spend gate: %v", err)
	}
	if _, err := c.SpendReservation(ctx, d.GrantId.String()); !is404(err) {
		t.Fatalf("reservation of a grant no gate charged: %v", err)
	}
	_, err = c.EnforceAndBind(ctx, client.ExecutionAuthorityRequest{SignedIntent: "not.a.jws"})
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Code == "" || e.RequestID == "" {
		t.Fatalf("bad intent: %v", err)
	}
}

func is404(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound && e.Code != "" && strings.Contains(e.Error(), e.Code)
}
