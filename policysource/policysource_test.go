package policysource_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/policysource"
)

func TestPullPublishesAsTheLinkSays(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	r := newRepo(t, filepath.Join(h.root, "policy-repo"))
	commit := r.commit("first policy", goodFiles(10000))
	wantSource := &policy.Provenance{Repository: r.dir, Commit: commit, Path: "policies"}

	for _, mode := range []string{policysource.PublishDraft, policysource.PublishStage, policysource.PublishActivate} {
		t.Run(mode, func(t *testing.T) {
			org := h.org("acme-" + mode)
			src := h.put(org, map[string]any{"repository": r.dir, "directory": "policies", "publish": mode})
			if src.Ref != "main" || src.Publish != mode || src.Directory != "policies" || src.EveryMinutes != 0 || src.NextPullAt != nil {
				t.Fatalf("link = %+v", src)
			}
			res := h.pull(org)
			if res.Status != policysource.StatusPublished || res.Commit != commit || res.Version != commit ||
				res.Tests.Passed != 2 || res.Tests.Failed != 0 || len(res.Tests.Failures) != 0 {
				t.Fatalf("pull = %+v", res)
			}
			var got *policy.Bundle
			switch mode {
			case policysource.PublishDraft:
				if res.Draft != "source" || res.DraftRevision != 1 {
					t.Fatalf("draft = %q rev %d", res.Draft, res.DraftRevision)
				}
				d, err := h.engine.Policies.Draft(ctx, org, "source")
				if err != nil {
					t.Fatal(err)
				}
				got = d.Bundle
				if _, err := h.engine.Policies.Bundle(ctx, org, commit); code(err) != "POLICY_VERSION_NOT_FOUND" {
					t.Fatalf("a draft pull published a version: %v", err)
				}
			default:
				info, err := h.engine.Policies.Bundle(ctx, org, commit)
				if err != nil {
					t.Fatal(err)
				}
				if info.Active != (mode == policysource.PublishActivate) || info.Digest != res.Digest {
					t.Fatalf("published %+v, pull said digest %s", info, res.Digest)
				}
				got = info.Bundle
			}
			if got.Version != commit || *got.Source != *wantSource || got.BundleID != "payments" {
				t.Fatalf("bundle version %q source %+v", got.Version, got.Source)
			}
			if mode == policysource.PublishActivate {
				d, err := h.engine.Decide.Evaluate(ctx, decide.EvaluateRequest{OrgID: org, Route: decide.RouteEvaluateDecision,
					Body: []byte(`{"decision_type":"PAYMENT","workflow_key":"ap","amount":20000}`)})
				if err != nil {
					t.Fatal(err)
				}
				if d.PolicySnapshot.SourceCommit != commit || d.PolicySnapshot.PolicyVersion != commit || d.Outcome != policy.OutcomeBlock {
					t.Fatalf("decision snapshot %+v outcome %s", d.PolicySnapshot, d.Outcome)
				}
			}
			again := h.pull(org)
			if again.Status != policysource.StatusUnchanged || again.Commit != commit {
				t.Fatalf("second pull = %+v", again)
			}
			got2, err := h.src.Get(ctx, org)
			if err != nil {
				t.Fatal(err)
			}
			if lp := got2.LastPull; lp == nil || lp.Status != policysource.StatusUnchanged || lp.Commit != commit || lp.Version != commit {
				t.Fatalf("last_pull = %+v", got2.LastPull)
			}
		})
	}
}

func TestFailingTestBlocksPublishing(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	r := newRepo(t, filepath.Join(h.root, "repo"))
	first := r.commit("limit 10000", goodFiles(10000))
	org := h.org("acme")
	h.put(org, map[string]any{"repository": r.dir, "directory": "policies/", "publish": "activate"})
	if res := h.pull(org); res.Status != policysource.StatusPublished {
		t.Fatalf("first pull = %+v", res)
	}
	// A limit of 30 blocks the 50 the tests expect to pass.
	second := r.commit("limit 30", map[string]string{"policies/bundle.yaml": bundleYAML(30)})
	res := h.pull(org)
	if res.Status != policysource.StatusFailed || res.Reason != policysource.ReasonTestsFailed || res.Commit != second ||
		res.Tests.Passed != 1 || res.Tests.Failed != 1 || len(res.Tests.Failures) != 1 {
		t.Fatalf("pull = %+v", res)
	}
	f := res.Tests.Failures[0]
	if f.File != "policies/tests/payments.yaml" || f.Case != "small payments pass" || !strings.Contains(f.Diff, "BLOCK") {
		t.Fatalf("failure = %+v", f)
	}
	if !strings.Contains(res.Message, "1 passed, 1 failed") {
		t.Fatalf("message = %q", res.Message)
	}
	if _, err := h.engine.Policies.Bundle(ctx, org, second); code(err) != "POLICY_VERSION_NOT_FOUND" {
		t.Fatalf("the failing commit was published: %v", err)
	}
	list, err := h.engine.Policies.Bundles(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Version != first || !list[0].Active {
		t.Fatalf("bundles = %+v", list)
	}
	src, err := h.src.Get(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if lp := src.LastPull; lp == nil || lp.Status != policysource.StatusFailed || lp.Commit != second ||
		lp.Reason != policysource.ReasonTestsFailed || !strings.Contains(lp.Message, "small payments pass") {
		t.Fatalf("last_pull = %+v", src.LastPull)
	}
}

func TestBundleProblemsAreListed(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	r := newRepo(t, filepath.Join(h.root, "repo"))
	org := h.org("acme")
	h.put(org, map[string]any{"repository": "file://" + r.dir, "publish": "stage"})

	bad := strings.Replace(bundleYAML(100), "op: ge", "op: roughly", 1)
	bad = strings.Replace(bad, "outcome: ALLOW", "outcome: MAYBE", 1)
	c := r.commit("broken", map[string]string{"bundle.yaml": bad})
	res := h.pull(org)
	if res.Status != policysource.StatusFailed || res.Reason != policysource.ReasonBundleInvalid || res.Commit != c || len(res.Problems) < 2 {
		t.Fatalf("pull = %+v", res)
	}
	fields := map[string]bool{}
	for _, p := range res.Problems {
		if p.File != "bundle.yaml" {
			t.Errorf("problem file %q", p.File)
		}
		fields[p.Field] = true
	}
	if !fields["rules[0].match[0].op"] || !fields["default.outcome"] {
		t.Fatalf("problems = %+v", res.Problems)
	}

	r.commit("not YAML", map[string]string{"bundle.yaml": "rules: [\n"})
	if res := h.pull(org); res.Reason != policysource.ReasonBundleInvalid || len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Message, "bundle.yaml") {
		t.Fatalf("pull = %+v", res)
	}
	r.commit("unknown member", map[string]string{"bundle.yaml": bundleYAML(100) + "owner: me\n"})
	if res := h.pull(org); res.Reason != policysource.ReasonBundleInvalid || res.Problems[0].Field != "/owner" {
		t.Fatalf("pull = %+v", res)
	}
	r.commit("two bundles", map[string]string{"bundle.yaml": bundleYAML(100), "bundle.json": `{}`})
	if res := h.pull(org); res.Reason != policysource.ReasonBundleMissing || !strings.Contains(res.Message, "more than one") {
		t.Fatalf("pull = %+v", res)
	}
	r.commit("no bundle", map[string]string{"bundle.yaml": "", "bundle.json": ""})
	if res := h.pull(org); res.Reason != policysource.ReasonBundleMissing {
		t.Fatalf("pull = %+v", res)
	}
	list, err := h.engine.Policies.Bundles(context.Background(), org)
	if err != nil || len(list) != 0 {
		t.Fatalf("bundles = %+v, %v", list, err)
	}
}

func TestRefsTagsAndCommits(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	r := newRepo(t, filepath.Join(h.root, "repo"))
	v1 := r.commit("v1", goodFiles(10000))
	r.tag("release-1")
	v2 := r.commit("v2", goodFiles(5000))
	org := h.org("acme")
	for _, c := range []struct{ ref, want string }{
		{"release-1", v1}, {"refs/tags/release-1", v1}, {v1, v1}, {"main", v2}, {"HEAD", v2}, {"refs/heads/main", v2},
	} {
		h.put(org, map[string]any{"repository": r.dir, "ref": c.ref, "directory": "policies", "publish": "stage"})
		if res := h.pull(org); res.Commit != c.want || res.Status == policysource.StatusFailed {
			t.Errorf("ref %s: pull = %+v, want commit %s", c.ref, res, c.want)
		}
	}
	h.put(org, map[string]any{"repository": r.dir, "ref": "nope", "directory": "policies"})
	if res := h.pull(org); res.Status != policysource.StatusFailed || res.Reason != policysource.ReasonUnreadable || res.Commit != "" {
		t.Fatalf("pull = %+v", res)
	}
}

func TestLocalPathsOnlyUnderRoots(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	org := h.org("acme")
	inside := newRepo(t, filepath.Join(h.root, "repo"))
	inside.commit("ok", goodFiles(10000))
	outsideDir := filepath.Join(filepath.Dir(h.root), "outside")
	newRepo(t, outsideDir).commit("ok", goodFiles(10000))
	sibling := h.root + "-evil" // shares the root's prefix, not its path
	newRepo(t, sibling).commit("ok", goodFiles(10000))
	link := filepath.Join(h.root, "link")
	if err := os.Symlink(outsideDir, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ repo, code string }{
		{outsideDir, policysource.CodeSourceNotAllowed},
		{sibling, policysource.CodeSourceNotAllowed},
		{link, policysource.CodeSourceNotAllowed},
		{"file://" + outsideDir, policysource.CodeSourceNotAllowed},
		{h.root + "/../outside", policysource.CodeSourceNotAllowed},
		{"/etc", policysource.CodeSourceNotAllowed},
		{filepath.Join(h.root, "missing"), policysource.CodeInvalidSource},
		{"repos/repo", policysource.CodeInvalidSource},
		{"file://host" + inside.dir, policysource.CodeInvalidSource},
		{"ssh://git@example.com/acme/policies.git", policysource.CodeSourceNotAllowed},
		{"git://example.com/acme/policies.git", policysource.CodeSourceNotAllowed},
	} {
		_, err := h.src.Put(ctx, org, mustJSON(t, map[string]any{"repository": c.repo}))
		if code(err) != c.code {
			t.Errorf("repository %q: %v, want %s", c.repo, err, c.code)
		}
		var ce *core.Error
		if err != nil && (!asCore(err, &ce) || ce.Kind != core.ErrInvalidRequest || len(ce.Fields) != 1 || ce.Fields[0].Field != "repository") {
			t.Errorf("repository %q: %+v", c.repo, ce)
		}
	}
	if _, err := h.src.Get(ctx, org); code(err) != policysource.CodeSourceNotFound {
		t.Fatalf("a refused link was stored: %v", err)
	}
	// The root itself, and a path through a symlink that stays inside.
	inner := filepath.Join(h.root, "inner")
	if err := os.Symlink(inside.dir, inner); err != nil {
		t.Fatal(err)
	}
	h.put(org, map[string]any{"repository": inner, "directory": "policies"})
	if res := h.pull(org); res.Status != policysource.StatusPublished {
		t.Fatalf("pull = %+v", res)
	}
	// A link that pointed inside and now leads outside is refused at the
	// next pull.
	if err := os.Remove(inner); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outsideDir, inner); err != nil {
		t.Fatal(err)
	}
	if res := h.pull(org); res.Status != policysource.StatusFailed || res.Reason != policysource.ReasonUnreadable ||
		!strings.Contains(res.Message, "outside") {
		t.Fatalf("pull = %+v", res)
	}
}

func asCore(err error, ce **core.Error) bool {
	e, ok := err.(*core.Error)
	*ce = e
	return ok
}

func TestBadBodiesChangeNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	r := newRepo(t, filepath.Join(h.root, "repo"))
	r.commit("ok", goodFiles(10000))
	org := h.org("acme")
	for _, c := range []struct {
		name, body, code, field string
	}{
		{"empty", ``, "EMPTY_BODY", ""},
		{"not an object", `[]`, "WRONG_TYPE", ""},
		{"unknown member", `{"repository":"` + r.dir + `","branch":"main"}`, "UNKNOWN_MEMBER", "/branch"},
		{"duplicate", `{"repository":"` + r.dir + `","repository":"` + r.dir + `"}`, "DUPLICATE_MEMBER", ""},
		{"no repository", `{"ref":"main"}`, "MISSING_FIELD", "repository"},
		{"empty repository", `{"repository":""}`, policysource.CodeInvalidSource, "repository"},
		{"control character", `{"repository":"` + r.dir + `\n"}`, policysource.CodeInvalidSource, "repository"},
		{"repository type", `{"repository":7}`, "WRONG_TYPE", "/repository"},
		{"bad ref", `{"repository":"` + r.dir + `","ref":"a..b"}`, policysource.CodeInvalidSource, "ref"},
		{"ref with space", `{"repository":"` + r.dir + `","ref":"my branch"}`, policysource.CodeInvalidSource, "ref"},
		{"empty ref", `{"repository":"` + r.dir + `","ref":""}`, policysource.CodeInvalidSource, "ref"},
		{"climbing directory", `{"repository":"` + r.dir + `","directory":"../x"}`, policysource.CodeInvalidSource, "directory"},
		{"inner dots", `{"repository":"` + r.dir + `","directory":"a/../../b"}`, policysource.CodeInvalidSource, "directory"},
		{"absolute directory", `{"repository":"` + r.dir + `","directory":"/policies"}`, policysource.CodeInvalidSource, "directory"},
		{"bad publish", `{"repository":"` + r.dir + `","publish":"deploy"}`, policysource.CodeInvalidSource, "publish"},
		{"bad draft name", `{"repository":"` + r.dir + `","draft_name":"a b"}`, policysource.CodeInvalidSource, "draft_name"},
		{"draft name without draft", `{"repository":"` + r.dir + `","publish":"stage","draft_name":"x"}`, policysource.CodeInvalidSource, "draft_name"},
		{"too often", `{"repository":"` + r.dir + `","every_minutes":4}`, policysource.CodeInvalidSource, "every_minutes"},
		{"too rare", `{"repository":"` + r.dir + `","every_minutes":10081}`, policysource.CodeInvalidSource, "every_minutes"},
		{"negative", `{"repository":"` + r.dir + `","every_minutes":-5}`, policysource.CodeInvalidSource, "every_minutes"},
		{"fraction", `{"repository":"` + r.dir + `","every_minutes":5.5}`, "WRONG_TYPE", "/every_minutes"},
		{"relative repository", `{"repository":"repo"}`, policysource.CodeInvalidSource, "repository"},
	} {
		_, err := h.src.Put(ctx, org, []byte(c.body))
		var ce *core.Error
		if !asCore(err, &ce) || ce.Code != c.code || ce.Kind != core.ErrInvalidRequest {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
			continue
		}
		if c.field != "" && (len(ce.Fields) == 0 || ce.Fields[0].Field != c.field) {
			t.Errorf("%s: fields %+v, want %s", c.name, ce.Fields, c.field)
		}
		if _, err := h.src.Get(ctx, org); code(err) != policysource.CodeSourceNotFound {
			t.Fatalf("%s: stored: %v", c.name, err)
		}
	}
	// With a link in place, a bad body leaves it as it was.
	before := h.put(org, map[string]any{"repository": r.dir, "directory": "policies", "every_minutes": 60})
	h.advance(time.Minute)
	if _, err := h.src.Put(ctx, org, []byte(`{"repository":"`+r.dir+`","every_minutes":1}`)); code(err) != policysource.CodeInvalidSource {
		t.Fatal(err)
	}
	after, err := h.src.Get(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	if after.UpdatedAt != before.UpdatedAt || after.EveryMinutes != 60 || *after.NextPullAt != *before.NextPullAt {
		t.Fatalf("before %+v, after %+v", before, after)
	}
	// An org that does not exist is refused by the store.
	if _, err := h.src.Put(ctx, "0190b4b8-0000-7000-8000-000000000000", mustJSON(t, map[string]any{"repository": r.dir})); code(err) != "ORG_NOT_FOUND" {
		t.Fatalf("unknown org: %v", err)
	}
}

func TestDeleteUnlinks(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	r := newRepo(t, filepath.Join(h.root, "repo"))
	r.commit("ok", goodFiles(10000))
	org := h.org("acme")
	if err := h.src.Delete(ctx, org); code(err) != policysource.CodeSourceNotFound {
		t.Fatalf("delete of nothing: %v", err)
	}
	h.put(org, map[string]any{"repository": r.dir, "directory": "policies", "every_minutes": 5})
	if err := h.src.Delete(ctx, org); err != nil {
		t.Fatal(err)
	}
	if _, err := h.src.Pull(ctx, org); code(err) != policysource.CodeSourceNotFound {
		t.Fatalf("pull after delete: %v", err)
	}
	if err := h.src.Delete(ctx, org); code(err) != policysource.CodeSourceNotFound {
		t.Fatalf("second delete: %v", err)
	}
	h.advance(time.Hour)
	if n, err := h.src.Process(ctx); err != nil || n != 0 {
		t.Fatalf("process after delete: %d, %v", n, err)
	}
	// Linked again, the link starts afresh.
	src := h.put(org, map[string]any{"repository": r.dir, "directory": "policies"})
	if src.LastPull != nil || src.NextPullAt != nil {
		t.Fatalf("relinked = %+v", src)
	}
}

func TestScheduledPulls(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	r := newRepo(t, filepath.Join(h.root, "repo"))
	first := r.commit("first", goodFiles(10000))
	org := h.org("acme")
	start := h.clock()
	src := h.put(org, map[string]any{"repository": r.dir, "directory": "policies", "publish": "activate", "every_minutes": 5})
	if src.NextPullAt == nil || !src.NextPullAt.Equal(start.Add(5*time.Minute)) {
		t.Fatalf("next_pull_at = %v", src.NextPullAt)
	}
	if n, err := h.src.Process(ctx); err != nil || n != 0 {
		t.Fatalf("process before due: %d, %v", n, err)
	}
	// Saving the link again with the same interval keeps the due time.
	h.advance(2 * time.Minute)
	if again := h.put(org, map[string]any{"repository": r.dir, "directory": "policies", "publish": "activate", "every_minutes": 5}); !again.NextPullAt.Equal(*src.NextPullAt) {
		t.Fatalf("next_pull_at moved to %v", again.NextPullAt)
	}
	h.advance(3 * time.Minute)
	if n, err := h.src.Process(ctx); err != nil || n != 1 {
		t.Fatalf("process when due: %d, %v", n, err)
	}
	active := func() string {
		res, err := h.engine.Policies.Resolve(ctx, org, "")
		if err != nil {
			t.Fatal(err)
		}
		return res.Active.Snapshot().PolicyVersion
	}
	if v := active(); v != first {
		t.Fatalf("active = %s, want %s", v, first)
	}
	src, _ = h.src.Get(ctx, org)
	if want := h.clock().Add(5 * time.Minute); src.NextPullAt == nil || !src.NextPullAt.Equal(want) || src.LastPull.Commit != first {
		t.Fatalf("after the pull: %+v", src)
	}
	second := r.commit("second", goodFiles(20000))
	h.advance(4 * time.Minute)
	if n, _ := h.src.Process(ctx); n != 0 {
		t.Fatalf("pulled before due")
	}
	h.advance(time.Minute)
	if n, err := h.src.Process(ctx); err != nil || n != 1 {
		t.Fatalf("second scheduled pull: %d, %v", n, err)
	}
	if v := active(); v != second {
		t.Fatalf("active = %s, want %s", v, second)
	}
	// A new interval moves the due time; 0 stops the schedule.
	src = h.put(org, map[string]any{"repository": r.dir, "directory": "policies", "publish": "activate", "every_minutes": 60})
	if !src.NextPullAt.Equal(h.clock().Add(time.Hour)) {
		t.Fatalf("next_pull_at = %v", src.NextPullAt)
	}
	src = h.put(org, map[string]any{"repository": r.dir, "directory": "policies", "publish": "activate"})
	if src.NextPullAt != nil {
		t.Fatalf("stopped schedule still due at %v", src.NextPullAt)
	}
	third := r.commit("third", goodFiles(15000))
	h.advance(2 * time.Hour)
	if n, err := h.src.Process(ctx); err != nil || n != 0 {
		t.Fatalf("pulled without a schedule: %d, %v", n, err)
	}
	// Started again: due an interval from now.
	h.put(org, map[string]any{"repository": r.dir, "directory": "policies", "publish": "activate", "every_minutes": 5})
	h.advance(5 * time.Minute)
	if n, err := h.src.Process(ctx); err != nil || n != 1 {
		t.Fatalf("restarted schedule: %d, %v", n, err)
	}
	if v := active(); v != third {
		t.Fatalf("active = %s, want %s", v, third)
	}
}

// Two servers share the store: a due pull is claimed by one of them.
func TestScheduledPullRunsOnce(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	r := newRepo(t, filepath.Join(h.root, "repo"))
	r.commit("first", goodFiles(10000))
	orgs := []string{h.org("a"), h.org("b"), h.org("c")}
	for _, org := range orgs {
		h.put(org, map[string]any{"repository": r.dir, "directory": "policies", "publish": "stage", "every_minutes": 5})
	}
	h.advance(5 * time.Minute)
	servers := []*policysource.Service{h.src, h.service(harnessOptions{}), h.service(harnessOptions{})}
	counts := make(chan int, len(servers))
	for _, s := range servers {
		go func() {
			n, err := s.Process(ctx)
			if err != nil {
				t.Error(err)
			}
			counts <- n
		}()
	}
	total := 0
	for range servers {
		total += <-counts
	}
	if total != len(orgs) {
		t.Fatalf("%d pulls, want %d", total, len(orgs))
	}
	for _, org := range orgs {
		src, err := h.src.Get(ctx, org)
		if err != nil || src.LastPull == nil || src.LastPull.Status != policysource.StatusPublished {
			t.Fatalf("org %s: %+v, %v", org, src, err)
		}
	}
}

func TestDraftIsReplacedByANewCommit(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	r := newRepo(t, filepath.Join(h.root, "repo"))
	r.commit("first", goodFiles(10000))
	org := h.org("acme")
	h.put(org, map[string]any{"repository": r.dir, "directory": "policies", "draft_name": "from-git"})
	if res := h.pull(org); res.Status != policysource.StatusPublished || res.Draft != "from-git" || res.DraftRevision != 1 {
		t.Fatalf("pull = %+v", res)
	}
	if res := h.pull(org); res.Status != policysource.StatusUnchanged || res.DraftRevision != 1 {
		t.Fatalf("pull = %+v", res)
	}
	second := r.commit("second", goodFiles(20000))
	if res := h.pull(org); res.Status != policysource.StatusPublished || res.DraftRevision != 2 || res.Version != second {
		t.Fatalf("pull = %+v", res)
	}
	d, err := h.engine.Policies.Draft(ctx, org, "from-git")
	if err != nil || d.Bundle.Version != second {
		t.Fatalf("draft = %+v, %v", d, err)
	}
}
