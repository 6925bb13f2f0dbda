package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// policyData is the directory of the policy command's test files.
var policyData = filepath.Join("testdata", "policy")

func pd(name string) string { return filepath.Join(policyData, name) }

func TestPolicyCheck(t *testing.T) {
	okLine := regexp.MustCompile(`^ok: payments 2026\.1 2 rules, digest (sha256:[0-9a-f]{64})\n$`)
	var digests []string
	for _, f := range []string{"payments.json", "payments.yaml"} {
		code, out, errOut := runCLI(t, nil, "policy", "check", pd(f))
		m := okLine.FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("check %s: exit %d, stdout %q, stderr %q", f, code, out, errOut)
		}
		digests = append(digests, m[1])
	}
	if digests[0] != digests[1] {
		t.Fatalf("the YAML and JSON forms of one bundle have digests %s and %s", digests[0], digests[1])
	}

	code, out, errOut := runCLI(t, nil, "policy", "check", pd("broken.yaml"))
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 1 || len(lines) != 3 || !strings.Contains(errOut, "3 problem(s)") {
		t.Fatalf("check broken.yaml: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for i, want := range []string{
		`rules[1].when (rule "typo"): ` + "ERROR: <input>:1:1: undeclared reference to 'intnet'",
		`rules[2].outcome (rule "maybe"): outcome must be`,
		`rules[2].reason_codes[0] (rule "maybe"): reason code "lower_case"`,
	} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("problem %d: %q, want prefix %q", i, lines[i], want)
		}
	}

	if code, _, errOut := runCLI(t, nil, "policy", "check", pd("missing.yaml")); code != 2 || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("unreadable file: exit %d, stderr %q", code, errOut)
	}
	if code, _, _ := runCLI(t, nil, "policy", "check"); code != 2 {
		t.Fatalf("no file: exit %d", code)
	}
}

func TestPolicyTest(t *testing.T) {
	code, out, errOut := runCLI(t, nil, "policy", "test", pd("tests_pass"), "--bundle", pd("payments.json"))
	if code != 0 || out != "8 passed, 0 failed\n" {
		t.Fatalf("passing tests: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Without --bundle the file that names no bundle fails, and says why.
	code, out, _ = runCLI(t, nil, "policy", "test", pd("tests_pass"))
	if code != 1 || !strings.Contains(out, "FAIL "+pd("tests_pass/default.yml")+": the default bundle applies") ||
		!strings.Contains(out, "no default bundle was given") || !strings.HasSuffix(out, "7 passed, 1 failed\n") {
		t.Fatalf("without --bundle: exit %d, stdout %q", code, out)
	}

	code, out, errOut = runCLI(t, nil, "policy", "test", pd("tests_fail"))
	want := "FAIL " + pd("tests_fail/payments.yaml") + ": the author expected a block\n" +
		"    --- want\n" +
		"    +++ got\n" +
		"    - outcome: BLOCK\n" +
		"    + outcome: ESCALATE\n" +
		"    - reason_codes: [PROTOCOL_OUTCOME_BLOCK, POLICY_MATCHED, LARGE_PAYMENT]\n" +
		"    + reason_codes: [PROTOCOL_OUTCOME_ESCALATE, POLICY_MATCHED, LARGE_PAYMENT]\n" +
		"      matched_rules: [big]\n" +
		"1 passed, 1 failed\n"
	if code != 1 || out != want {
		t.Fatalf("failing test: exit %d, stderr %q, stdout\n%s\nwant\n%s", code, errOut, out, want)
	}

	if code, _, errOut := runCLI(t, nil, "policy", "test", pd("no-such-dir")); code != 2 || !strings.Contains(errOut, "no-such-dir") {
		t.Fatalf("missing dir: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, nil, "policy", "test", pd("tests_pass"), "--bundle", pd("broken.yaml")); code != 1 || !strings.Contains(errOut, "3 problem(s)") {
		t.Fatalf("broken --bundle: exit %d, stderr %q", code, errOut)
	}
}

func TestPolicyEval(t *testing.T) {
	var got struct {
		Outcome        string          `json:"outcome"`
		ReasonCodes    []string        `json:"reason_codes"`
		MatchedRules   []string        `json:"matched_rules"`
		Mode           string          `json:"mode"`
		PolicySnapshot map[string]any  `json:"policy_snapshot"`
		Explanation    json.RawMessage `json:"explanation"`
	}
	code, out, errOut := runCLI(t, nil, "policy", "eval", pd("payments.yaml"), "--input", "@"+pd("intent.json"), "--now", "2026-03-01T10:00:00Z")
	if code != 0 {
		t.Fatalf("eval: exit %d, stderr %q", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("eval printed %q: %v", out, err)
	}
	if got.Outcome != "ESCALATE" || strings.Join(got.ReasonCodes, " ") != "PROTOCOL_OUTCOME_ESCALATE POLICY_MATCHED LARGE_PAYMENT" ||
		strings.Join(got.MatchedRules, " ") != "big" || got.Mode != "ENFORCEMENT" ||
		got.PolicySnapshot["bundle_id"] != "payments" || got.PolicySnapshot["policy_version"] != "2026.1" || got.Explanation != nil {
		t.Fatalf("eval printed %s", out)
	}

	got.Explanation = nil
	code, out, errOut = runCLI(t, nil, "policy", "eval", "--explain", pd("payments.json"),
		"--input", `{"decision_type": "PAYMENT", "amount": 20, "context": {"vendor_age_days": 3}}`)
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("eval --explain: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var ex map[string]any
	if got.Outcome != "REVIEW_REQUIRED" || json.Unmarshal(got.Explanation, &ex) != nil || ex["outcome"] != "REVIEW_REQUIRED" {
		t.Fatalf("eval --explain printed %s", out)
	}
	if rules, _ := ex["rules"].([]any); len(rules) != 2 {
		t.Fatalf("the explanation should trace both rules: %s", got.Explanation)
	}

	code, _, errOut = runCLI(t, nil, "policy", "eval", pd("payments.json"), "--input", `{"amount": -1}`)
	if code != 1 || !strings.Contains(errOut, "INVALID_AMOUNT") {
		t.Fatalf("refused input: exit %d, stderr %q", code, errOut)
	}
	if code, _, _ := runCLI(t, nil, "policy", "eval", pd("payments.json")); code != 2 {
		t.Fatalf("no --input: exit %d", code)
	}
	if code, _, _ := runCLI(t, nil, "policy", "eval", pd("payments.json"), "--input", "{}", "--now", "tomorrow"); code != 2 {
		t.Fatalf("bad --now: exit %d", code)
	}
}

func TestPolicyUsage(t *testing.T) {
	for _, sub := range []string{"check", "test", "eval", "replay", "push"} {
		code, out, errOut := runCLI(t, nil, "policy", sub, "-h")
		if code != 0 || !strings.HasPrefix(out, "usage: clearance policy "+sub) || errOut != "" {
			t.Errorf("policy %s -h: exit %d, stdout %q, stderr %q", sub, code, out, errOut)
		}
		code, out, errOut = runCLI(t, nil, "policy", sub, "--no-such-flag")
		if code != 2 || out != "" || !strings.Contains(errOut, "flag provided but not defined") || !strings.Contains(errOut, "usage: clearance policy "+sub) {
			t.Errorf("policy %s --no-such-flag: exit %d, stdout %q, stderr %q", sub, code, out, errOut)
		}
	}
	if code, out, _ := runCLI(t, nil, "policy", "-h"); code != 0 || !strings.Contains(out, "clearance policy replay") {
		t.Fatalf("policy -h: exit %d, stdout %q", code, out)
	}
	if code, _, errOut := runCLI(t, nil, "policy"); code != 2 || !strings.Contains(errOut, "usage:") {
		t.Fatalf("policy: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, nil, "policy", "frobnicate"); code != 2 || !strings.Contains(errOut, `unknown policy command "frobnicate"`) {
		t.Fatalf("policy frobnicate: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := runCLI(t, nil, "help"); code != 0 || !strings.Contains(out, "clearance policy check|test|eval|replay|push") {
		t.Fatalf("help lacks the policy command: %q", out)
	}
	// Usage errors of the server commands, before any request.
	env := []string{"CLEARANCE_API_KEY=", "CLEARANCE_SERVER=http://127.0.0.1:1"}
	for _, args := range [][]string{
		{"push", pd("payments.json")},                                          // no key
		{"push", pd("payments.json"), "--key", "k", "--draft", "d", "--stage"}, // both
		{"replay", "--key", "k", "--since", "1h"},                              // no candidate
		{"replay", "--key", "k", "--draft", "d", "--version", "v", "--since", "1h"},
		{"replay", "--key", "k", "--draft", "d"},                    // no --since
		{"replay", "--key", "k", "--draft", "d", "--since", "soon"}, // bad --since
		{"replay", "--key", "k", "--draft", "d", "--since", "-1h"},
		{"replay", "--key", "k", "--draft", "d", "--since", "2026-02-01T00:00:00Z", "--until", "2026-01-01T00:00:00Z"},
	} {
		if code, _, errOut := runCLI(t, env, append([]string{"policy"}, args...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr %q", args, code, errOut)
		}
	}
}

// policyOrg starts a server and creates an org; it returns the server and
// the org's API key.
func policyOrg(t *testing.T) (*proc, string) {
	t.Helper()
	dir := t.TempDir()
	s := startServer(t, dir)
	org := mustCall(t, "POST", s.url+"/v1/platform/orgs", platformKey(t, dir), `{"name":"Policy Authors"}`, http.StatusCreated)
	return s, str(org.json, "api_key")
}

type bundleListing struct {
	ActiveVersion string `json:"active_version"`
	Bundles       []struct {
		Version string `json:"version"`
		Active  bool   `json:"active"`
	} `json:"bundles"`
}

func listBundles(t *testing.T, s *proc, key string) bundleListing {
	t.Helper()
	var l bundleListing
	if err := json.Unmarshal(mustCall(t, "GET", s.url+"/v1/policies", key, "", http.StatusOK).raw, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func TestPolicyPush(t *testing.T) {
	s, key := policyOrg(t)
	// Publish and activate the YAML bundle, with the server and key from the environment.
	env := []string{"CLEARANCE_SERVER=" + s.url, "CLEARANCE_API_KEY=" + key}
	code, out, errOut := runCLI(t, env, "policy", "push", pd("payments.yaml"))
	var info map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info["version"] != "2026.1" {
		t.Fatalf("push: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if l := listBundles(t, s, key); l.ActiveVersion != "2026.1" || len(l.Bundles) != 1 {
		t.Fatalf("after push: %+v", l)
	}
	// Stage another version: listed, not active.
	code, _, errOut = runCLI(t, nil, "policy", "push", pd("payments_v2.yaml"), "--stage", "--server", s.url, "--key", key)
	if code != 0 {
		t.Fatalf("push --stage: exit %d, stderr %q", code, errOut)
	}
	if l := listBundles(t, s, key); l.ActiveVersion != "2026.1" || len(l.Bundles) != 2 {
		t.Fatalf("after push --stage: %+v", l)
	}
	// A bundle with problems is listed and never sent.
	code, out, errOut = runCLI(t, env, "policy", "push", pd("broken.yaml"))
	if code != 1 || strings.Count(out, "\n") != 3 || !strings.Contains(errOut, "nothing was sent") {
		t.Fatalf("push broken.yaml: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if l := listBundles(t, s, key); len(l.Bundles) != 2 {
		t.Fatalf("a broken bundle reached the server: %+v", l)
	}
	// The server's refusal: its status, code and detail.
	code, _, errOut = runCLI(t, nil, "policy", "push", pd("payments.json"), "--server", s.url, "--key", "clr_org_wrong")
	if code != 1 || !strings.Contains(errOut, "HTTP 401") {
		t.Fatalf("wrong key: exit %d, stderr %q", code, errOut)
	}
}

// requireRoute skips the test while the server has no route for method
// and path (the routes of drafts and replays are being added).
func requireRoute(t *testing.T, s *proc, key, method, path string) {
	t.Helper()
	r, err := call(http.DefaultClient, method, s.url+path, key, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.status == http.StatusNotFound && str(r.json, "code") == "ROUTE_NOT_FOUND" || r.status == http.StatusMethodNotAllowed {
		t.Skipf("route not yet present: %s %s answers %d", method, path, r.status)
	}
}

func TestPolicyPushDraft(t *testing.T) {
	s, key := policyOrg(t)
	requireRoute(t, s, key, "PUT", "/v1/policies/drafts/probe")
	code, out, errOut := runCLI(t, nil, "policy", "push", pd("payments.yaml"), "--draft", "next", "--server", s.url, "--key", key)
	var d map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || d["name"] != "next" {
		t.Fatalf("push --draft: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	got := mustCall(t, "GET", s.url+"/v1/policies/drafts/next", key, "", http.StatusOK)
	if b, _ := got.json["bundle"].(map[string]any); b["version"] != "2026.1" {
		t.Fatalf("draft: %s", got.raw)
	}
	if l := listBundles(t, s, key); len(l.Bundles) != 0 {
		t.Fatalf("a draft published a version: %+v", l)
	}
	// Pushing again replaces the draft (200).
	if code, _, errOut := runCLI(t, nil, "policy", "push", pd("payments_v2.yaml"), "--draft", "next", "--server", s.url, "--key", key); code != 0 {
		t.Fatalf("push --draft again: exit %d, stderr %q", code, errOut)
	}
}

func TestPolicyReplay(t *testing.T) {
	s, key := policyOrg(t)
	requireRoute(t, s, key, "GET", "/v1/policies/replays/none")
	// One recorded decision under the starter policy (ESCALATE at 2,500),
	// then a draft that blocks it.
	mustCall(t, "POST", s.url+"/v1/protocol/evaluate-decision", key, `{"decision_type":"PAYMENT","amount":2500}`, http.StatusOK)
	env := []string{"CLEARANCE_SERVER=" + s.url, "CLEARANCE_API_KEY=" + key}
	if code, _, errOut := runCLI(t, env, "policy", "push", pd("payments_v2.yaml"), "--draft", "strict"); code != 0 {
		t.Fatalf("push --draft: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runCLI(t, env, "policy", "replay", "--draft", "strict", "--since", "1h", "--examples", "5")
	var r struct {
		Status    string         `json:"status"`
		Candidate map[string]any `json:"candidate"`
		Examples  int            `json:"examples"`
		Result    struct {
			Replayed int `json:"replayed"`
			Changed  int `json:"changed"`
		} `json:"result"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("replay: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if r.Status != "done" || r.Candidate["draft"] != "strict" || r.Examples != 5 || r.Result.Replayed != 1 || r.Result.Changed != 1 {
		t.Fatalf("replay printed %s", out)
	}
	// An unknown version: the server's problem, exit 1.
	code, _, errOut = runCLI(t, env, "policy", "replay", "--version", "v404", "--since", "2026-01-01T00:00:00Z")
	if code != 1 || !strings.Contains(errOut, "HTTP 4") {
		t.Fatalf("replay of an unknown version: exit %d, stderr %q", code, errOut)
	}
}

// fakeReplays answers a replay with 202 and then its progress: each GET
// advances it by one step, ending in final ("done" or "failed").
type fakeReplays struct {
	mu    sync.Mutex
	steps int
	final string
	body  map[string]any
	auth  string
}

func (f *fakeReplays) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/policies/replays":
		f.auth = r.Header.Get("Authorization")
		_ = json.NewDecoder(r.Body).Decode(&f.body)
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"replay_id":"rp1","status":"queued","processed":0,"total":30}`))
	case r.Method == "GET" && r.URL.Path == "/v1/policies/replays/rp1":
		f.steps++
		switch {
		case f.steps < 3:
			_ = json.NewEncoder(w).Encode(map[string]any{"replay_id": "rp1", "status": "running", "processed": f.steps * 10, "total": 30})
		case f.final == "failed":
			_, _ = w.Write([]byte(`{"replay_id":"rp1","status":"failed","processed":20,"total":30,"failure":"the store went away"}`))
		default:
			_, _ = w.Write([]byte(`{"replay_id":"rp1","status":"done","processed":30,"total":30,"result":{"changed":4}}`))
		}
	default:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"title":"Not Found","code":"NOT_FOUND","detail":"no such route"}`))
	}
}

// TestPolicyReplayFollowsAQueuedReplay: a replay the server queues (202)
// is polled until it is done or failed, with progress on stderr.
func TestPolicyReplayFollowsAQueuedReplay(t *testing.T) {
	for _, final := range []string{"done", "failed"} {
		fake := &fakeReplays{final: final}
		srv := httptest.NewServer(fake)
		code, out, errOut := runCLI(t, nil, "policy", "replay", "--server", srv.URL, "--key", "clr_org_k",
			"--version", "2026.1", "--since", "2026-01-01T00:00:00Z", "--until", "2026-01-02T00:00:00Z")
		srv.Close()
		want := 0
		if final == "failed" {
			want = 1
		}
		if code != want || !strings.Contains(errOut, "processed 10 of 30\nprocessed 20 of 30\n") || !strings.Contains(out, `"status": "`+final+`"`) {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", final, code, out, errOut)
		}
		if final == "failed" && !strings.Contains(errOut, "the store went away") {
			t.Fatalf("failed replay: stderr %q", errOut)
		}
		fake.mu.Lock()
		body, auth := fake.body, fake.auth
		fake.mu.Unlock()
		if auth != "Bearer clr_org_k" || body["version"] != "2026.1" || body["from"] != "2026-01-01T00:00:00Z" ||
			body["to"] != "2026-01-02T00:00:00Z" || body["draft"] != nil || body["examples"] != nil {
			t.Fatalf("request: auth %q, body %v", auth, body)
		}
	}
	// --wait=false prints the queued replay and stops.
	fake := &fakeReplays{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	code, out, errOut := runCLI(t, nil, "policy", "replay", "--server", srv.URL, "--key", "k", "--draft", "d", "--since", "24h", "--wait=false")
	fake.mu.Lock()
	steps := fake.steps
	fake.mu.Unlock()
	if code != 0 || !strings.Contains(out, `"status": "queued"`) || steps != 0 {
		t.Fatalf("--wait=false: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// The README's policy commands work on the example as printed.
func TestPolicyExampleOfTheReadme(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "policy")
	if code, out, errOut := runCLI(t, nil, "policy", "check", filepath.Join(example, "bundle.yaml")); code != 0 || !strings.HasPrefix(out, "ok: payments ") {
		t.Fatalf("check: exit %d, %q %q", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, nil, "policy", "test", filepath.Join(example, "tests")); code != 0 || !strings.HasSuffix(out, " passed, 0 failed\n") {
		t.Fatalf("test: exit %d, %q %q", code, out, errOut)
	}
	code, out, errOut := runCLI(t, nil, "policy", "eval", filepath.Join(example, "bundle.yaml"), "--explain",
		"--input", `{"decision_type":"PAYMENT","amount":9000,"context":{"vendor_age_days":400}}`)
	if code != 0 || !strings.Contains(out, "amount below 5000.5 would ALLOW") {
		t.Fatalf("eval: exit %d, %q %q", code, out, errOut)
	}
}
