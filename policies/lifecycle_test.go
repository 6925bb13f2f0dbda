package policies_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/signals"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// lifecycle is an engine on an in-memory Pebble with one org and a clock
// the test moves.
type lifecycle struct {
	t      testing.TB
	ctx    context.Context
	engine *clearance.Engine
	org    string
	mu     sync.Mutex
	now    time.Time
}

func newLifecycle(t testing.TB, opts clearance.Options) *lifecycle {
	t.Helper()
	backend, err := pebblestore.Open("", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	x := &lifecycle{t: t, ctx: context.Background(), now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	opts.Now = x.clock
	x.engine, err = clearance.Open(backend, opts)
	if err != nil {
		t.Fatal(err)
	}
	org, err := x.engine.Admin.CreateOrg(x.ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	x.org = org.Org.ID
	return x
}

func (x *lifecycle) clock() time.Time {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.now
}

func (x *lifecycle) advance(d time.Duration) {
	x.mu.Lock()
	x.now = x.now.Add(d)
	x.mu.Unlock()
}

// limitBundle blocks amounts at or above limit for workflow "ap", escalates
// "payroll" above 5,000 and allows the rest.
func limitBundle(version string, limit int) []byte {
	return fmt.Appendf(nil, `{"bundle_id":"pay","version":%q,"mode":"ENFORCEMENT","rules":[
 {"id":"big-ap","workflow_keys":["ap"],"match":[{"field":"amount","op":"ge","value":%d}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]},
 {"id":"payroll","workflow_keys":["payroll"],"match":[{"field":"amount","op":"gt","value":5000}],"outcome":"ESCALATE","reason_codes":["PAYROLL_REVIEW"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`, version, limit)
}

func (x *lifecycle) code(err error) string {
	x.t.Helper()
	var ce *clearance.Error
	if !errors.As(err, &ce) {
		x.t.Fatalf("want a *clearance.Error, got %v", err)
	}
	return ce.Code
}

func (x *lifecycle) evaluate(body string) decide.Decision {
	x.t.Helper()
	d, err := x.engine.Decide.Evaluate(x.ctx, decide.EvaluateRequest{OrgID: x.org, Route: decide.RouteEvaluateDecision, Body: []byte(body)})
	if err != nil {
		x.t.Fatalf("evaluate %s: %v", body, err)
	}
	return d
}

func TestDraftLifecycle(t *testing.T) {
	x := newLifecycle(t, clearance.Options{})
	p := x.engine.Policies

	d, created, err := p.PutDraft(x.ctx, policies.DraftRequest{OrgID: x.org, Name: "next", Raw: limitBundle("v2", 500)})
	if err != nil || !created || d.Revision != 1 || d.Bundle == nil || d.Bundle.Version != "v2" {
		t.Fatalf("create: %+v created=%v err=%v", d, created, err)
	}
	d, created, err = p.PutDraft(x.ctx, policies.DraftRequest{OrgID: x.org, Name: "next", Raw: limitBundle("v2", 700), ExpectedRevision: 1})
	if err != nil || created || d.Revision != 2 {
		t.Fatalf("update: %+v created=%v err=%v", d, created, err)
	}
	_, _, err = p.PutDraft(x.ctx, policies.DraftRequest{OrgID: x.org, Name: "next", Raw: limitBundle("v2", 900), ExpectedRevision: 1})
	if x.code(err) != policies.CodeDraftRevisionMismatch {
		t.Fatalf("stale revision: %v", err)
	}
	// Refused bodies change nothing.
	for name, raw := range map[string]string{
		"unknown member": `{"bundle_id":"b","version":"1","mode":"SHADOW","rules":[],"default":{"outcome":"ALLOW","reason_codes":[]},"extra":1}`,
		"duplicate":      `{"bundle_id":"b","bundle_id":"c"}`,
		"not json":       `{`,
		"wrong type":     `{"rules":5}`,
	} {
		if _, _, err := p.PutDraft(x.ctx, policies.DraftRequest{OrgID: x.org, Name: "next", Raw: []byte(raw)}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, _, err := p.PutDraft(x.ctx, policies.DraftRequest{OrgID: x.org, Name: "bad name!", Raw: limitBundle("v2", 1)}); x.code(err) != clearance.CodeInvalidRequest {
		t.Fatalf("bad name: %v", err)
	}
	got, err := p.Draft(x.ctx, x.org, "next")
	if err != nil || got.Revision != 2 {
		t.Fatalf("draft after refusals: %+v %v", got, err)
	}

	// A draft with semantic problems is kept; validating it lists them all.
	x.advance(time.Second)
	broken := `{"bundle_id":"","version":"v3","mode":"LOUD","rules":[{"id":"a","outcome":"MAYBE","reason_codes":[]},{"id":"a","when":"intent.amount >","outcome":"ALLOW","reason_codes":["X"]}],"default":{"outcome":"ALLOW","reason_codes":[]}}`
	if _, _, err := p.PutDraft(x.ctx, policies.DraftRequest{OrgID: x.org, Name: "broken", Raw: []byte(broken)}); err != nil {
		t.Fatal(err)
	}
	_, err = p.ValidateDraft(x.ctx, x.org, "broken")
	var ce *clearance.Error
	if !errors.As(err, &ce) || ce.Code != clearance.CodePolicyInvalid || len(ce.Fields) < 5 {
		t.Fatalf("validate broken: %v (fields %d)", err, len(ce.Fields))
	}
	fields := map[string]bool{}
	for _, f := range ce.Fields {
		fields[f.Field] = true
	}
	for _, want := range []string{"bundle_id", "mode", "rules[0].outcome", "rules[1].id", "rules[1].when"} {
		if !fields[want] {
			t.Errorf("validation does not list %s: %+v", want, ce.Fields)
		}
	}
	v, err := p.ValidateDraft(x.ctx, x.org, "next")
	if err != nil || !v.Valid || v.RuleCount != 2 || v.Digest == "" {
		t.Fatalf("validate next: %+v %v", v, err)
	}

	list, err := p.Drafts(x.ctx, x.org)
	if err != nil || len(list) != 2 || list[0].Name != "next" || list[1].Name != "broken" || list[0].Bundle != nil {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := p.DeleteDraft(x.ctx, x.org, "broken", 5); x.code(err) != policies.CodeDraftRevisionMismatch {
		t.Fatalf("delete stale: %v", err)
	}
	if err := p.DeleteDraft(x.ctx, x.org, "broken", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Draft(x.ctx, x.org, "broken"); x.code(err) != policies.CodeDraftNotFound {
		t.Fatalf("deleted draft read: %v", err)
	}
	if err := p.DeleteDraft(x.ctx, x.org, "broken", 0); x.code(err) != policies.CodeDraftNotFound {
		t.Fatalf("second delete: %v", err)
	}

	// Drafts are never evaluated in production: a pin cannot name one.
	if _, err := p.Resolve(x.ctx, x.org, "next"); x.code(err) != policies.CodePolicyPinUnknown {
		t.Fatalf("pin to a draft: %v", err)
	}

	// Diff a published version against the draft.
	if _, err := p.PublishBundle(x.ctx, x.org, limitBundle("v1", 500)); err != nil {
		t.Fatal(err)
	}
	cmp, err := p.Diff(x.ctx, x.org, "v1", "draft:next")
	if err != nil || len(cmp.RulesChanged) != 1 || cmp.RulesChanged[0].RuleID != "big-ap" || cmp.Identical {
		t.Fatalf("diff: %+v %v", cmp, err)
	}
	if _, err := p.Diff(x.ctx, x.org, "v1", "draft:gone"); x.code(err) != policies.CodeDraftNotFound {
		t.Fatalf("diff unknown draft: %v", err)
	}

	// A promotion whose expectation fails changes nothing.
	_, err = p.PromoteDraft(x.ctx, policies.PromoteRequest{OrgID: x.org, Name: "next", Activate: true, ExpectedActiveVersion: "v0"})
	if x.code(err) != policies.CodeActiveVersionMismatch {
		t.Fatalf("promote with a wrong expectation: %v", err)
	}
	if _, err := p.Bundle(x.ctx, x.org, "v2"); x.code(err) != policies.CodePolicyNotFound {
		t.Fatalf("v2 published by a refused promotion: %v", err)
	}
	head := x.ledgerHead()
	pr, err := p.PromoteDraft(x.ctx, policies.PromoteRequest{OrgID: x.org, Name: "next", Activate: true, ExpectedActiveVersion: "v1", ExpectedRevision: 2})
	if err != nil || !pr.Created || pr.Published.Version != "v2" || pr.Activation == nil || !pr.Activation.Changed ||
		pr.Activation.PreviousVersion != "v1" || !pr.Published.Active {
		t.Fatalf("promote: %+v %v", pr, err)
	}
	kinds := x.ledgerKindsAfter(head)
	if !slices.Equal(kinds, []string{ledger.KindPolicyPublished, ledger.KindPolicyActivated}) {
		t.Fatalf("promotion ledgered %v", kinds)
	}
	if _, err := p.Draft(x.ctx, x.org, "next"); x.code(err) != policies.CodeDraftNotFound {
		t.Fatalf("promoted draft still there: %v", err)
	}
	res, err := p.Resolve(x.ctx, x.org, "")
	if err != nil || res.Active.Snapshot().PolicyVersion != "v2" {
		t.Fatalf("active after promotion: %v", err)
	}
	// The name can be used again: a new draft, revisions counting on.
	d, created, err = p.PutDraft(x.ctx, policies.DraftRequest{OrgID: x.org, Name: "next", Raw: limitBundle("v3", 100)})
	if err != nil || !created || d.Revision != 3 {
		t.Fatalf("recreate: %+v %v %v", d, created, err)
	}
	// Staging a promotion keeps v2 active.
	pr, err = p.PromoteDraft(x.ctx, policies.PromoteRequest{OrgID: x.org, Name: "next", Activate: false})
	if err != nil || pr.Activation != nil || pr.Published.Active {
		t.Fatalf("stage promotion: %+v %v", pr, err)
	}
	if res, _ := p.Resolve(x.ctx, x.org, ""); res.Active.Snapshot().PolicyVersion != "v2" {
		t.Fatal("a staged promotion activated")
	}
}

func (x *lifecycle) ledgerHead() uint64 {
	x.t.Helper()
	page, err := x.engine.Audit.Ledger(x.ctx, x.org, 0, 1)
	if err != nil {
		x.t.Fatal(err)
	}
	return page.Head.Seq
}

func (x *lifecycle) ledgerKindsAfter(seq uint64) []string {
	x.t.Helper()
	page, err := x.engine.Audit.Ledger(x.ctx, x.org, seq, 100)
	if err != nil {
		x.t.Fatal(err)
	}
	var kinds []string
	for _, e := range page.Entries {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

// recorded is one decision the replay test made, with what the test
// itself computes for it.
type recorded struct {
	dossierID, workflow string
	amount              int
	outcome             string
}

// expectedOutcome is the test's own reading of limitBundle, independent of
// the policy package.
func expectedOutcome(workflow string, amount, limit int) string {
	switch {
	case workflow == "ap" && amount >= limit:
		return "BLOCK"
	case workflow == "payroll" && amount > 5000:
		return "ESCALATE"
	}
	return "ALLOW"
}

func (x *lifecycle) recordDecisions(n int) []recorded {
	x.t.Helper()
	var out []recorded
	workflows := []string{"ap", "payroll", "travel"}
	for i := range n {
		wf := workflows[i%3]
		amount := (i * 137) % 10_000
		d := x.evaluate(fmt.Sprintf(`{"decision_type":"PAYMENT","workflow_key":%q,"amount":%d}`, wf, amount))
		out = append(out, recorded{dossierID: d.DossierID, workflow: wf, amount: amount, outcome: string(d.Outcome)})
		x.advance(time.Second)
	}
	return out
}

func TestReplayMatchesAnIndependentRecount(t *testing.T) {
	x := newLifecycle(t, clearance.Options{})
	p := x.engine.Policies
	if _, err := p.PublishBundle(x.ctx, x.org, limitBundle("v1", 5000)); err != nil {
		t.Fatal(err)
	}
	from := x.clock()
	decisions := x.recordDecisions(90)
	to := x.clock()
	for _, r := range decisions {
		if want := expectedOutcome(r.workflow, r.amount, 5000); r.outcome != want {
			t.Fatalf("recorded %s for %s %d, the test expects %s", r.outcome, r.workflow, r.amount, want)
		}
	}
	if _, _, err := p.PutDraft(x.ctx, policies.DraftRequest{OrgID: x.org, Name: "tight", Raw: limitBundle("v2", 1000)}); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"draft":"tight","from":%q,"to":%q,"examples":100}`, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	rp, queued, err := p.StartReplay(x.ctx, x.org, []byte(body))
	if err != nil || queued || rp.Status != policies.ReplayDone || rp.Result == nil {
		t.Fatalf("replay: %+v queued=%v err=%v", rp, queued, err)
	}
	res := rp.Result

	// The recount: each decision under the new limit, by the test's rule.
	changed, byDir, byWF := 0, map[string]int{}, map[string]int{}
	changedIDs := map[string]bool{}
	for _, r := range decisions {
		if now := expectedOutcome(r.workflow, r.amount, 1000); now != r.outcome {
			changed++
			byDir[r.outcome+"->"+now]++
			byWF[r.workflow]++
			changedIDs[r.dossierID] = true
		}
	}
	if changed == 0 {
		t.Fatal("the test's data changes nothing: it proves nothing")
	}
	if res.Total != len(decisions) || res.Replayed != len(decisions) || res.Skipped != 0 {
		t.Fatalf("total %d replayed %d skipped %d, want %d", res.Total, res.Replayed, res.Skipped, len(decisions))
	}
	if res.Changed != changed || res.Unchanged != len(decisions)-changed || res.MoreRestrictive != changed || res.LessRestrictive != 0 {
		t.Fatalf("changed %d (more %d less %d), the recount says %d", res.Changed, res.MoreRestrictive, res.LessRestrictive, changed)
	}
	for dir, n := range byDir {
		if res.ByDirection[dir] != n {
			t.Errorf("direction %s: %d, recount %d", dir, res.ByDirection[dir], n)
		}
	}
	for wf, n := range byWF {
		if res.ByWorkflow[wf].Changed != n {
			t.Errorf("workflow %s: %d changed, recount %d", wf, res.ByWorkflow[wf].Changed, n)
		}
	}
	if res.ByDecisionType["PAYMENT"].Changed != changed || res.ByDecisionType["PAYMENT"].Replayed != len(decisions) {
		t.Errorf("by decision type: %+v", res.ByDecisionType["PAYMENT"])
	}
	if len(res.Examples) != changed {
		t.Fatalf("%d examples, %d changed (all fit under 100)", len(res.Examples), changed)
	}
	for _, e := range res.Examples {
		if !changedIDs[e.DossierID] || e.Replayed.Outcome != "BLOCK" || e.Recorded.Outcome != "ALLOW" {
			t.Errorf("example %+v is not a recounted change", e)
		}
	}

	// The same version replayed changes nothing.
	rp, _, err = p.StartReplay(x.ctx, x.org, fmt.Appendf(nil, `{"version":"v1","from":%q,"to":%q}`, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano)))
	if err != nil || rp.Result.Changed != 0 || rp.Result.ReasonCodesChanged != 0 || rp.Result.Replayed != len(decisions) {
		t.Fatalf("replaying the recorded version: %+v %v", rp.Result, err)
	}
	// A window that holds nothing.
	rp, _, err = p.StartReplay(x.ctx, x.org, fmt.Appendf(nil, `{"version":"v1","from":%q,"to":%q}`, to.Add(time.Hour).Format(time.RFC3339), to.Add(2*time.Hour).Format(time.RFC3339)))
	if err != nil || rp.Result.Total != 0 {
		t.Fatalf("empty window: %+v %v", rp, err)
	}
	got, err := p.Replay(x.ctx, x.org, rp.ReplayID)
	if err != nil || got.Status != policies.ReplayDone {
		t.Fatalf("read replay: %+v %v", got, err)
	}
	for name, raw := range map[string]string{
		"no from":         `{"version":"v1"}`,
		"bad from":        `{"version":"v1","from":"yesterday"}`,
		"empty window":    fmt.Sprintf(`{"version":"v1","from":%q,"to":%q}`, to.Format(time.RFC3339), from.Format(time.RFC3339)),
		"both":            fmt.Sprintf(`{"version":"v1","draft":"tight","from":%q}`, from.Format(time.RFC3339)),
		"unknown member":  fmt.Sprintf(`{"version":"v1","from":%q,"all":true}`, from.Format(time.RFC3339)),
		"examples > 100":  fmt.Sprintf(`{"version":"v1","from":%q,"examples":101}`, from.Format(time.RFC3339)),
		"unknown version": fmt.Sprintf(`{"version":"v9","from":%q}`, from.Format(time.RFC3339)),
		"unknown draft":   fmt.Sprintf(`{"draft":"nope","from":%q}`, from.Format(time.RFC3339)),
	} {
		if _, _, err := p.StartReplay(x.ctx, x.org, []byte(raw)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestReplayQueuedAsAJob(t *testing.T) {
	x := newLifecycle(t, clearance.Options{ReplayInlineLimit: 10})
	p := x.engine.Policies
	if _, err := p.PublishBundle(x.ctx, x.org, limitBundle("v1", 5000)); err != nil {
		t.Fatal(err)
	}
	from := x.clock()
	decisions := x.recordDecisions(30)
	body := fmt.Appendf(nil, `{"version":"v1","from":%q}`, from.Format(time.RFC3339Nano))
	if _, _, err := p.PutDraft(x.ctx, policies.DraftRequest{OrgID: x.org, Name: "tight", Raw: limitBundle("v2", 1000)}); err != nil {
		t.Fatal(err)
	}
	body = fmt.Appendf(nil, `{"draft":"tight","from":%q}`, from.Format(time.RFC3339Nano))
	rp, queued, err := p.StartReplay(x.ctx, x.org, body)
	if err != nil || !queued || rp.Status != policies.ReplayQueued || rp.Total != len(decisions) {
		t.Fatalf("queued replay: %+v queued=%v err=%v", rp, queued, err)
	}
	// The draft changes after the replay was asked: the job replays what was asked.
	if _, _, err := p.PutDraft(x.ctx, policies.DraftRequest{OrgID: x.org, Name: "tight", Raw: limitBundle("v2", 1)}); err != nil {
		t.Fatal(err)
	}
	n, err := p.ProcessReplays(x.ctx)
	if err != nil || n != 1 {
		t.Fatalf("process: %d %v", n, err)
	}
	got, err := p.Replay(x.ctx, x.org, rp.ReplayID)
	if err != nil || got.Status != policies.ReplayDone || got.Result == nil || got.Processed != len(decisions) {
		t.Fatalf("after the job: %+v %v", got, err)
	}
	want := 0
	for _, r := range decisions {
		if expectedOutcome(r.workflow, r.amount, 1000) != r.outcome {
			want++
		}
	}
	if got.Result.Changed != want {
		t.Fatalf("job counted %d changes, the recount %d", got.Result.Changed, want)
	}
	if n, _ := p.ProcessReplays(x.ctx); n != 0 {
		t.Fatalf("a finished replay ran again (%d)", n)
	}
}

func TestReproduceAndExplain(t *testing.T) {
	x := newLifecycle(t, clearance.Options{})
	p := x.engine.Policies
	if _, err := p.PublishBundle(x.ctx, x.org, limitBundle("v1", 1000)); err != nil {
		t.Fatal(err)
	}
	d := x.evaluate(`{"decision_type":"PAYMENT","workflow_key":"ap","amount":5000}`)
	if d.Outcome != "BLOCK" {
		t.Fatalf("decided %s", d.Outcome)
	}
	r, err := p.Reproduce(x.ctx, x.org, d.DossierID)
	if err != nil || !r.Matches || r.Reproduced.Outcome != "BLOCK" || !slices.Equal(r.Reproduced.ReasonCodes, d.ReasonCodes) {
		t.Fatalf("reproduce: %+v %v", r, err)
	}
	// Under a newer active version the dossier still reproduces under its own.
	if _, err := p.PublishBundle(x.ctx, x.org, limitBundle("v2", 10_000)); err != nil {
		t.Fatal(err)
	}
	if r, err := p.Reproduce(x.ctx, x.org, d.DossierID); err != nil || !r.Matches || r.PolicyVersion != "v1" {
		t.Fatalf("reproduce after activation: %+v %v", r, err)
	}
	xp, err := p.ExplainDossier(x.ctx, x.org, d.DossierID, nil)
	if err != nil || xp.Outcome != "BLOCK" || xp.PolicyVersion != "v1" {
		t.Fatalf("explain: %+v %v", xp, err)
	}
	var flipped bool
	for _, f := range xp.Flips {
		if f.Field == "amount" && f.Op == "lt" && f.Outcome == "ALLOW" && fmt.Sprint(f.Value) == "1000" {
			flipped = true
		}
	}
	if !flipped {
		t.Fatalf("no flip amount < 1000 → ALLOW in %+v", xp.Flips)
	}
	// Explained under the newer version: a replayed decision.
	xp, err = p.ExplainDossier(x.ctx, x.org, d.DossierID, &policies.Candidate{Version: "v2"})
	if err != nil || xp.Outcome != "ALLOW" || xp.Recorded.Outcome != "BLOCK" || xp.Candidate == nil {
		t.Fatalf("explain under v2: %+v %v", xp, err)
	}
	if _, err := p.Reproduce(x.ctx, x.org, "00000000-0000-4000-8000-000000000000"); x.code(err) != clearance.CodeDossierNotFound {
		t.Fatalf("unknown dossier: %v", err)
	}
	if _, err := p.Reproduce(x.ctx, x.org, "../etc"); x.code(err) != clearance.CodeDossierNotFound {
		t.Fatalf("malformed id: %v", err)
	}
}

func TestDryRunRecordsNothing(t *testing.T) {
	x := newLifecycle(t, clearance.Options{})
	p := x.engine.Policies
	if _, err := p.PublishBundle(x.ctx, x.org, limitBundle("v1", 1000)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.PutDraft(x.ctx, policies.DraftRequest{OrgID: x.org, Name: "loose", Raw: limitBundle("v2", 100_000)}); err != nil {
		t.Fatal(err)
	}
	head := x.ledgerHead()
	body := []byte(`{"decision_type":"PAYMENT","workflow_key":"ap","amount":5000}`)
	req := clearance.DryRunRequest{EvaluateRequest: clearance.EvaluateRequest{OrgID: x.org, Route: clearance.RouteEvaluateDecision, Body: body}}
	dr, err := x.engine.DryRun(x.ctx, req, nil)
	if err != nil || !dr.DryRun || dr.Authorizes || dr.ShouldExecute || dr.Outcome != "BLOCK" || dr.Mode != "ENFORCEMENT" {
		t.Fatalf("dry run: %+v %v", dr, err)
	}
	req.Explain = true
	dr, err = x.engine.DryRun(x.ctx, req, &clearance.PolicyCandidate{Draft: "loose"})
	if err != nil || dr.Outcome != "ALLOW" || dr.Mode != "SHADOW" || dr.Explanation == nil || dr.PolicySnapshot.PolicyVersion != "v2" {
		t.Fatalf("dry run under a draft: %+v %v", dr, err)
	}
	req.Body = []byte(`{"amount":5000,"amount":1}`)
	if _, err := x.engine.DryRun(x.ctx, req, nil); x.code(err) != "DUPLICATE_MEMBER" {
		t.Fatalf("duplicate member: %v", err)
	}
	// Every dossier has its ledger entry: an unmoved head is no dossier.
	if x.ledgerHead() != head {
		t.Fatal("a dry run wrote to the ledger")
	}
}

func TestActiveReplaysAreBounded(t *testing.T) {
	x := newLifecycle(t, clearance.Options{ReplayInlineLimit: 2})
	p := x.engine.Policies
	if _, err := p.PublishBundle(x.ctx, x.org, limitBundle("v1", 5000)); err != nil {
		t.Fatal(err)
	}
	from := x.clock()
	x.recordDecisions(5)
	body := fmt.Appendf(nil, `{"version":"v1","from":%q}`, from.Format(time.RFC3339Nano))
	for i := range policies.MaxActiveReplays {
		if _, queued, err := p.StartReplay(x.ctx, x.org, body); err != nil || !queued {
			t.Fatalf("replay %d: queued=%v %v", i, queued, err)
		}
	}
	if _, _, err := p.StartReplay(x.ctx, x.org, body); x.code(err) != policies.CodeReplayLimit {
		t.Fatalf("one replay too many: %v", err)
	}
	// A window answered at once is never refused.
	small := fmt.Appendf(nil, `{"version":"v1","from":%q,"to":%q}`, from.Format(time.RFC3339Nano), from.Add(time.Second).Format(time.RFC3339Nano))
	if r, queued, err := p.StartReplay(x.ctx, x.org, small); err != nil || queued || r.Status != policies.ReplayDone {
		t.Fatalf("inline replay at the limit: %+v %v", r, err)
	}
	if n, err := p.ProcessReplays(x.ctx); err != nil || n != policies.MaxActiveReplays {
		t.Fatalf("processed %d: %v", n, err)
	}
	if _, queued, err := p.StartReplay(x.ctx, x.org, body); err != nil || !queued {
		t.Fatalf("after the jobs ended: queued=%v %v", queued, err)
	}
}

// A policy that reads inbound signals is replayed with the signals each
// decision recorded, never the org's current ones; a decision that
// recorded none is skipped, not guessed.
func TestReplayUsesRecordedSignals(t *testing.T) {
	x := newLifecycle(t, clearance.Options{})
	p := x.engine.Policies
	from := x.clock()
	x.evaluate(`{"decision_type":"PAYMENT","workflow_key":"ap","amount":10}`) // starter policy: no signals read
	x.advance(time.Second)
	reads := `{"bundle_id":"sig","version":"s1","mode":"ENFORCEMENT","rules":[
 {"id":"alert","match":[{"field":"signals.fraud_alert.data.level","op":"eq","value":"high"}],"outcome":"BLOCK","reason_codes":["FRAUD_ALERT"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	if _, err := p.PublishBundle(x.ctx, x.org, []byte(reads)); err != nil {
		t.Fatal(err)
	}
	c, err := x.engine.Signals.CreateConnector(x.ctx, x.org, signals.NewConnector{Name: "fraud feed"})
	if err != nil {
		t.Fatal(err)
	}
	ingest := func(level string) {
		body := fmt.Sprintf(`{"events":[{"type":"fraud_alert","timestamp":%q,"data":{"level":%q}}]}`, x.clock().Format(time.RFC3339), level)
		if _, err := x.engine.Signals.Ingest(x.ctx, signals.Delivery{ConnectorID: c.ConnectorID, Secret: c.WebhookSecret, Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
		x.advance(time.Second)
	}
	ingest("high")
	high := x.evaluate(`{"decision_type":"PAYMENT","workflow_key":"ap","amount":10}`)
	x.advance(time.Second)
	ingest("low")
	low := x.evaluate(`{"decision_type":"PAYMENT","workflow_key":"ap","amount":10}`)
	x.advance(time.Second)
	if high.Outcome != "BLOCK" || low.Outcome != "ALLOW" {
		t.Fatalf("recorded %s and %s", high.Outcome, low.Outcome)
	}
	rp, _, err := p.StartReplay(x.ctx, x.org, fmt.Appendf(nil, `{"version":"s1","from":%q}`, from.Format(time.RFC3339Nano)))
	if err != nil {
		t.Fatal(err)
	}
	res := rp.Result
	if res.Total != 3 || res.Replayed != 2 || res.Changed != 0 || res.SkippedBy[decide.ReasonSignalsNotRecorded] != 1 {
		t.Fatalf("replay with recorded signals: %+v", res)
	}
	for _, id := range []string{high.DossierID, low.DossierID} {
		if r, err := p.Reproduce(x.ctx, x.org, id); err != nil || !r.Matches {
			t.Fatalf("reproduce %s: %+v %v", id, r, err)
		}
	}
	if xp, err := p.ExplainDossier(x.ctx, x.org, high.DossierID, nil); err != nil || xp.Outcome != "BLOCK" {
		t.Fatalf("explain: %+v %v", xp, err)
	}
}
