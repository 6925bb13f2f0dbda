package clearance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// smallOnly allows amounts below 1,000; blockAll refuses everything. Both
// are ENFORCEMENT bundles of the same bundle id.
const (
	smallOnly = `{"bundle_id":"pay","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	blockAll = `{"bundle_id":"pay","version":"v2","mode":"ENFORCEMENT","rules":[],
 "default":{"outcome":"BLOCK","reason_codes":["FROZEN"]}}`
)

// pinnedIntent signs an execution intent for amount whose
// context.policy_version is pin ("" for none).
func (x *execEnv) pinnedIntent(t testing.TB, amount float64, pin string) string {
	t.Helper()
	m := x.intentMembers("pinned-", amount)
	if pin != "" {
		m["context"] = map[string]any{"policy_version": pin}
	}
	return x.sign(t, m)
}

// dossierPin reads the pin members of a decision's dossier.
func dossierPin(t testing.TB, e *clearance.Engine, orgID, dossierID string) (pin, active string) {
	t.Helper()
	r, err := e.Evidence.Dossier(context.Background(), orgID, dossierID)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Pin    string `json:"policy_pin"`
		Active string `json:"active_policy_version"`
	}
	if err := json.Unmarshal(r.Body, &d); err != nil {
		t.Fatal(err)
	}
	return d.Pin, d.Active
}

// A pin to a version other than the active one is evaluated and recorded,
// but never authorizes: the decision is SHADOW and no grant is bound.
func TestPinToInactiveVersionNeverAuthorizes(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, smallOnly)
	org := x.org.Org.ID
	if _, err := x.e.Policies.PublishBundle(ctx, org, []byte(blockAll)); err != nil {
		t.Fatal(err)
	}

	d, err := x.e.Evaluate(ctx, request(t, x.org, `{"amount":500,"context":{"policy_version":"v1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != policy.OutcomeAllow || d.PolicySnapshot.PolicyVersion != "v1" || d.Mode != policy.ModeShadow {
		t.Fatalf("pin to v1 while v2 is active: want v1's ALLOW recorded in SHADOW, got %s/%s under %s",
			d.Outcome, d.Mode, d.PolicySnapshot.PolicyVersion)
	}
	if pin, active := dossierPin(t, x.e, org, d.DossierID); pin != "v1" || active != "v2" {
		t.Fatalf("dossier pin members: policy_pin %q active_policy_version %q", pin, active)
	}

	b := x.bind(t, x.pinnedIntent(t, 500, "v1"))
	if b.ExecutionToken != "" || b.GrantID != "" || b.Mode != policy.ModeShadow || b.Outcome != policy.OutcomeAllow ||
		b.PolicySnapshot.PolicyVersion != "v1" {
		t.Fatalf("enforce-and-bind pinned to v1 while v2 is active: %+v", b)
	}
	if pin, active := dossierPin(t, x.e, org, b.DossierID); pin != "v1" || active != "v2" {
		t.Fatalf("bind dossier pin members: policy_pin %q active_policy_version %q", pin, active)
	}

	// A pin to the active version is an ordinary decision.
	d, err = x.e.Evaluate(ctx, request(t, x.org, `{"amount":500,"context":{"policy_version":"v2"}}`))
	if err != nil || d.Outcome != policy.OutcomeBlock || d.Mode != policy.ModeEnforcement {
		t.Fatalf("pin to the active version: %+v %v", d, err)
	}
	if pin, active := dossierPin(t, x.e, org, d.DossierID); pin != "" || active != "" {
		t.Fatalf("a pin to the active version is not noted: %q %q", pin, active)
	}
}

// staleActivation is a backend whose reads outside a transaction see the
// activation set in stale, as a request does that read the active version
// just before another activation committed; transactions see the truth.
type staleActivation struct {
	store.Backend
	stale atomic.Pointer[store.Activation]
}

func (s *staleActivation) Activation(ctx context.Context, orgID string) (store.Activation, error) {
	if a := s.stale.Load(); a != nil {
		return *a, nil
	}
	return s.Backend.Activation(ctx, orgID)
}

// TestActivationRacingAnAuthorization: an activation that commits between
// the evaluation of a request and its transaction wins. Neither a grant nor
// a claim commits under the version that stopped being active meanwhile.
func TestActivationRacingAnAuthorization(t *testing.T) {
	ctx := context.Background()
	var st *staleActivation
	x := newExecEnvOver(t, smallOnly, clearance.Options{}, func(b store.Backend) store.Backend {
		st = &staleActivation{Backend: b}
		return st
	})
	org := x.org.Org.ID
	v1, err := st.Activation(ctx, org)
	if err != nil || v1.Version != "v1" {
		t.Fatalf("activation after publishing v1: %+v %v", v1, err)
	}
	g := x.bind(t, x.pinnedIntent(t, 500, ""))
	if g.ExecutionToken == "" {
		t.Fatalf("v1 binds a grant: %+v", g)
	}
	if _, err := x.e.Policies.PublishBundle(ctx, org, []byte(blockAll)); err != nil {
		t.Fatal(err)
	}
	st.stale.Store(&v1) // the requests below read v1 as active; v2 committed since

	_, err = x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: org, SignedIntent: x.pinnedIntent(t, 500, "")})
	wantCode(t, "enforce-and-bind decided under v1 after v2 was activated", err, clearance.ErrConflict, clearance.CodeStaleAuthorization)
	_, err = x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: g.ExecutionToken, IntentHash: g.IntentHash})
	wantCode(t, "claim decided under v1 after v2 was activated", err, clearance.ErrConflict, clearance.CodeStaleAuthorization)

	// Once the activation is seen, the same grant is refused by v2 itself,
	// and activating v1 again lets it be claimed.
	st.stale.Store(nil)
	_, err = x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: g.ExecutionToken, IntentHash: g.IntentHash})
	wantCode(t, "claim under v2", err, clearance.ErrConflict, clearance.CodeStaleAuthorization)
	if _, err := x.e.Policies.ActivateBundle(ctx, clearance.ActivateRequest{OrgID: org, Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	if r, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: g.ExecutionToken, IntentHash: g.IntentHash}); err != nil || !r.ShouldExecute {
		t.Fatalf("claim after v1 is active again: %+v %v", r, err)
	}
}

// A claim re-evaluates under the version active at claim time, whatever the
// bound intent pins.
func TestClaimIgnoresThePin(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, smallOnly)
	org := x.org.Org.ID
	g := x.bind(t, x.pinnedIntent(t, 500, "v1"))
	if g.ExecutionToken == "" || g.Mode != policy.ModeEnforcement {
		t.Fatalf("a pin to the active version binds a grant: %+v", g)
	}
	if _, err := x.e.Policies.PublishBundle(ctx, org, []byte(blockAll)); err != nil {
		t.Fatal(err)
	}
	_, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: g.ExecutionToken, IntentHash: g.IntentHash})
	wantCode(t, "claim pinned to v1 after v2 was activated", err, clearance.ErrConflict, clearance.CodeStaleAuthorization)
}

// Activation is explicit: a staged version changes nothing, activating an
// older version rolls back, re-activating is idempotent, and every change
// is a ledger entry.
func TestActivateBundle(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, smallOnly)
	org := x.org.Org.ID

	staged, err := x.e.Policies.StageBundle(ctx, org, []byte(blockAll))
	if err != nil || !staged.Created || staged.Active {
		t.Fatalf("stage v2: %+v %v", staged, err)
	}
	b := x.bind(t, x.pinnedIntent(t, 500, ""))
	if b.ExecutionToken == "" || b.PolicySnapshot.PolicyVersion != "v1" {
		t.Fatalf("a staged version must not change decisions: %+v", b)
	}
	list, err := x.e.Policies.Bundles(ctx, org)
	if err != nil || len(list) != 2 || !list[0].Active || list[1].Active {
		t.Fatalf("bundles after staging: %+v %v", list, err)
	}

	head := ledgerHead(t, x)
	a, err := x.e.Policies.ActivateBundle(ctx, clearance.ActivateRequest{OrgID: org, Version: "v2"})
	if err != nil || !a.Changed || a.ActiveVersion != "v2" || a.PreviousVersion != "v1" || a.LedgerSeq != head+1 {
		t.Fatalf("activate v2: %+v %v", a, err)
	}
	_, err = x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: b.ExecutionToken, IntentHash: b.IntentHash})
	wantCode(t, "claim after v2 was activated", err, clearance.ErrConflict, clearance.CodeStaleAuthorization)
	if b := x.bind(t, x.pinnedIntent(t, 500, "")); b.ExecutionToken != "" || b.Outcome != policy.OutcomeBlock {
		t.Fatalf("v2 blocks everything: %+v", b)
	}

	head = ledgerHead(t, x)
	again, err := x.e.Policies.ActivateBundle(ctx, clearance.ActivateRequest{OrgID: org, Version: "v2"})
	if err != nil || again.Changed || again.ActiveVersion != "v2" || again.LedgerSeq != a.LedgerSeq {
		t.Fatalf("re-activating the active version: %+v %v", again, err)
	}
	if h := ledgerHead(t, x); h != head {
		t.Fatalf("re-activation moved the ledger head to %d", h)
	}

	// An expectation on the active version guards a change, not a no-op.
	_, err = x.e.Policies.ActivateBundle(ctx, clearance.ActivateRequest{OrgID: org, Version: "v1", ExpectedActiveVersion: "v1"})
	wantCode(t, "activation expecting the wrong active version", err, clearance.ErrConflict, clearance.CodeActiveVersionMismatch)
	if same, err := x.e.Policies.ActivateBundle(ctx, clearance.ActivateRequest{OrgID: org, Version: "v2", ExpectedActiveVersion: "v1"}); err != nil || same.Changed {
		t.Fatalf("a retried activation succeeds: %+v %v", same, err)
	}

	// Roll back on purpose.
	back, err := x.e.Policies.ActivateBundle(ctx, clearance.ActivateRequest{OrgID: org, Version: "v1", ExpectedActiveVersion: "v2"})
	if err != nil || !back.Changed || back.ActiveVersion != "v1" || back.PreviousVersion != "v2" {
		t.Fatalf("roll back to v1: %+v %v", back, err)
	}
	g := x.bind(t, x.pinnedIntent(t, 500, ""))
	if g.ExecutionToken == "" || g.PolicySnapshot.PolicyVersion != "v1" {
		t.Fatalf("after the rollback v1 grants again: %+v", g)
	}
	if c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: g.ExecutionToken, IntentHash: g.IntentHash}); err != nil || !c.ShouldExecute {
		t.Fatalf("claim under the rolled-back version: %+v %v", c, err)
	}

	_, err = x.e.Policies.ActivateBundle(ctx, clearance.ActivateRequest{OrgID: org, Version: "v9"})
	wantCode(t, "activate an unknown version", err, clearance.ErrNotFound, clearance.CodePolicyNotFound)
	other := newOrg(t, x.e)
	_, err = x.e.Policies.ActivateBundle(ctx, clearance.ActivateRequest{OrgID: other.Org.ID, Version: "v1"})
	wantCode(t, "activate another org's version", err, clearance.ErrNotFound, clearance.CodePolicyNotFound)

	page, err := x.e.Audit.Ledger(ctx, org, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var activations []string
	for _, en := range page.Entries {
		if en.Kind == ledger.KindPolicyActivated {
			activations = append(activations, en.SubjectID)
		}
	}
	if fmt.Sprint(activations) != "[v1 v2 v1]" {
		t.Fatalf("activation entries %v, want [v1 v2 v1]", activations)
	}
	if rep, err := x.e.Audit.VerifyLedger(ctx, org); err != nil || !rep.Valid {
		t.Fatalf("verify %+v %v", rep, err)
	}
}

// Staging the first version leaves the starter policy in force.
func TestStageFirstVersionKeepsStarter(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	o := newOrg(t, e)
	if _, err := e.Policies.StageBundle(ctx, o.Org.ID, []byte(smallOnly)); err != nil {
		t.Fatal(err)
	}
	d, err := e.Evaluate(ctx, request(t, o, `{"amount":5}`))
	if err != nil || d.PolicySnapshot.PolicyVersion != policy.Starter().Snapshot().PolicyVersion {
		t.Fatalf("staged first version: %+v %v", d, err)
	}
	d, err = e.Evaluate(ctx, request(t, o, `{"amount":5,"context":{"policy_version":"v1"}}`))
	if err != nil || d.PolicySnapshot.PolicyVersion != "v1" || d.Mode != policy.ModeShadow {
		t.Fatalf("pin to the staged version: %+v %v", d, err)
	}
	list, err := e.Policies.Bundles(ctx, o.Org.ID)
	if err != nil || len(list) != 1 || list[0].Active {
		t.Fatalf("bundles: %+v %v", list, err)
	}
}

// TestEvaluateUnderTheVersionActiveAtCommit: a server evaluates under the
// active version it saw last, without reading it from the store each time,
// yet records every decision under the version active when the decision
// commits: another server's activation in between makes it evaluate again.
func TestEvaluateUnderTheVersionActiveAtCommit(t *testing.T) {
	ctx := context.Background()
	var backend store.Backend
	x := newExecEnvOver(t, smallOnly, clearance.Options{}, func(b store.Backend) store.Backend { backend = b; return b })
	org := x.org.Org.ID
	other, err := clearance.Open(backend, clearance.Options{Now: func() time.Time { return time.Unix(0, x.now.Load()).UTC() }, GrantKeys: x.ring}) // a second server
	if err != nil {
		t.Fatal(err)
	}
	d, err := x.e.Evaluate(ctx, request(t, x.org, `{"amount":500}`))
	if err != nil || d.Outcome != policy.OutcomeAllow || d.PolicySnapshot.PolicyVersion != "v1" {
		t.Fatalf("under v1: %+v %v", d, err)
	}
	if _, err := other.Policies.PublishBundle(ctx, org, []byte(blockAll)); err != nil { // activates v2
		t.Fatal(err)
	}
	d, err = x.e.Evaluate(ctx, request(t, x.org, `{"amount":500}`))
	if err != nil || d.Outcome != policy.OutcomeBlock || d.PolicySnapshot.PolicyVersion != "v2" {
		t.Fatalf("after the other server activated v2: want v2's BLOCK, got %+v %v", d, err)
	}
	r, err := x.e.Evidence.Dossier(ctx, org, d.DossierID)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Snapshot struct {
			Version string `json:"policy_version"`
		} `json:"policy_snapshot"`
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Snapshot.Version != "v2" || body.Outcome != "BLOCK" {
		t.Fatalf("dossier: %+v %v; want v2's BLOCK recorded", body, err)
	}
	if _, err := other.Policies.ActivateBundle(ctx, clearance.ActivateRequest{OrgID: org, Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	if d, err = x.e.Evaluate(ctx, request(t, x.org, `{"amount":500}`)); err != nil || d.PolicySnapshot.PolicyVersion != "v1" {
		t.Fatalf("after the other server rolled back to v1: %+v %v", d, err)
	}
}
