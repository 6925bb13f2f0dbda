package server_test

// End-to-end tests of the policy-source routes over HTTP, on Pebble or
// PostgreSQL (CLEARANCE_E2E_STORE): an org links a directory of a real Git
// repository (made here with go-git), pulls it, and gets its bundle
// published only when the bundle's tests pass.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/policysource"
	"github.com/clearancehq/clearance/server"
)

const psPath = "/v1/policies/source"

// psEnv is a server whose engine may link repositories under root, with a
// clock the test moves (the store's too).
type psEnv struct {
	*env
	root string
	now  *atomic.Int64
}

func (x *psEnv) clock() time.Time { return time.Unix(0, x.now.Load()).UTC() }

func newPSEnv(t *testing.T) *psEnv {
	t.Helper()
	x := &psEnv{root: t.TempDir(), now: &atomic.Int64{}}
	x.now.Store(time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC).UnixNano())
	x.env = &env{t: t, dbDir: filepath.Join(t.TempDir(), "db"), opts: server.Options{AuthRateLimit: -1},
		engineOpts: clearance.Options{Now: x.clock, PolicySourceRoots: []string{x.root}}}
	st := openBackend(t, x.dbDir, x.clock)
	eng, err := clearance.Open(st, x.engineOpts)
	if err != nil {
		st.Close()
		t.Fatalf("open engine: %v", err)
	}
	x.store, x.engine = st, eng
	x.server = server.New(eng, x.opts)
	x.srv = httptest.NewServer(x.server)
	x.client = x.srv.Client()
	t.Cleanup(x.stop)
	secret, err := eng.Admin.NewPlatformSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Admin.EnsurePlatformKey(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	x.platform = secret
	return x
}

// psRepo is a Git repository with one directory "policies" holding a
// bundle whose limit blocks big payments, and tests that 50 passes and
// 20000 is blocked.
type psRepo struct {
	t    *testing.T
	dir  string
	r    *git.Repository
	when time.Time
}

func newPSRepo(t *testing.T, dir string) *psRepo {
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: "refs/heads/main"}})
	if err != nil {
		t.Fatal(err)
	}
	return &psRepo{t: t, dir: dir, r: r, when: time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)}
}

func (p *psRepo) commit(limit int) string {
	p.t.Helper()
	files := map[string]string{
		"policies/bundle.json": fmt.Sprintf(`{"bundle_id":"payments","version":"dev","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":%d}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`, limit),
		"policies/tests/payments.yml": `cases:
  - name: small payments pass
    input: '{"amount": 50}'
    expect: {outcome: ALLOW, reason_codes: [PROTOCOL_OUTCOME_ALLOW, NO_RULE_MATCHED, OK]}
  - name: big payments are blocked
    input: '{"amount": 20000}'
    expect: {outcome: BLOCK, reason_codes: [PROTOCOL_OUTCOME_BLOCK, POLICY_MATCHED, TOO_BIG]}
`,
	}
	wt, err := p.r.Worktree()
	if err != nil {
		p.t.Fatal(err)
	}
	for name, content := range files {
		full := filepath.Join(p.dir, name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			p.t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			p.t.Fatal(err)
		}
	}
	p.when = p.when.Add(time.Minute)
	sig := &object.Signature{Name: "Policy Author", Email: "author@example.com", When: p.when}
	h, err := wt.Commit(fmt.Sprintf("limit %d", limit), &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		p.t.Fatal(err)
	}
	return h.String()
}

func TestPolicySourceEndToEnd(t *testing.T) {
	x := newPSEnv(t)
	repo := newPSRepo(t, filepath.Join(x.root, "payments"))
	first := repo.commit(10000)
	acme, other := x.createOrg("acme"), x.createOrg("other")
	writer := x.createKey(acme, "policy:write")
	reader := x.createKey(acme, "policy:read")
	decider := x.createKey(acme, "decision:write")

	// Nothing linked yet.
	x.do("GET", psPath, reader, nil, nil).wantProblem(t, http.StatusNotFound, "SOURCE_NOT_FOUND")
	x.do("POST", psPath+"/pull", writer, nil, nil).wantProblem(t, http.StatusNotFound, "SOURCE_NOT_FOUND")

	// Bad links change nothing.
	bad := x.do("PUT", psPath, writer, map[string]any{"repository": repo.dir, "directory": "../x", "every_minutes": 1}, nil).
		wantProblem(t, http.StatusBadRequest, "INVALID_POLICY_SOURCE")
	if errs, _ := bad.JSON["errors"].([]any); len(errs) != 2 || bad.str("errors.0.field") != "directory" || bad.str("errors.1.field") != "every_minutes" {
		t.Fatalf("field errors: %s", bad)
	}
	x.do("PUT", psPath, writer, map[string]any{"repository": "/etc"}, nil).wantProblem(t, http.StatusBadRequest, "SOURCE_NOT_ALLOWED")
	x.do("PUT", psPath, writer, map[string]any{"repository": "http://127.0.0.1:9/repo.git"}, nil).
		wantProblem(t, http.StatusBadRequest, "SOURCE_NOT_ALLOWED")
	x.do("PUT", psPath, writer, map[string]any{"repository": repo.dir, "branch": "main"}, nil).
		wantProblem(t, http.StatusBadRequest, "UNKNOWN_MEMBER")
	x.do("GET", psPath, reader, nil, nil).wantProblem(t, http.StatusNotFound, "SOURCE_NOT_FOUND")

	// Scopes: reading needs policy:read, changing policy:write.
	x.do("PUT", psPath, reader, map[string]any{"repository": repo.dir}, nil).want(t, http.StatusForbidden)
	x.do("GET", psPath, decider, nil, nil).want(t, http.StatusForbidden)

	link := map[string]any{"repository": repo.dir, "directory": "policies", "publish": "activate"}
	put := x.do("PUT", psPath, writer, link, nil).want(t, http.StatusOK)
	if put.str("org_id") != acme.ID || put.str("ref") != "main" || put.str("publish") != "activate" || put.num("every_minutes") != 0 {
		t.Fatalf("link: %s", put)
	}
	pull := x.do("POST", psPath+"/pull", writer, nil, nil).want(t, http.StatusOK)
	if pull.str("status") != "published" || pull.str("commit") != first || pull.str("version") != first || pull.num("tests.passed") != 2 {
		t.Fatalf("pull: %s", pull)
	}
	// The version is the commit. (The engine's Decision carries
	// PolicySnapshot.SourceCommit too; decide's wire encoder does not write
	// source_commit yet.)
	d := x.decide(decider, `{"decision_type":"PAYMENT","workflow_key":"ap","amount":20000}`)
	if d.str("policy_snapshot.policy_version") != first || d.str("outcome") != "BLOCK" {
		t.Fatalf("decision: %s", d)
	}
	x.do("POST", psPath+"/pull", writer, map[string]any{}, nil).want(t, http.StatusOK)
	if again := x.do("POST", psPath+"/pull", writer, nil, nil).want(t, http.StatusOK); again.str("status") != "unchanged" {
		t.Fatalf("second pull: %s", again)
	}
	x.do("POST", psPath+"/pull", writer, `{"force":true}`, nil).wantProblem(t, http.StatusBadRequest, "UNKNOWN_MEMBER")

	// A commit whose tests fail publishes nothing: 200, status failed.
	second := repo.commit(30)
	failed := x.do("POST", psPath+"/pull", writer, nil, nil).want(t, http.StatusOK)
	if failed.str("status") != "failed" || failed.str("reason") != "TESTS_FAILED" || failed.str("commit") != second ||
		failed.num("tests.failed") != 1 || failed.str("tests.failures.0.case") != "small payments pass" {
		t.Fatalf("failing pull: %s", failed)
	}
	x.do("GET", "/v1/policies/"+second, reader, nil, nil).want(t, http.StatusNotFound)
	if d := x.decide(decider, `{"decision_type":"PAYMENT","workflow_key":"ap","amount":50}`); d.str("policy_snapshot.policy_version") != first {
		t.Fatalf("the failing commit decides: %s", d)
	}
	got := x.do("GET", psPath, reader, nil, nil).want(t, http.StatusOK)
	if got.str("last_pull.status") != "failed" || got.str("last_pull.commit") != second || got.str("last_pull.reason") != "TESTS_FAILED" {
		t.Fatalf("get: %s", got)
	}

	// Tenants: another org sees no link; the platform key names the org.
	x.do("GET", psPath, other.Key, nil, nil).wantProblem(t, http.StatusNotFound, "SOURCE_NOT_FOUND")
	x.do("GET", psPath+"?org_id="+acme.ID, x.platform, nil, nil).want(t, http.StatusOK)
	x.do("GET", psPath+"?org_id="+other.ID, acme.Key, nil, nil).want(t, http.StatusForbidden)

	// A scheduled pull, driven by the clock and the worker's Process.
	link["every_minutes"] = 5
	sched := x.do("PUT", psPath, writer, link, nil).want(t, http.StatusOK)
	if want := x.clock().Add(5 * time.Minute).Format(time.RFC3339Nano); sched.str("next_pull_at") != want {
		t.Fatalf("next_pull_at %q, want %q", sched.str("next_pull_at"), want)
	}
	third := repo.commit(15000)
	x.now.Add(int64(5 * time.Minute))
	if n, err := x.engine.PolicySources.Process(context.Background()); err != nil || n != 1 {
		t.Fatalf("process: %d, %v", n, err)
	}
	if d := x.decide(decider, `{"decision_type":"PAYMENT","workflow_key":"ap","amount":50}`); d.str("policy_snapshot.policy_version") != third {
		t.Fatalf("the scheduled pull did not activate %s: %s", third, d)
	}

	// Unlinked: 204, then 404; published versions stay.
	x.do("DELETE", psPath, writer, nil, nil).want(t, http.StatusNoContent)
	x.do("DELETE", psPath, writer, nil, nil).wantProblem(t, http.StatusNotFound, "SOURCE_NOT_FOUND")
	x.do("GET", psPath, reader, nil, nil).wantProblem(t, http.StatusNotFound, "SOURCE_NOT_FOUND")
	x.do("GET", "/v1/policies/"+third, reader, nil, nil).want(t, http.StatusOK)
}

// ---------------------------------------------------------------------------
// The policy-source routes in the bad-input suite (badinput_test.go adds
// policySourceSpecs to its specs).

// policySourceTargets lets the suite's engine link repositories under a
// directory of its own, makes a repository there, links org a to it
// (publishing into a draft) and pulls it once, so that every route has
// something to act on. It returns the repository's directory.
func (s *badSuite) policySourceTargets() string {
	t, x := s.t, s.x
	root := t.TempDir()
	prev := x.tune
	x.tune = func(o *clearance.Options) {
		if prev != nil {
			prev(o)
		}
		o.PolicySourceRoots = append(o.PolicySourceRoots, root)
	}
	x.reopen(x.ring)
	repo := newPSRepo(t, filepath.Join(root, "payments"))
	repo.commit(10000)
	x.req(t, "PUT", psPath, s.a.Key, psBadInputBody(repo.dir), nil).want(t, http.StatusOK)
	if r := x.req(t, "POST", psPath+"/pull", s.a.Key, nil, nil).want(t, http.StatusOK); r.str("status") != "published" {
		t.Fatalf("policy source pull: %s", r)
	}
	return repo.dir
}

// psBadInputBody is the link the suite's accepted PUT sends again.
func psBadInputBody(dir string) string {
	return `{"repository":` + lit(dir) + `,"ref":"main","directory":"policies","publish":"draft","draft_name":"from-git","every_minutes":0}`
}

// policySourceSpecs are the bad-input specs of the policy-source routes.
func (s *badSuite) policySourceSpecs() map[string]routeSpec {
	dir := s.policySourceTargets()
	repo := `{"repository":` + lit(dir)
	put := routeSpec{org: orgQuery, body: psBadInputBody(dir),
		idents:  []string{`{"repository":@@}`, repo + `,"ref":@@}`, repo + `,"directory":@@}`, repo + `,"draft_name":@@}`},
		numbers: []string{repo + `,"every_minutes":@@}`}}
	put.extra = func(q req) []badCase {
		out := s.bodyCases(q, put) // PUT: the suite sends bodies with POST only
		const invalid, notAllowed = policysource.CodeInvalidSource, policysource.CodeSourceNotAllowed
		for _, v := range []struct{ name, body, code string }{
			{"no members", `{}`, "MISSING_FIELD"},
			{"repository null", `{"repository":null}`, "MISSING_FIELD"},
			{"empty repository", `{"repository":""}`, invalid},
			{"relative repository", `{"repository":"payments"}`, invalid},
			{"scp-like repository", `{"repository":"git@example.com:acme/policies.git"}`, invalid},
			{"userinfo in the URL", `{"repository":"https://user:pw@example.com/acme/policies.git"}`, invalid},
			{"a fragment in the URL", `{"repository":"https://example.com/acme/policies.git#main"}`, invalid},
			{"file URL with a host", `{"repository":"file://example.com` + dir + `"}`, invalid},
			{"no such directory under the root", `{"repository":` + lit(dir+"/missing") + `}`, invalid},
			{"a path outside the roots", `{"repository":"/etc"}`, notAllowed},
			{"the filesystem's root", `{"repository":"/"}`, notAllowed},
			{"climbing out of the root", `{"repository":` + lit(dir+"/../../../..") + `}`, notAllowed},
			{"a file URL outside the roots", `{"repository":"file:///etc"}`, notAllowed},
			{"ssh", `{"repository":"ssh://git@example.com/acme/policies.git"}`, notAllowed},
			{"git protocol", `{"repository":"git://example.com/acme/policies.git"}`, notAllowed},
			{"ftp", `{"repository":"ftp://example.com/acme/policies.git"}`, notAllowed},
			{"empty ref", repo + `,"ref":""}`, invalid},
			{"ref with ..", repo + `,"ref":"a..b"}`, invalid},
			{"ref with a space", repo + `,"ref":"my branch"}`, invalid},
			{"ref with ~", repo + `,"ref":"main~1"}`, invalid},
			{"ref with ^", repo + `,"ref":"main^"}`, invalid},
			{"ref with :", repo + `,"ref":"a:b"}`, invalid},
			{"ref ending .lock", repo + `,"ref":"main.lock"}`, invalid},
			{"ref starting -", repo + `,"ref":"-main"}`, invalid},
			{"ref @", repo + `,"ref":"@"}`, invalid},
			{"ref refs/heads/", repo + `,"ref":"refs/heads/"}`, invalid},
			{"ref with //", repo + `,"ref":"a//b"}`, invalid},
			{"256-byte ref", repo + `,"ref":` + lit(strings.Repeat("r", 256)) + `}`, invalid},
			{"directory ..", repo + `,"directory":".."}`, invalid},
			{"directory climbing", repo + `,"directory":"policies/../../x"}`, invalid},
			{"absolute directory", repo + `,"directory":"/policies"}`, invalid},
			{"directory a//b", repo + `,"directory":"a//b"}`, invalid},
			{"directory a/./b", repo + `,"directory":"a/./b"}`, invalid},
			{"directory with a backslash", repo + `,"directory":"a\\b"}`, invalid},
			{"unknown publish", repo + `,"publish":"deploy"}`, invalid},
			{"publish in capitals", repo + `,"publish":"DRAFT"}`, invalid},
			{"empty publish", repo + `,"publish":""}`, invalid},
			{"draft_name with stage", repo + `,"publish":"stage","draft_name":"x"}`, invalid},
			{"draft_name with activate", repo + `,"publish":"activate","draft_name":"source"}`, invalid},
			{"empty draft_name", repo + `,"draft_name":""}`, invalid},
			{"draft_name with a slash", repo + `,"draft_name":"a/b"}`, invalid},
			{"every 1 minute", repo + `,"every_minutes":1}`, invalid},
			{"every 4 minutes", repo + `,"every_minutes":4}`, invalid},
			{"every 10081 minutes", repo + `,"every_minutes":10081}`, invalid},
			{"every -5 minutes", repo + `,"every_minutes":-5}`, invalid},
			{"every 5.5 minutes", repo + `,"every_minutes":5.5}`, "WRONG_TYPE"},
			{"every 2^63 minutes", repo + `,"every_minutes":9223372036854775808}`, "WRONG_TYPE"},
			{"every_minutes as a string", repo + `,"every_minutes":"5"}`, "WRONG_TYPE"},
			{"an extra member branch", repo + `,"branch":"main"}`, "UNKNOWN_MEMBER"},
			{"an extra member org_id", repo + `,"org_id":` + lit(s.a.ID) + `}`, "UNKNOWN_MEMBER"},
			{"an extra member last_pull", repo + `,"last_pull":{}}`, "UNKNOWN_MEMBER"},
			{"repository twice", repo + `,"repository":` + lit(dir) + `}`, "DUPLICATE_MEMBER"},
			{"two problems", repo + `,"ref":"a..b","every_minutes":1}`, invalid},
		} {
			c := s.variant(q, catValue, v.name, v.body, v.code)
			c.status = http.StatusBadRequest
			out = append(out, c)
		}
		// Look-alike names: none is a branch or draft name.
		for _, l := range lookAlikes {
			if l != `"\u0430b"` { // a Cyrillic letter is a valid branch name
				c := s.variant(q, catLookAlike, "ref "+shorten(l), repo+`,"ref":`+l+`}`, invalid)
				c.status = http.StatusBadRequest
				out = append(out, c)
			}
			c := s.variant(q, catLookAlike, "draft_name "+shorten(l), repo+`,"draft_name":`+l+`}`, invalid)
			c.status = http.StatusBadRequest
			out = append(out, c)
		}
		return out
	}
	return map[string]routeSpec{
		"PUT " + psPath:            put,
		"GET " + psPath:            {org: orgQuery},
		"POST " + psPath + "/pull": {org: orgQuery, body: `{}`, emptyOK: true},
		"DELETE " + psPath:         {org: orgQuery, phase: phaseRevokes + 1}, // last: the other routes need the link
	}
}
