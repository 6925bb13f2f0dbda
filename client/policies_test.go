package client_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/clearancehq/clearance/client"
)

const (
	v1Bundle = `{"bundle_id":"refunds","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"ESCALATE","reason_codes":["BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	v2Bundle = `{"bundle_id":"refunds","version":"v2","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":500}],"outcome":"ESCALATE","reason_codes":["BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	nextDraft = `{"bundle_id":"refunds","version":"v3","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":500}],"outcome":"ESCALATE","reason_codes":["BIG"]},
 {"id":"huge","match":[{"field":"amount","op":"ge","value":5000}],"outcome":"BLOCK","reason_codes":["HUGE"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
)

// Bundles on both paths: publish, stage, list, read, activate.
func TestPolicyBundles(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Bundles")
	ctx := t.Context()

	var got client.Response
	staged, err := o.c.PublishBundle(ctx, bundleOf(t, v1Bundle), client.Query("activate", "false"), client.Received(&got))
	if err != nil || got.Status != http.StatusCreated || staged.Version != "v1" || staged.Active || staged.RuleCount != 1 {
		t.Fatalf("stage v1 (%d) %+v: %v", got.Status, staged, err)
	}
	active, err := o.c.PublishPolicy(ctx, bundleOf(t, v2Bundle))
	if err != nil || active.Version != "v2" || !active.Active || active.BundleDigest == staged.BundleDigest {
		t.Fatalf("publish v2 %+v: %v", active, err)
	}
	again, err := o.c.PublishBundle(ctx, bundleOf(t, v2Bundle), client.Received(&got))
	if err != nil || got.Status != http.StatusOK || again.BundleDigest != active.BundleDigest {
		t.Fatalf("publish v2 again (%d) %+v: %v", got.Status, again, err)
	}
	for name, list := range map[string]func() (*client.BundleList, error){
		"Bundles":  func() (*client.BundleList, error) { return o.c.Bundles(ctx) },
		"Policies": func() (*client.BundleList, error) { return o.c.Policies(ctx) },
	} {
		l, err := list()
		if err != nil || len(l.Bundles) != 2 || l.Bundles[0].Version != "v1" || l.ActiveVersion == nil || *l.ActiveVersion != "v2" {
			t.Fatalf("%s %+v: %v", name, l, err)
		}
	}
	b, err := o.c.Bundle(ctx, "v1")
	if err != nil || b.Bundle == nil || b.Bundle.BundleId != "refunds" || len(*b.Bundle.Rules) != 1 || (*b.Bundle.Rules)[0].Id != "big" {
		t.Fatalf("Bundle v1 %+v: %v", b, err)
	}
	p, err := o.c.Policy(ctx, "v2")
	if err != nil || p.Bundle == nil || p.Version != "v2" || !p.Active {
		t.Fatalf("Policy v2 %+v: %v", p, err)
	}
	_, err = o.c.Bundle(ctx, "v9")
	wantCode(t, err, http.StatusNotFound, "POLICY_VERSION_NOT_FOUND")

	back, err := o.c.ActivateBundle(ctx, "v1", client.ActivateRequest{ExpectedActiveVersion: ptr("v2")})
	if err != nil || !back.Changed || back.ActiveVersion != "v1" || back.PreviousVersion == nil || *back.PreviousVersion != "v2" {
		t.Fatalf("roll back to v1 %+v: %v", back, err)
	}
	_, err = o.c.ActivatePolicy(ctx, "v2", client.ActivateRequest{ExpectedActiveVersion: ptr("v2")})
	wantCode(t, err, http.StatusConflict, "ACTIVE_VERSION_MISMATCH")
	fwd, err := o.c.ActivatePolicy(ctx, "v2", client.ActivateRequest{})
	if err != nil || !fwd.Changed || fwd.ActiveVersion != "v2" {
		t.Fatalf("roll forward %+v: %v", fwd, err)
	}
	if d := o.decide(t, 700); d.Outcome != "ESCALATE" || d.PolicySnapshot.PolicyVersion != "v2" {
		t.Fatalf("a decision under v2: %+v", d)
	}
}

// A draft's life: written under If-Match, validated, diffed, dry-run,
// promoted; another deleted.
func TestPolicyDrafts(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Drafts")
	o.publish(t, v2Bundle)
	ctx := t.Context()

	var draft client.DraftBundle
	mustJSON(t, v2Bundle, &draft)
	var got client.Response
	d, err := o.c.PutDraft(ctx, "next", draft, client.Received(&got))
	if err != nil || got.Status != http.StatusCreated || d.Name != "next" || d.Revision != 1 || got.Header.Get("ETag") != `"1"` {
		t.Fatalf("create draft (%d %v) %+v: %v", got.Status, got.Header, d, err)
	}
	mustJSON(t, nextDraft, &draft)
	d, err = o.c.PutDraft(ctx, "next", draft, client.IfMatch(1))
	if err != nil || d.Revision != 2 {
		t.Fatalf("replace draft %+v: %v", d, err)
	}
	_, err = o.c.PutDraft(ctx, "next", draft, client.IfMatch(1))
	wantCode(t, err, http.StatusConflict, "DRAFT_REVISION_MISMATCH")

	read, err := o.c.Draft(ctx, "next")
	if err != nil || read.Revision != 2 || read.Bundle == nil || len(*read.Bundle.Rules) != 2 {
		t.Fatalf("read draft %+v: %v", read, err)
	}
	list, err := o.c.Drafts(ctx)
	if err != nil || len(list.Drafts) != 1 || list.Drafts[0].Name != "next" || list.Drafts[0].Bundle != nil {
		t.Fatalf("drafts %+v: %v", list, err)
	}
	valid, err := o.c.ValidateDraft(ctx, "next")
	if err != nil || !bool(valid.Valid) || valid.RuleCount != 2 || valid.Version != "v3" || valid.Revision != 2 {
		t.Fatalf("validate %+v: %v", valid, err)
	}
	diff, err := o.c.DiffPolicies(ctx, "v2", "draft:next")
	if err != nil || diff.Identical || !slices.Equal(diff.RulesAdded, []string{"huge"}) || len(diff.RulesRemoved) != 0 || diff.From != "v2" {
		t.Fatalf("diff %+v: %v", diff, err)
	}
	dry, err := o.c.DryRun(ctx, decisionRequest(t, 6000), client.Query("draft", "next"), client.Query("explain", "true"))
	if err != nil || !bool(dry.DryRun) || bool(dry.Authorizes) || bool(dry.ShouldExecute) || dry.Outcome != "BLOCK" ||
		!slices.Contains(dry.MatchedRules, "huge") || dry.Explanation == nil {
		t.Fatalf("dry run %+v: %v", dry, err)
	}
	promo, err := o.c.PromoteDraft(ctx, "next", client.PromoteRequest{ExpectedRevision: ptr(int64(2))})
	if err != nil || !promo.Created || promo.Published.Version != "v3" || promo.Activation == nil || promo.Activation.ActiveVersion != "v3" {
		t.Fatalf("promote %+v: %v", promo, err)
	}
	_, err = o.c.Draft(ctx, "next")
	wantCode(t, err, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")

	if _, err := o.c.PutDraft(ctx, "scratch", draft); err != nil {
		t.Fatal(err)
	}
	if err := o.c.DeleteDraft(ctx, "scratch", client.IfMatch(1)); err != nil {
		t.Fatal(err)
	}
	err = o.c.DeleteDraft(ctx, "scratch")
	wantCode(t, err, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
}

// A replay answered at once, read back, and its event stream.
func TestPolicyReplay(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Replays")
	o.publish(t, v1Bundle)
	ctx := t.Context()
	from := s.now().Add(-time.Minute)
	for _, amount := range []float64{100, 700, 1500} {
		o.decide(t, amount)
	}
	if _, err := o.c.PublishBundle(ctx, bundleOf(t, v2Bundle), client.Query("activate", "false")); err != nil {
		t.Fatal(err)
	}

	r, err := o.c.StartReplay(ctx, client.ReplayRequest{From: from, Version: ptr("v2"), Examples: ptr(3)})
	if err != nil || r.Status != "done" || r.Total != 3 || r.Processed != 3 || r.Result == nil || r.Result.Changed != 1 ||
		r.Result.MoreRestrictive != 1 || r.PolicyVersion != "v2" {
		t.Fatalf("replay %+v: %v", r, err)
	}
	read, err := o.c.Replay(ctx, r.ReplayId)
	if err != nil || read.ReplayId != r.ReplayId || read.Status != "done" || read.Result == nil || read.Result.Changed != 1 {
		t.Fatalf("read replay %+v: %v", read, err)
	}
	stream, err := o.c.ReplayEvents(ctx, r.ReplayId)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	ev, err := stream.Next()
	if err != nil || ev.Name != "done" {
		t.Fatalf("event %q: %v", ev.Name, err)
	}
	var done client.Replay
	if err := json.Unmarshal(ev.Data, &done); err != nil || done.ReplayId != r.ReplayId || done.Result == nil || done.Result.Total != 3 {
		t.Fatalf("done event %s: %v", ev.Data, err)
	}
	if _, err := stream.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the done event: %v", err)
	}
	_, err = o.c.ReplayEvents(ctx, "no-such-replay")
	wantCode(t, err, http.StatusNotFound, "REPLAY_NOT_FOUND")
}

// The Git policy source: link a real repository, pull it, unlink it.
func TestPolicySource(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Sourced")
	ctx := t.Context()
	repo := filepath.Join(s.sourceRoot, "payments")
	commit := commitPolicyRepo(t, repo)

	_, err := o.c.PolicySource(ctx)
	wantCode(t, err, http.StatusNotFound, "SOURCE_NOT_FOUND")
	publish := client.PolicySourceRequestPublishActivate
	link, err := o.c.PutPolicySource(ctx, client.PolicySourceRequest{Repository: repo, Directory: ptr("policies"), Publish: &publish})
	if err != nil || link.Repository != repo || link.Ref != "main" || link.Directory != "policies" || link.Publish != "activate" {
		t.Fatalf("link %+v: %v", link, err)
	}
	pull, err := o.c.PullPolicySource(ctx)
	if err != nil || pull.Status != "published" || pull.Commit == nil || *pull.Commit != commit || pull.Tests.Passed != 1 || pull.Tests.Failed != 0 {
		t.Fatalf("pull %+v: %v", pull, err)
	}
	read, err := o.c.PolicySource(ctx)
	if err != nil || read.LastPull == nil || read.LastPull.Status != "published" {
		t.Fatalf("read link %+v: %v", read, err)
	}
	if d := o.decide(t, 20000); d.Outcome != "BLOCK" || d.PolicySnapshot.PolicyVersion != commit {
		t.Fatalf("a decision under the pulled bundle: %+v", d)
	}
	if err := o.c.DeletePolicySource(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = o.c.PullPolicySource(ctx)
	wantCode(t, err, http.StatusNotFound, "SOURCE_NOT_FOUND")
}

// commitPolicyRepo makes a Git repository at dir whose "policies" holds a
// bundle that blocks from 10,000 and one passing test, and returns its
// commit.
func commitPolicyRepo(t *testing.T, dir string) string {
	t.Helper()
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: "refs/heads/main"}})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"policies/bundle.json": `{"bundle_id":"payments","version":"dev","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`,
		"policies/tests/payments.yml": `cases:
  - name: big payments are blocked
    input: '{"amount": 20000}'
    expect: {outcome: BLOCK, reason_codes: [PROTOCOL_OUTCOME_BLOCK, POLICY_MATCHED, TOO_BIG]}
`,
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		full := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	sig := &object.Signature{Name: "Policy Author", Email: "author@example.com", When: time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)}
	h, err := wt.Commit("block big payments", &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}
