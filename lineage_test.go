package clearance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// escalateBand: below 1,000 ALLOW, from 1,000 ESCALATE, from 10,000 BLOCK,
// in ENFORCEMENT.
const escalateBand = `{"bundle_id":"lineage","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"esc","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"ESCALATE","reason_codes":["MID"]},
 {"id":"big","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// wantCode fails unless err is an engine error of kind with code.
func wantCode(t *testing.T, what string, err, kind error, code string) {
	t.Helper()
	var ee *clearance.Error
	if !errors.Is(err, kind) || !errors.As(err, &ee) || ee.Code != code {
		t.Fatalf("%s: got %v, want %v %s", what, err, kind, code)
	}
}

// decide evaluates body in org o with a correlation id and a parent.
func (x *execEnv) decide(t *testing.T, body, corr, parent string) clearance.Decision {
	t.Helper()
	d, err := x.e.Evaluate(context.Background(), decideRequest(t, x.org.Org.ID, body, corr, parent))
	if err != nil {
		t.Fatalf("evaluate %s: %v", body, err)
	}
	return d
}

func decideRequest(t *testing.T, org, body, corr, parent string) clearance.EvaluateRequest {
	t.Helper()
	if parent != "" {
		body = `{"parent_decision_id":"` + parent + `",` + body[1:]
	}
	return clearance.EvaluateRequest{OrgID: org, Route: clearance.RouteEvaluateDecision, Body: []byte(body),
		CorrelationID: corr}
}

// storedDossier decodes the org's dossier.
func (x *execEnv) storedDossier(t *testing.T, id string) (clearance.Dossier, string) {
	t.Helper()
	r, err := x.e.Evidence.Dossier(context.Background(), x.org.Org.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	var d clearance.Dossier
	if err := json.Unmarshal(r.Body, &d); err != nil {
		t.Fatal(err)
	}
	return d, r.Digest
}

// signed signs an execution intent of amount with extra members.
func (x *execEnv) signed(t *testing.T, amount float64, extra map[string]any) string {
	t.Helper()
	m := x.intentMembers("lineage-", amount)
	for k, v := range extra {
		m[k] = v
	}
	return x.sign(t, m)
}

func memberIDs(ch clearance.DecisionChain) []string {
	out := make([]string, len(ch.Members))
	for i, m := range ch.Members {
		out[i] = m.DecisionID
	}
	return out
}

func TestChainJoinRule(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, escalateBand)
	org := x.org.Org.ID
	const body = `{"workflow_key":"ap","amount":5}`

	root := x.decide(t, body, "", "")
	if root.ChainID != clearance.RootChainID(org, root.DecisionID) || root.ParentDecisionID != "" {
		t.Fatalf("a decision without parent or correlation starts its own chain: %+v", root)
	}
	x.advance(time.Millisecond)
	child := x.decide(t, `{"workflow_key":"other","amount":1500}`, "", root.DecisionID)
	x.advance(time.Millisecond)
	// A parent wins over a correlation id.
	both := x.decide(t, body, "order-1", child.DecisionID)
	if child.ChainID != root.ChainID || both.ChainID != root.ChainID || child.ParentDecisionID != root.DecisionID {
		t.Fatalf("children join the parent's chain: root %s, child %s, both %s", root.ChainID, child.ChainID, both.ChainID)
	}
	dos, digest := x.storedDossier(t, child.DossierID)
	if dos.ChainID != root.ChainID || dos.ParentDecisionID != root.DecisionID || digest != child.DossierDigest {
		t.Fatalf("the dossier records chain and parent: %+v", dos)
	}

	x.advance(time.Millisecond)
	c1 := x.decide(t, body, "order-1", "")
	x.advance(time.Millisecond)
	c2 := x.decide(t, `{"workflow_key":"ap","amount":20000}`, "order-1", "")
	otherWF := x.decide(t, `{"workflow_key":"ar","amount":5}`, "order-1", "")
	if c1.ChainID != clearance.CorrelationChainID(org, "ap", "order-1") || c2.ChainID != c1.ChainID {
		t.Fatalf("one correlation chain per (org, workflow, correlation): %s %s", c1.ChainID, c2.ChainID)
	}
	if otherWF.ChainID == c1.ChainID || otherWF.ChainID != clearance.CorrelationChainID(org, "ar", "order-1") {
		t.Fatalf("another workflow is another chain: %s", otherWF.ChainID)
	}

	ch, err := x.e.Evidence.Chain(ctx, org, root.ChainID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := memberIDs(ch), []string{root.DecisionID, child.DecisionID, both.DecisionID}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("members %v, want %v (by created_at, ledger_seq)", got, want)
	}
	if ch.Count != 3 || ch.Head.DecisionID != both.DecisionID || ch.OrgID != org || ch.Truncated {
		t.Fatalf("chain %+v", ch)
	}
	m := ch.Members[1]
	if m.EvaluationID != child.EvaluationID || m.DossierID != child.DossierID || m.DossierDigest != child.DossierDigest ||
		m.Outcome != policy.OutcomeEscalate || m.Mode != policy.ModeEnforcement || m.LedgerSeq != child.LedgerSeq ||
		m.ParentDecisionID != root.DecisionID || m.WorkflowKey != "other" || m.CreatedAt != child.CreatedAt {
		t.Fatalf("member %+v of %+v", m, child)
	}
	byEval, err := x.e.Evidence.ChainByEvaluation(ctx, org, child.EvaluationID)
	if err != nil || byEval.ChainID != root.ChainID || byEval.Count != 3 {
		t.Fatalf("by evaluation: %+v %v", byEval, err)
	}
	corr, err := x.e.Evidence.ChainByEvaluation(ctx, org, c2.EvaluationID)
	if err != nil || fmt.Sprint(memberIDs(corr)) != fmt.Sprint([]string{c1.DecisionID, c2.DecisionID}) || corr.Members[1].CorrelationID != "order-1" {
		t.Fatalf("correlation chain: %+v %v", corr, err)
	}

	// Parents must be decisions of the org.
	other := newOrg(t, x.e)
	foreign, err := x.e.Evaluate(ctx, decideRequest(t, other.Org.ID, body, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	head := ledgerHead(t, x)
	for _, c := range []struct {
		name, parent string
		kind         error
		code         string
	}{
		{"unknown parent", "01900000-0000-7000-8000-000000000000", clearance.ErrConflict, clearance.CodeParentDecisionUnknown},
		{"another org's decision", foreign.DecisionID, clearance.ErrConflict, clearance.CodeParentDecisionUnknown},
		{"a dossier id is not a decision id", root.DossierID, clearance.ErrConflict, clearance.CodeParentDecisionUnknown},
		{"not a UUID", "parent-1", clearance.ErrInvalidRequest, clearance.CodeInvalidParentDecision},
		{"uppercase UUID", strings.ToUpper(root.DecisionID), clearance.ErrInvalidRequest, clearance.CodeInvalidParentDecision},
	} {
		_, err := x.e.Evaluate(ctx, decideRequest(t, org, body, "", c.parent))
		wantCode(t, c.name, err, c.kind, c.code)
	}
	if got := ledgerHead(t, x); got != head {
		t.Fatalf("refused decisions moved the ledger %d -> %d", head, got)
	}

	// Chains never cross orgs; malformed ids name nothing.
	for _, c := range []struct{ name, org, id string }{
		{"another org's chain", other.Org.ID, root.ChainID},
		{"a chain from another org's view", org, foreign.ChainID},
		{"unknown chain", org, "01900000-0000-7000-8000-000000000000"},
		{"not a UUID", org, "chain-1"},
	} {
		_, err := x.e.Evidence.Chain(ctx, c.org, c.id)
		wantCode(t, c.name, err, clearance.ErrNotFound, clearance.CodeChainNotFound)
	}
	_, err = x.e.Evidence.ChainByEvaluation(ctx, other.Org.ID, child.EvaluationID)
	wantCode(t, "another org's evaluation", err, clearance.ErrNotFound, clearance.CodeChainNotFound)
	_, err = x.e.Evidence.ChainByEvaluation(ctx, org, child.DecisionID)
	wantCode(t, "a decision id is not an evaluation id", err, clearance.ErrNotFound, clearance.CodeChainNotFound)
}

func ledgerHead(t *testing.T, x *execEnv) uint64 {
	t.Helper()
	p, err := x.e.Audit.Ledger(context.Background(), x.org.Org.ID, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return p.Head.Seq
}

func TestChainReplayAddsNoMember(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, escalateBand)
	r := decideRequest(t, x.org.Org.ID, `{"amount":5}`, "corr-1", "")
	r.IdempotencyKey = "k-1"
	first, err := x.e.Evaluate(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	again, err := x.e.Evaluate(ctx, r)
	if err != nil || !again.Replayed || again.ChainID != first.ChainID || again.DecisionID != first.DecisionID {
		t.Fatalf("replay %+v %v", again, err)
	}
	ch, err := x.e.Evidence.Chain(ctx, x.org.Org.ID, first.ChainID)
	if err != nil || ch.Count != 1 {
		t.Fatalf("a replay is not a new member: %+v %v", ch, err)
	}
}

func TestEnforceAndBindJoinsChains(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, escalateBand)
	org := x.org.Org.ID
	parent := x.decide(t, `{"workflow_key":"refunds","amount":5}`, "", "")
	d := x.bind(t, x.signed(t, 10, map[string]any{"parent_decision_id": parent.DecisionID}))
	if d.ExecutionToken == "" || d.ChainID != parent.ChainID || d.ParentDecisionID != parent.DecisionID {
		t.Fatalf("a signed intent naming a parent joins its chain: %+v", d)
	}
	dos, _ := x.storedDossier(t, d.DossierID)
	if dos.ChainID != parent.ChainID || dos.ParentDecisionID != parent.DecisionID || dos.GrantID != d.GrantID {
		t.Fatalf("dossier %+v", dos)
	}
	ch, err := x.e.Evidence.Chain(ctx, org, parent.ChainID)
	if err != nil || ch.Count != 2 || ch.Head.GrantID != d.GrantID || ch.Head.Route != string(clearance.RouteEnforceAndBind) {
		t.Fatalf("chain %+v %v", ch, err)
	}
	// Correlation from the request (X-Correlation-Id on the wire).
	c, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: org, SignedIntent: x.signed(t, 10, nil), CorrelationID: "run-9"})
	if err != nil || c.ChainID != clearance.CorrelationChainID(org, "refunds", "run-9") {
		t.Fatalf("correlation chain: %+v %v", c, err)
	}
	for _, tc := range []struct {
		name, parent string
		kind         error
		code         string
	}{
		{"unknown parent", "01900000-0000-7000-8000-000000000000", clearance.ErrConflict, clearance.CodeParentDecisionUnknown},
		{"malformed parent", "p-1", clearance.ErrInvalidRequest, clearance.CodeIntentMalformed},
	} {
		_, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: org,
			SignedIntent: x.signed(t, 10, map[string]any{"parent_decision_id": tc.parent})})
		wantCode(t, tc.name, err, tc.kind, tc.code)
	}
}

func TestOverrides(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, escalateBand)
	org := x.org.Org.ID
	esc := x.bind(t, x.signed(t, 1500, nil))
	if esc.Outcome != policy.OutcomeEscalate || esc.ExecutionToken != "" {
		t.Fatalf("want a non-authorizing ESCALATE: %+v", esc)
	}
	_, dossierDigest := x.storedDossier(t, esc.DossierID)
	allow := x.bind(t, x.signed(t, 10, map[string]any{"parent_decision_id": esc.DecisionID}))
	req := clearance.OverrideRequest{OrgID: org, DossierID: esc.DossierID, Resolution: clearance.OverrideApproved,
		Actor: clearance.OverrideActor{ID: "alice@example.com", Type: "human"}, Note: "called the customer\nok", ReasonCode: "CUSTOMER_VERIFIED",
		IdempotencyKey: "ov-1", Principal: clearance.Principal{KeyID: "key-1"}}
	head := ledgerHead(t, x)
	o, err := x.e.Evidence.RecordOverride(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if o.DecisionOutcome != policy.OutcomeEscalate || o.DecisionID != esc.DecisionID || o.DossierDigest != dossierDigest ||
		o.LedgerSeq != head+1 || o.CredentialID != "key-1" || o.Replayed {
		t.Fatalf("override %+v", o)
	}
	// Exactly one ledger entry, carrying the digest of the stored body.
	p, err := x.e.Audit.Ledger(ctx, org, head, 10)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := canon.DigestValue(o)
	if len(p.Entries) != 1 || p.Entries[0].Kind != ledger.KindOverride || p.Entries[0].SubjectID != o.OverrideID || p.Entries[0].PayloadDigest != want {
		t.Fatalf("ledger after the override: %+v (want digest %s)", p.Entries, want)
	}
	// Replay, and the same key with another body.
	again, err := x.e.Evidence.RecordOverride(ctx, req)
	if err != nil || !again.Replayed || again.OverrideID != o.OverrideID {
		t.Fatalf("replay %+v %v", again, err)
	}
	reuse := req
	reuse.Resolution = clearance.OverrideRejected
	_, err = x.e.Evidence.RecordOverride(ctx, reuse)
	wantCode(t, "key reused", err, clearance.ErrConflict, clearance.CodeIdempotencyKeyReused)
	// A second resolution joins the trail.
	reuse.IdempotencyKey = ""
	second, err := x.e.Evidence.RecordOverride(ctx, reuse)
	if err != nil {
		t.Fatal(err)
	}
	trail, err := x.e.Evidence.Overrides(ctx, org, esc.DossierID)
	if err != nil || len(trail.Overrides) != 2 || trail.Overrides[0].OverrideID != o.OverrideID || trail.Overrides[1].OverrideID != second.OverrideID ||
		trail.Outcome != policy.OutcomeEscalate || trail.DecisionID != esc.DecisionID {
		t.Fatalf("trail %+v %v", trail, err)
	}
	if d, _ := canon.DigestValue(trail.Overrides[0]); d != want {
		t.Fatalf("the listed override is not the ledgered one: %s vs %s", d, want)
	}

	// An override is never authority: the ESCALATE answer stays as it was,
	// no grant appeared, and the dossier is untouched.
	replayed := x.bind(t, x.signed(t, 1500, nil))
	if replayed.ExecutionToken != "" || replayed.Outcome != policy.OutcomeEscalate {
		t.Fatalf("after an approval the same action is still ESCALATE: %+v", replayed)
	}
	if _, d := x.storedDossier(t, esc.DossierID); d != dossierDigest {
		t.Fatal("the override changed the dossier")
	}
	ch, err := x.e.Evidence.Chain(ctx, org, esc.ChainID)
	if err != nil || ch.Count != 2 {
		t.Fatalf("overrides are not chain members: %+v %v", ch, err)
	}
	// The grant issued in the same chain claims exactly as it would have.
	c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: allow.ExecutionToken, IntentHash: allow.IntentHash})
	if err != nil || !c.ShouldExecute {
		t.Fatalf("claim after an override elsewhere: %+v %v", c, err)
	}
	rep, err := x.e.Audit.VerifyLedger(ctx, org)
	if err != nil || !rep.Valid {
		t.Fatalf("ledger %+v %v", rep, err)
	}

	// Refusals change nothing.
	head = ledgerHead(t, x)
	bad := func(mut func(r *clearance.OverrideRequest)) clearance.OverrideRequest {
		r := req
		r.IdempotencyKey = ""
		mut(&r)
		return r
	}
	other := newOrg(t, x.e)
	for _, c := range []struct {
		name string
		req  clearance.OverrideRequest
		kind error
		code string
	}{
		{"ALLOW dossier", bad(func(r *clearance.OverrideRequest) { r.DossierID = allow.DossierID }), clearance.ErrConflict, clearance.CodeOverrideNotApplicable},
		{"unknown dossier", bad(func(r *clearance.OverrideRequest) { r.DossierID = "01900000-0000-7000-8000-000000000000" }), clearance.ErrNotFound, clearance.CodeDossierNotFound},
		{"another org", bad(func(r *clearance.OverrideRequest) { r.OrgID = other.Org.ID }), clearance.ErrNotFound, clearance.CodeDossierNotFound},
		{"resolution", bad(func(r *clearance.OverrideRequest) { r.Resolution = "MAYBE" }), clearance.ErrInvalidRequest, clearance.CodeInvalidOverride},
		{"lower-case resolution", bad(func(r *clearance.OverrideRequest) { r.Resolution = "approved" }), clearance.ErrInvalidRequest, clearance.CodeInvalidOverride},
		{"no actor id", bad(func(r *clearance.OverrideRequest) { r.Actor.ID = "" }), clearance.ErrInvalidRequest, clearance.CodeInvalidOverride},
		{"no actor type", bad(func(r *clearance.OverrideRequest) { r.Actor.Type = "" }), clearance.ErrInvalidRequest, clearance.CodeInvalidOverride},
		{"NUL in actor id", bad(func(r *clearance.OverrideRequest) { r.Actor.ID = "a\x00b" }), clearance.ErrInvalidRequest, clearance.CodeInvalidOverride},
		{"C1 in note", bad(func(r *clearance.OverrideRequest) { r.Note = "a\u0085b" }), clearance.ErrInvalidRequest, clearance.CodeInvalidOverride},
		{"long note", bad(func(r *clearance.OverrideRequest) { r.Note = string(make([]byte, 2001)) }), clearance.ErrInvalidRequest, clearance.CodeInvalidOverride},
		{"reason code", bad(func(r *clearance.OverrideRequest) { r.ReasonCode = "not snake" }), clearance.ErrInvalidRequest, clearance.CodeInvalidOverride},
		{"key", bad(func(r *clearance.OverrideRequest) { r.IdempotencyKey = "a b" }), clearance.ErrInvalidRequest, clearance.CodeInvalidIdempotencyKey},
	} {
		_, err := x.e.Evidence.RecordOverride(ctx, c.req)
		wantCode(t, c.name, err, c.kind, c.code)
	}
	if got := ledgerHead(t, x); got != head {
		t.Fatalf("refused overrides moved the ledger %d -> %d", head, got)
	}
	_, err = x.e.Evidence.Overrides(ctx, other.Org.ID, esc.DossierID)
	wantCode(t, "another org's trail", err, clearance.ErrNotFound, clearance.CodeDossierNotFound)
	if empty, err := x.e.Evidence.Overrides(ctx, org, allow.DossierID); err != nil || len(empty.Overrides) != 0 || empty.Overrides == nil {
		t.Fatalf("an ALLOW dossier has an empty trail: %+v %v", empty, err)
	}
}

func TestDispatches(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, escalateBand)
	org := x.org.Org.ID
	d := x.bind(t, x.signed(t, 10, nil))
	_, dossierDigest := x.storedDossier(t, d.DossierID)
	dispatch := func(mut func(r *clearance.DispatchRequest)) (clearance.Dispatch, error) {
		r := clearance.DispatchRequest{OrgID: org, ExecutionToken: d.ExecutionToken, RequestDigest: effectDigest("POST /refunds"),
			Target: "https://psp.example/refunds", DispatchedAt: "2026-11-01T13:00:00+01:00"}
		mut(&r)
		return x.e.Execution.RecordDispatch(ctx, r)
	}
	_, err := dispatch(func(r *clearance.DispatchRequest) { r.ClaimToken = "clr_claim_x" })
	wantCode(t, "before the claim", err, clearance.ErrConflict, "GRANT_NOT_CLAIMED")

	c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
	if err != nil {
		t.Fatal(err)
	}
	head := ledgerHead(t, x)
	first, err := dispatch(func(r *clearance.DispatchRequest) { r.ClaimToken = c.ClaimToken; r.IdempotencyKey = "dsp-1" })
	if err != nil {
		t.Fatal(err)
	}
	if first.GrantID != d.GrantID || first.DossierID != d.DossierID || first.DecisionID != d.DecisionID ||
		first.DispatchedAt != "2026-11-01T12:00:00Z" || first.LedgerSeq != head+1 || first.ClaimTokenDigest != effectDigest(c.ClaimToken) {
		t.Fatalf("dispatch %+v", first)
	}
	p, err := x.e.Audit.Ledger(ctx, org, head, 10)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := canon.DigestValue(first)
	if len(p.Entries) != 1 || p.Entries[0].Kind != ledger.KindDispatched || p.Entries[0].SubjectID != first.DispatchID || p.Entries[0].PayloadDigest != want {
		t.Fatalf("ledger after the dispatch: %+v", p.Entries)
	}
	again, err := dispatch(func(r *clearance.DispatchRequest) { r.ClaimToken = c.ClaimToken; r.IdempotencyKey = "dsp-1" })
	if err != nil || !again.Replayed || again.DispatchID != first.DispatchID {
		t.Fatalf("replay %+v %v", again, err)
	}
	// By grant id alone, a retry downstream.
	second, err := dispatch(func(r *clearance.DispatchRequest) {
		r.ExecutionToken, r.GrantID, r.ClaimToken, r.Target = "", d.GrantID, c.ClaimToken, "https://psp.example/refunds?retry=1"
	})
	if err != nil {
		t.Fatal(err)
	}
	list, err := x.e.Execution.Dispatches(ctx, org, d.DossierID)
	if err != nil || len(list.Dispatches) != 2 || list.Dispatches[0].DispatchID != first.DispatchID ||
		list.Dispatches[1].DispatchID != second.DispatchID || list.GrantID != d.GrantID || list.GrantState != "CLAIMED" {
		t.Fatalf("dispatches %+v %v", list, err)
	}
	if _, got := x.storedDossier(t, d.DossierID); got != dossierDigest {
		t.Fatal("a dispatch changed the dossier")
	}

	head = ledgerHead(t, x)
	other := newOrg(t, x.e)
	for _, tc := range []struct {
		name string
		mut  func(r *clearance.DispatchRequest)
		kind error
		code string
	}{
		{"another claim token", func(r *clearance.DispatchRequest) { r.ClaimToken = "clr_claim_other" }, clearance.ErrConflict, "CLAIM_TOKEN_MISMATCH"},
		{"no claim token", func(r *clearance.DispatchRequest) {}, clearance.ErrInvalidRequest, clearance.CodeInvalidDispatch},
		{"no grant", func(r *clearance.DispatchRequest) { r.ExecutionToken, r.ClaimToken = "", c.ClaimToken }, clearance.ErrInvalidRequest, clearance.CodeInvalidDispatch},
		{"bad digest", func(r *clearance.DispatchRequest) { r.ClaimToken, r.RequestDigest = c.ClaimToken, "md5:00" }, clearance.ErrInvalidRequest, clearance.CodeInvalidDispatch},
		{"no target", func(r *clearance.DispatchRequest) { r.ClaimToken, r.Target = c.ClaimToken, "" }, clearance.ErrInvalidRequest, clearance.CodeInvalidDispatch},
		{"C1 in target", func(r *clearance.DispatchRequest) { r.ClaimToken, r.Target = c.ClaimToken, "a\u0085b" }, clearance.ErrInvalidRequest, clearance.CodeInvalidDispatch},
		{"bad time", func(r *clearance.DispatchRequest) { r.ClaimToken, r.DispatchedAt = c.ClaimToken, "yesterday" }, clearance.ErrInvalidRequest, clearance.CodeInvalidDispatch},
		{"grant id and token disagree", func(r *clearance.DispatchRequest) {
			r.ClaimToken, r.GrantID = c.ClaimToken, "01900000-0000-7000-8000-000000000000"
		}, clearance.ErrInvalidRequest, clearance.CodeInvalidDispatch},
		{"unknown grant", func(r *clearance.DispatchRequest) {
			r.ExecutionToken, r.ClaimToken, r.GrantID = "", c.ClaimToken, "01900000-0000-7000-8000-000000000000"
		}, clearance.ErrNotFound, "GRANT_NOT_FOUND"},
		{"malformed grant id", func(r *clearance.DispatchRequest) {
			r.ExecutionToken, r.ClaimToken, r.GrantID = "", c.ClaimToken, "g-1"
		}, clearance.ErrNotFound, "GRANT_NOT_FOUND"},
		{"another org, by token", func(r *clearance.DispatchRequest) { r.OrgID, r.ClaimToken = other.Org.ID, c.ClaimToken }, clearance.ErrNotFound, "GRANT_NOT_FOUND"},
		{"another org, by id", func(r *clearance.DispatchRequest) {
			r.OrgID, r.ExecutionToken, r.GrantID, r.ClaimToken = other.Org.ID, "", d.GrantID, c.ClaimToken
		}, clearance.ErrNotFound, "GRANT_NOT_FOUND"},
		{"tampered token", func(r *clearance.DispatchRequest) {
			r.ClaimToken, r.ExecutionToken = c.ClaimToken, d.ExecutionToken+"x"
		}, clearance.ErrConflict, clearance.CodeGrantInvalid},
	} {
		_, err := dispatch(tc.mut)
		wantCode(t, tc.name, err, tc.kind, tc.code)
	}
	if got := ledgerHead(t, x); got != head {
		t.Fatalf("refused dispatches moved the ledger %d -> %d", head, got)
	}

	// The lease boundary (store clock), then a finalized grant.
	x.advance(clearance.DefaultClaimLease)
	_, err = dispatch(func(r *clearance.DispatchRequest) { r.ClaimToken = c.ClaimToken })
	wantCode(t, "at the lease boundary", err, clearance.ErrConflict, "CLAIM_LEASE_EXPIRED")
	d2 := x.bind(t, x.signed(t, 10, nil))
	c2, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: d2.ExecutionToken, IntentHash: d2.IntentHash})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: org, ExecutionToken: d2.ExecutionToken, ClaimToken: c2.ClaimToken, Outcome: "FAILED"}); err != nil {
		t.Fatal(err)
	}
	_, err = dispatch(func(r *clearance.DispatchRequest) { r.ExecutionToken, r.ClaimToken = d2.ExecutionToken, c2.ClaimToken })
	wantCode(t, "finalized", err, clearance.ErrConflict, "ALREADY_FINALIZED")

	// A decision without a grant lists none; another org sees nothing.
	esc := x.bind(t, x.signed(t, 1500, nil))
	if l, err := x.e.Execution.Dispatches(ctx, org, esc.DossierID); err != nil || l.GrantID != "" || l.Dispatches == nil || len(l.Dispatches) != 0 {
		t.Fatalf("no grant, no dispatches: %+v %v", l, err)
	}
	_, err = x.e.Execution.Dispatches(ctx, other.Org.ID, d.DossierID)
	wantCode(t, "another org's dossier", err, clearance.ErrNotFound, clearance.CodeDossierNotFound)
	rep, err := x.e.Audit.VerifyLedger(ctx, org)
	if err != nil || !rep.Valid {
		t.Fatalf("ledger %+v %v", rep, err)
	}
}

func TestChainIDsAreNameBasedUUIDs(t *testing.T) {
	org, dec := "01900000-0000-7000-8000-000000000001", "01900000-0000-7000-8000-000000000002"
	long := strings.Repeat("w", 300) // beyond the stack buffer
	for _, c := range []struct{ got, name string }{
		{clearance.RootChainID(org, dec), "decision\x00" + org + "\x00" + dec},
		{clearance.CorrelationChainID(org, "ap", "run-1"), "correlation\x00" + org + "\x00ap\x00run-1"},
		{clearance.CorrelationChainID(org, "", "run-1"), "correlation\x00" + org + "\x00\x00run-1"},
		{clearance.CorrelationChainID(org, long, "run-1"), "correlation\x00" + org + "\x00" + long + "\x00run-1"},
	} {
		if want := uuid.NewSHA1(clearance.ChainNamespace, []byte(c.name)).String(); c.got != want || !clearance.ValidID(c.got) {
			t.Errorf("%q: %s, want %s", c.name, c.got, want)
		}
	}
}

// countingBackend counts the artifact puts of every Update, by kind.
type countingBackend struct {
	store.Backend
	mu   *sync.Mutex
	puts map[string]int
}

func (b countingBackend) Update(ctx context.Context, orgID string, fn func(tx store.Tx) error) error {
	return b.Backend.Update(ctx, orgID, func(tx store.Tx) error { return fn(countingTx{tx, b}) })
}

type countingTx struct {
	store.Tx
	b countingBackend
}

func (t countingTx) PutArtifact(ctx context.Context, r artifact.Record) error {
	t.b.mu.Lock()
	t.b.puts[r.Kind]++
	t.b.mu.Unlock()
	return t.Tx.PutArtifact(ctx, r)
}

func (b countingBackend) take() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := maps.Clone(b.puts)
	clear(b.puts)
	return out
}

// A decision costs its chain exactly one write, in its own transaction,
// and a replay none.
func TestOneChainWritePerDecision(t *testing.T) {
	ctx := context.Background()
	now, clock := testClock()
	b := countingBackend{Backend: openPebble(t, clock), mu: &sync.Mutex{}, puts: map[string]int{}}
	x := execEnvOver(t, b, now)
	e := x.e
	b.take()
	r := decideRequest(t, x.org.Org.ID, `{"amount":5}`, "corr", "")
	r.IdempotencyKey = "once"
	for i, want := range []map[string]int{{clearance.KindChainMember: 1}, {}} { // then a replay
		if _, err := e.Evaluate(ctx, r); err != nil {
			t.Fatal(err)
		}
		if got := b.take(); !maps.Equal(got, want) {
			t.Fatalf("evaluate %d: artifact puts %v, want %v", i, got, want)
		}
	}
	if d := x.bind(t, x.signed(t, 10, nil)); d.ExecutionToken == "" {
		t.Fatalf("want a grant: %+v", d)
	}
	if got := b.take(); !maps.Equal(got, map[string]int{clearance.KindChainMember: 1}) {
		t.Fatalf("enforce-and-bind: artifact puts %v", got)
	}
}

// testClock is the clock of an engine and its store: 2026-11-01 12:00 UTC
// until moved.
func testClock() (*atomic.Int64, func() time.Time) {
	now := &atomic.Int64{}
	now.Store(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return now, func() time.Time { return time.Unix(0, now.Load()).UTC() }
}

func openPebble(t *testing.T, clock func() time.Time) store.Backend {
	t.Helper()
	pb, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pb.Close() })
	return pb
}

// execEnvOver is newExecEnv (escalateBand, agent key) over backend b,
// whose clock is now's.
func execEnvOver(t *testing.T, b store.Backend, now *atomic.Int64) *execEnv {
	t.Helper()
	ctx := context.Background()
	x := &execEnv{now: now}
	signing, _ := grant.KeyFromSeed(seed(1))
	x.ring = grant.NewKeyRing(signing)
	var err error
	x.e, err = clearance.Open(b, clearance.Options{GrantKeys: x.ring, Now: func() time.Time { return time.Unix(0, now.Load()).UTC() }})
	if err != nil {
		t.Fatal(err)
	}
	x.org = newOrg(t, x.e)
	x.agent, _ = grant.KeyFromSeed(seed(2))
	jwk, _ := json.Marshal(x.agent.PublicJWK())
	if _, _, err := x.e.Admin.RegisterKey(ctx, x.org.Org.ID, registry.KindAgent, registry.Registration{KID: x.agent.KID(), PublicJWK: jwk}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.e.Policies.PublishBundle(ctx, x.org.Org.ID, []byte(escalateBand)); err != nil {
		t.Fatal(err)
	}
	return x
}

// The ledger binds overrides and dispatches like dossiers: a stored record
// rewritten behind the engine's back breaks verification at its entry.
func TestVerifyLedgerChecksOverridesAndDispatches(t *testing.T) {
	for _, kind := range []string{clearance.KindOverride, clearance.KindDispatch} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			now, clock := testClock()
			b := openPebble(t, clock)
			x := execEnvOver(t, b, now)
			org := x.org.Org.ID
			var id string
			var seq uint64
			if kind == clearance.KindOverride {
				esc := x.bind(t, x.signed(t, 1500, nil))
				o, err := x.e.Evidence.RecordOverride(ctx, clearance.OverrideRequest{OrgID: org, DossierID: esc.DossierID,
					Resolution: clearance.OverrideRejected, Actor: clearance.OverrideActor{ID: "alice", Type: "human"}})
				if err != nil {
					t.Fatal(err)
				}
				id, seq = o.OverrideID, o.LedgerSeq
			} else {
				d := x.bind(t, x.signed(t, 10, nil))
				c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
				if err != nil {
					t.Fatal(err)
				}
				dp, err := x.e.Execution.RecordDispatch(ctx, clearance.DispatchRequest{OrgID: org, GrantID: d.GrantID, ClaimToken: c.ClaimToken,
					RequestDigest: effectDigest("req"), Target: "alice", DispatchedAt: "2026-11-01T12:00:00Z"})
				if err != nil {
					t.Fatal(err)
				}
				id, seq = dp.DispatchID, dp.LedgerSeq
			}
			x.advance(time.Second)
			x.decide(t, `{"amount":5}`, "", "") // a later entry
			if rep, err := x.e.Audit.VerifyLedger(ctx, org); err != nil || !rep.Valid {
				t.Fatalf("before: %+v %v", rep, err)
			}
			rec, err := b.Artifact(ctx, org, kind, id)
			if err != nil {
				t.Fatal(err)
			}
			rec.Body = bytes.Replace(rec.Body, []byte(`"alice"`), []byte(`"mallory"`), 1)
			if err := b.Update(ctx, org, func(tx store.Tx) error { return tx.PutArtifact(ctx, rec) }); err != nil {
				t.Fatal(err)
			}
			rep, err := x.e.Audit.VerifyLedger(ctx, org)
			if err != nil || rep.Valid || rep.FirstBrokenSeq != seq || rep.Reason != clearance.ReasonRecordDigestMismatch ||
				!strings.HasPrefix(rep.Detail, kind+" "+id) {
				t.Fatalf("after rewriting the %s at seq %d: %+v %v", kind, seq, rep, err)
			}
		})
	}
}
