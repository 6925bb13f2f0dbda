package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
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
	if code := loadtest(context.Background(), []string{"-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "--self") {
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
