package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

func TestLoadtestFlagErrors(t *testing.T) {
	t.Setenv("CLEARANCE_API_KEY", "")
	t.Setenv("CLEARANCE_PLATFORM_KEY", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nope"}, "flag provided but not defined"},
		{[]string{"--concurrency", "x"}, "invalid value"},
		{[]string{"--key", "k", "extra"}, "unexpected argument"},
		{[]string{"--key", "k", "--scenario", "soak"}, "unknown scenario"},
		{[]string{"--key", "k", "--concurrency", "0"}, "concurrency"},
		{[]string{"--key", "k", "--duration", "0s"}, "set a duration, a count or both"},
		{[]string{"--key", "k", "--count", "-3"}, "count must not be negative"},
		{[]string{"--key", "k", "--cycle-share", "0.5"}, "mixed only"},
		{[]string{"--key", "k", "--scenario", "mixed", "--cycle-share", "2"}, "cycle share"},
		{[]string{"--count", "5"}, "no credentials"},
		{[]string{"--key", "k", "--target", "http://192.0.2.7:8080"}, "--allow-remote"},
		{[]string{"--key", "k", "--target", "127.0.0.1:8080"}, "bad target"},
		{[]string{"--self", "--target", "http://127.0.0.1:9"}, "--self starts its own server"},
		{[]string{"--self", "--key", "k"}, "--self starts its own server"},
		{[]string{"--peer", "opa", "--scenario", "cycle"}, "evaluate scenario only"},
		{[]string{"--peer", "opa", "--scenario", "mixed"}, "evaluate scenario only"},
		{[]string{"--peer", "cedar"}, "unknown peer"},
		{[]string{"--peer", "opa", "--key", "k"}, "takes no --self, --key or --platform-key"},
		{[]string{"--peer", "opa", "--self"}, "takes no --self, --key or --platform-key"},
		{[]string{"--peer", "opa", "--opa-path", "a/../b"}, "bad OPA path"},
		{[]string{"--key", "k", "--opa-path", "a/b"}, "--peer opa only"},
		{[]string{"--peer", "opa", "--target", "http://192.0.2.7:8181"}, "--allow-remote"},
	} {
		var stdout, stderr bytes.Buffer
		if code := loadtest(context.Background(), tc.args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tc.args, code, stderr.String())
			continue
		}
		if !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("%v: stderr %q lacks %q (stdout %q)", tc.args, stderr.String(), tc.want, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := loadtest(context.Background(), []string{"-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "--self") ||
		!strings.Contains(stderr.String(), "--peer opa") || !strings.Contains(stderr.String(), "-opa-path") {
		t.Errorf("-h: exit %d, %q", code, stderr.String())
	}
}

// The one-command benchmark: its own server, 20 cycles, JSON out, and the
// temporary data dir gone afterwards.
func TestLoadtestSelfCycle(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var stdout, stderr bytes.Buffer
	code := loadtest(context.Background(), []string{"--self", "--count", "20", "--scenario", "cycle", "--quiet", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("--quiet wrote to stderr: %q", stderr.String())
	}
	var res struct {
		Scenario      string `json:"scenario"`
		SelfHosted    bool   `json:"self_hosted"`
		Operations    int64  `json:"operations"`
		Succeeded     int64  `json:"succeeded"`
		Pass          bool   `json:"pass"`
		ShouldExecute struct {
			True  int64 `json:"true"`
			False int64 `json:"false"`
		} `json:"should_execute"`
		Errors struct {
			Total int64 `json:"total"`
		} `json:"errors"`
		Steps map[string]struct {
			Count int64 `json:"count"`
			P99   int64 `json:"p99_us"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("json: %v\n%s", err, stdout.String())
	}
	if res.Scenario != "cycle" || !res.SelfHosted || res.Operations != 20 || res.Succeeded != 20 || !res.Pass ||
		res.ShouldExecute.True != 20 || res.ShouldExecute.False != 0 || res.Errors.Total != 0 {
		t.Fatalf("result %+v", res)
	}
	for _, s := range []string{"enforce_and_bind", "claim", "finalize"} {
		if res.Steps[s].Count != 20 || res.Steps[s].P99 <= 0 {
			t.Fatalf("step %s: %+v", s, res.Steps[s])
		}
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the temporary data dir was not removed: %v", left)
	}
}

// --peer opa drives an OPA-shaped server with the evaluate inputs wrapped in
// {"input": …}; Clearance credentials from the environment are not sent.
func TestLoadtestPeerOPA(t *testing.T) {
	t.Setenv("CLEARANCE_API_KEY", "clr_secret")
	var mu sync.Mutex
	var paths []string
	var auth bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		auth = auth || r.Header.Get("Authorization") != ""
		mu.Unlock()
		if r.Method == http.MethodGet {
			_, _ = w.Write([]byte("{}"))
			return
		}
		var body struct {
			Input struct {
				Amount float64 `json:"amount"`
			} `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		outcome, rule := "ALLOW", "amount-below-escalation"
		switch a := body.Input.Amount; {
		case a >= 10000:
			outcome, rule = "BLOCK", "amount-block"
		case a >= 1000:
			outcome, rule = "ESCALATE", "amount-escalation-band"
		}
		fmt.Fprintf(w, `{"result":{"outcome":%q,"rules":[%q]}}`, outcome, rule)
	}))
	defer hs.Close()
	var stdout, stderr bytes.Buffer
	code := loadtest(context.Background(), []string{"--peer", "opa", "--target", hs.URL, "--opa-path", "x/decision",
		"--count", "25", "--concurrency", "2", "--quiet", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
	}
	var res struct {
		Peer       string `json:"peer"`
		OPAPath    string `json:"opa_path"`
		Operations int64  `json:"operations"`
		Succeeded  int64  `json:"succeeded"`
		Pass       bool   `json:"pass"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("json: %v\n%s", err, stdout.String())
	}
	if res.Peer != "opa" || res.OPAPath != "x/decision" || res.Operations != 25 || res.Succeeded != 25 || !res.Pass {
		t.Fatalf("result %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if auth || len(paths) != 27 || paths[0] != "GET /health" || paths[1] != "POST /v1/data/x/decision" || paths[26] != "POST /v1/data/x/decision" {
		t.Fatalf("auth sent %v; requests %d: %v", auth, len(paths), paths[:min(3, len(paths))])
	}
}
