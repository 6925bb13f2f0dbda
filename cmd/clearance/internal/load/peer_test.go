package load_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/clearancehq/clearance/cmd/clearance/internal/load"
)

// fakeOPA mimics an OPA server holding starter.rego: GET /health, and POST
// /v1/data/<path> with {"input": …} answering {"result": decision}, or {}
// (an undefined document) on any other data path. wrong(n) makes the n-th
// decision (1-based, the setup's probe included) answer BLOCK for an
// ESCALATE or ALLOW input, and ALLOW for a BLOCK one.
type fakeOPA struct {
	path  string
	wrong func(n int64) bool

	n        atomic.Int64
	mu       sync.Mutex
	outcomes map[string]int
	bad      []string // requests that did not look like the evaluate scenario
}

func (f *fakeOPA) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/health":
		_, _ = w.Write([]byte("{}"))
		return
	case r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/data/"):
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":"resource_not_found","message":"not found"}`))
		return
	case r.URL.Path != "/v1/data/"+f.path:
		_, _ = w.Write([]byte("{}"))
		return
	}
	var body struct {
		Input map[string]any `json:"input"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"code":"invalid_parameter","message":"body contains malformed input document"}`))
		return
	}
	in := body.Input
	amount, _ := in["amount"].(json.Number).Float64()
	if len(in) != 3 || in["decision_type"] != "PAYMENT" || in["workflow_key"] != "loadtest" || r.Header.Get("Authorization") != "" {
		f.mu.Lock()
		f.bad = append(f.bad, r.Header.Get("Authorization")+" "+strings.TrimSpace(string(mustJSON(in))))
		f.mu.Unlock()
	}
	outcome, rule := "ALLOW", "amount-below-escalation"
	switch {
	case amount >= 10000:
		outcome, rule = "BLOCK", "amount-block"
	case amount >= 1000:
		outcome, rule = "ESCALATE", "amount-escalation-band"
	}
	f.mu.Lock()
	f.outcomes[outcome]++
	f.mu.Unlock()
	if f.wrong != nil && f.wrong(f.n.Add(1)) {
		if outcome == "BLOCK" {
			outcome = "ALLOW"
		} else {
			outcome = "BLOCK"
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"result": map[string]any{"outcome": outcome, "rules": []string{rule}}})
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func newFakeOPA(t *testing.T, path string, wrong func(int64) bool) (*fakeOPA, string) {
	f := &fakeOPA{path: path, wrong: wrong, outcomes: map[string]int{}}
	hs := httptest.NewServer(f)
	t.Cleanup(hs.Close)
	return f, hs.URL
}

// The evaluate scenario against OPA: the same inputs wrapped in {"input": …},
// no credentials, every answer checked against the starter policy.
func TestPeerOPA(t *testing.T) {
	f, url := newFakeOPA(t, "clearance/starter/decision", nil)
	res, err := load.Run(context.Background(), load.Config{Scenario: load.Evaluate, Target: url, Peer: load.PeerOPA,
		Concurrency: 4, Count: 300})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass || res.Operations != 300 || res.Succeeded != 300 || res.Requests != 300 || res.Errors.Total != 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Peer != load.PeerOPA || res.OPAPath != load.DefaultOPAPath || res.Steps["evaluate"].Count != 300 {
		t.Fatalf("peer %q path %q steps %+v", res.Peer, res.OPAPath, res.Steps)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bad) != 0 {
		t.Fatalf("requests unlike the evaluate scenario: %q", f.bad)
	}
	// 301 decisions (probe included) from the 70/20/10 % amount bands: each
	// band is all but certain to appear (a band is missed with
	// probability below 0.9^300).
	if f.outcomes["ALLOW"] == 0 || f.outcomes["ESCALATE"] == 0 || f.outcomes["BLOCK"] == 0 ||
		f.outcomes["ALLOW"]+f.outcomes["ESCALATE"]+f.outcomes["BLOCK"] != 301 {
		t.Fatalf("outcomes %v", f.outcomes)
	}
	var doc bytes.Buffer
	_ = res.WriteJSON(&doc)
	if !strings.Contains(doc.String(), `"peer": "opa"`) || !strings.Contains(doc.String(), `"opa_path": "clearance/starter/decision"`) {
		t.Fatalf("json:\n%s", doc.String())
	}
	var table bytes.Buffer
	_ = res.WriteTable(&table)
	if !strings.Contains(table.String(), "peer: OPA server") || !strings.Contains(table.String(), "result      PASS") {
		t.Fatalf("table:\n%s", table.String())
	}
	// A Clearance result says nothing of peers.
	clear := load.Result{}
	doc.Reset()
	_ = clear.WriteJSON(&doc)
	if strings.Contains(doc.String(), "peer") || strings.Contains(doc.String(), "opa_path") {
		t.Fatalf("clearance json mentions a peer:\n%s", doc.String())
	}
}

// An answer that is not the starter policy's decision is an error, and the
// run fails.
func TestPeerOPAMismatchIsAnError(t *testing.T) {
	_, url := newFakeOPA(t, "p/decision", func(n int64) bool { return n%2 == 0 }) // the probe is n = 1
	res, err := load.Run(context.Background(), load.Config{Scenario: load.Evaluate, Target: url, Peer: load.PeerOPA,
		OPAPath: "/p/decision/", Concurrency: 3, Count: 40})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pass || res.Operations != 40 || res.Failed != 20 || res.Succeeded != 20 || res.Errors.Total != 20 {
		t.Fatalf("result %+v", res)
	}
	if res.Errors.ByStatus["200"] != 20 || res.Errors.ByCode["WRONG_OUTCOME"] != 20 || res.Latency.Count != 20 {
		t.Fatalf("errors %+v latency %+v", res.Errors, res.Latency)
	}
	if res.OPAPath != "p/decision" || len(res.Failures) != 1 || !strings.Contains(res.Failures[0], "20 peer answers") {
		t.Fatalf("path %q failures %v", res.OPAPath, res.Failures)
	}
}

// Setup refuses a peer that is down, a data path with no decision, and a
// policy that is not the starter policy, with a clear error.
func TestPeerOPASetup(t *testing.T) {
	_, url := newFakeOPA(t, "clearance/starter/decision", nil)
	_, other := newFakeOPA(t, "clearance/starter/decision", func(int64) bool { return true })
	clearanceSrv := newServer(t, false)
	for _, tc := range []struct {
		target, path, want string
	}{
		{url, "clearance/starter/nope", `without a result: is "clearance/starter/nope" the data path`},
		{other, "", "the starter policy gives"},
		{clearanceSrv.url, "", "reach the OPA server: GET /health answered 404"},
	} {
		_, err := load.Run(context.Background(), load.Config{Scenario: load.Evaluate, Target: tc.target, Peer: load.PeerOPA,
			OPAPath: tc.path, Concurrency: 1, Count: 1})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.target, tc.path, err, tc.want)
		}
	}
}

func TestPeerValidate(t *testing.T) {
	ok := load.Config{Scenario: load.Evaluate, Target: "http://127.0.0.1:1", Peer: load.PeerOPA, Concurrency: 1, Count: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mut  func(*load.Config)
		want string
	}{
		{func(c *load.Config) { c.Scenario = load.Cycle }, "evaluate scenario only"},
		{func(c *load.Config) { c.Scenario = load.Mixed }, "evaluate scenario only"},
		{func(c *load.Config) { c.Peer = "cedar" }, "unknown peer"},
		{func(c *load.Config) { c.APIKey = "k" }, "no Clearance credentials"},
		{func(c *load.Config) { c.PlatformKey = "k" }, "no Clearance credentials"},
		{func(c *load.Config) { c.OPAPath = "/" }, "bad OPA path"},
		{func(c *load.Config) { c.OPAPath = "a//b" }, "bad OPA path"},
		{func(c *load.Config) { c.OPAPath = "a/../b" }, "bad OPA path"},
		{func(c *load.Config) { c.OPAPath = "a?x=1" }, "bad OPA path"},
		{func(c *load.Config) { c.Peer, c.APIKey, c.OPAPath = "", "k", "a/b" }, "opa peer only"},
	} {
		c := ok
		tc.mut(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", c, err, tc.want)
		}
	}
}
