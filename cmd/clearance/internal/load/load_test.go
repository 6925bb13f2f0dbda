package load_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/cmd/clearance/internal/load"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store/pebblestore"
)

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(f string, a ...any) {
	panic("pebble fatal: " + f)
}

// testServer is an in-process Clearance server (rate limit off) and its
// platform key. Without signing it cannot issue grants.
type testServer struct {
	url, platform string
	engine        *clearance.Engine
}

func newServer(t *testing.T, signing bool) testServer {
	t.Helper()
	return newLimitedServer(t, signing, server.Options{RateLimit: -1})
}

// newLimitedServer is newServer with server options of its own.
func newLimitedServer(t *testing.T, signing bool, sopts server.Options) testServer {
	t.Helper()
	return newWrappedServer(t, signing, sopts, nil)
}

// newWrappedServer is newLimitedServer whose handler wrap wraps (nil: none).
func newWrappedServer(t *testing.T, signing bool, sopts server.Options, wrap func(http.Handler) http.Handler) testServer {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var opts clearance.Options
	if signing {
		k, err := grant.NewKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		opts.GrantKeys = grant.NewKeyRing(k)
	}
	eng, err := clearance.Open(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := eng.Admin.NewPlatformSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Admin.EnsurePlatformKey(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	var h http.Handler = server.New(eng, sopts)
	if wrap != nil {
		h = wrap(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return testServer{url: hs.URL, platform: secret, engine: eng}
}

func TestScenarios(t *testing.T) {
	srv := newServer(t, true)
	cases := []struct {
		scenario                   load.Scenario
		share                      float64
		count, cycles, evaluations int64
		steps                      []string
	}{
		{load.Evaluate, 0, 40, 0, 40, []string{"evaluate"}},
		{load.Cycle, 0, 30, 30, 0, []string{"enforce_and_bind", "claim", "finalize"}},
		{load.Mixed, 0.25, 40, 10, 30, []string{"evaluate", "enforce_and_bind", "claim", "finalize"}},
	}
	for _, tc := range cases {
		t.Run(string(tc.scenario), func(t *testing.T) {
			var progress bytes.Buffer
			res, err := load.Run(context.Background(), load.Config{Scenario: tc.scenario, Target: srv.url, PlatformKey: srv.platform,
				CycleShare: tc.share, Concurrency: 4, Count: tc.count, Progress: &progress})
			if err != nil {
				t.Fatal(err)
			}
			if res.Operations != tc.count || res.Succeeded != tc.count || res.Failed != 0 || res.Errors.Total != 0 || !res.Pass {
				t.Fatalf("result %+v", res)
			}
			wantReq := tc.evaluations + 3*tc.cycles
			if res.Requests != wantReq {
				t.Fatalf("requests %d, want %d", res.Requests, wantReq)
			}
			if res.Latency.Count != tc.count || res.OpsPerSecond <= 0 || res.Latency.P50US <= 0 || res.Latency.MaxUS < res.Latency.P99US {
				t.Fatalf("latency %+v, %v ops/s", res.Latency, res.OpsPerSecond)
			}
			if tc.cycles > 0 {
				if res.ShouldExecute == nil || res.ShouldExecute.True != tc.cycles || res.ShouldExecute.False != 0 {
					t.Fatalf("should_execute %+v, want %d true", res.ShouldExecute, tc.cycles)
				}
				if res.Kinds["cycle"].Count != tc.cycles {
					t.Fatalf("cycles %+v", res.Kinds)
				}
			} else if res.ShouldExecute != nil {
				t.Fatalf("should_execute without cycles: %+v", res.ShouldExecute)
			}
			if tc.evaluations > 0 && res.Kinds["evaluate"].Count != tc.evaluations {
				t.Fatalf("evaluations %+v", res.Kinds)
			}
			for _, s := range tc.steps {
				want := tc.cycles
				if s == "evaluate" {
					want = tc.evaluations
				}
				if res.Steps[s].Count != want {
					t.Fatalf("step %s: %+v, want %d", s, res.Steps[s], want)
				}
			}
			if len(res.Steps) != len(tc.steps) {
				t.Fatalf("steps %v, want %v", res.Steps, tc.steps)
			}
			checkJSON(t, res, tc.count, tc.steps)

			var table bytes.Buffer
			if err := res.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"throughput", "p99.9", "errors      none", "result      PASS"} {
				if !strings.Contains(table.String(), want) {
					t.Fatalf("table lacks %q:\n%s", want, table.String())
				}
			}
		})
	}
}

// checkJSON checks that the JSON document parses with its documented fields.
func checkJSON(t *testing.T, res *load.Result, count int64, steps []string) {
	t.Helper()
	var buf bytes.Buffer
	if err := res.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("json: %v\n%s", err, buf.String())
	}
	for _, f := range []string{"format", "scenario", "target", "self_hosted", "concurrency", "cycle_share", "warmup_seconds",
		"elapsed_seconds", "operations", "succeeded", "failed", "ops_per_second", "requests", "requests_per_second", "latency",
		"operations_by_kind", "steps", "errors", "pass", "failures", "machine", "started_at"} {
		if _, ok := doc[f]; !ok {
			t.Errorf("json lacks %q", f)
		}
	}
	if doc["format"] != 1.0 || doc["operations"] != float64(count) || doc["pass"] != true {
		t.Errorf("json %v", doc)
	}
	lat := doc["latency"].(map[string]any)
	for _, f := range []string{"count", "mean_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us"} {
		if _, ok := lat[f]; !ok {
			t.Errorf("latency lacks %q", f)
		}
	}
	st := doc["steps"].(map[string]any)
	for _, s := range steps {
		if _, ok := st[s]; !ok {
			t.Errorf("steps lack %q", s)
		}
	}
	errs := doc["errors"].(map[string]any)
	for _, f := range []string{"total", "by_status", "by_code"} {
		if _, ok := errs[f]; !ok {
			t.Errorf("errors lack %q", f)
		}
	}
}

// An org API key works instead of the platform key; a duration run with a
// warmup measures only after it, and prints progress.
func TestAPIKeyAndDuration(t *testing.T) {
	srv := newServer(t, true)
	org, err := srv.engine.Admin.CreateOrg(context.Background(), "Existing")
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	res, err := load.Run(context.Background(), load.Config{Scenario: load.Mixed, Target: srv.url, APIKey: org.Key.Secret,
		CycleShare: 0.5, Concurrency: 3, Duration: 1100 * time.Millisecond, Warmup: 200 * time.Millisecond, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass || res.Operations == 0 || res.ShouldExecute.True == 0 || res.ShouldExecute.False != 0 {
		t.Fatalf("result %+v", res)
	}
	if res.ElapsedSeconds < 1 || res.ElapsedSeconds > 3 || res.WarmupSeconds != 0.2 {
		t.Fatalf("elapsed %v warmup %v", res.ElapsedSeconds, res.WarmupSeconds)
	}
	if !strings.Contains(progress.String(), "warming up") || !strings.Contains(progress.String(), "ops/s") {
		t.Fatalf("progress %q", progress.String())
	}
}

// TestRefusedRequestsFailTheRun: a run the server's rate limit partly
// refused measured the refusals, so it fails and says why; a run that
// creates its org gives each client its own key, which the per-credential
// limit meters separately.
func TestRefusedRequestsFailTheRun(t *testing.T) {
	// 30 requests of burst per key, refilled at 10/s: one key cannot carry
	// 200 requests in under 17 s, eight keys carry 25 each at once.
	srv := newLimitedServer(t, false, server.Options{RateLimit: 10, RateBurst: 30})
	ctx := context.Background()
	res, err := load.Run(ctx, load.Config{Scenario: load.Evaluate, Target: srv.url, PlatformKey: srv.platform, Concurrency: 8, Count: 200})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass || res.Succeeded != 200 || res.Errors.Total != 0 {
		t.Fatalf("eight clients with their own keys: %+v", res)
	}
	org, err := srv.engine.Admin.CreateOrg(ctx, "one key")
	if err != nil {
		t.Fatal(err)
	}
	res, err = load.Run(ctx, load.Config{Scenario: load.Evaluate, Target: srv.url, APIKey: org.Key.Secret, Concurrency: 8, Count: 200})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pass || res.Errors.ByStatus["429"] == 0 || len(res.Failures) != 1 || !strings.Contains(res.Failures[0], "rate limit") {
		t.Fatalf("one shared key: pass %v errors %+v failures %v", res.Pass, res.Errors, res.Failures)
	}
	var table bytes.Buffer
	_ = res.WriteTable(&table)
	if !strings.Contains(table.String(), "FAIL") || !strings.Contains(table.String(), "--rate-limit -1") {
		t.Fatalf("table:\n%s", table.String())
	}
}

// A server that cannot sign answers enforce-and-bind 503: the run fails,
// with the errors by status and code, and no cycle executes.
func TestFailuresAreCounted(t *testing.T) {
	srv := newServer(t, false)
	res, err := load.Run(context.Background(), load.Config{Scenario: load.Cycle, Target: srv.url, PlatformKey: srv.platform,
		Concurrency: 2, Count: 6})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pass || res.Operations != 6 || res.Failed != 6 || res.ShouldExecute.False != 6 || res.Errors.Total != 6 {
		t.Fatalf("result %+v", res)
	}
	if res.Errors.ByStatus["503"] != 6 || res.Errors.ByCode["SIGNING_NOT_CONFIGURED"] != 6 || len(res.Failures) != 2 {
		t.Fatalf("errors %+v failures %v", res.Errors, res.Failures)
	}
	var table bytes.Buffer
	_ = res.WriteTable(&table)
	if !strings.Contains(table.String(), "503×6") || !strings.Contains(table.String(), "FAIL") {
		t.Fatalf("table:\n%s", table.String())
	}
	// A bad key fails the setup with a clear error.
	if _, err := load.Run(context.Background(), load.Config{Scenario: load.Evaluate, Target: srv.url, PlatformKey: "clr_nope",
		Concurrency: 1, Count: 1}); err == nil || !strings.Contains(err.Error(), "create org") {
		t.Fatalf("bad platform key: %v", err)
	}
}

// A cancelled context stops the workers; operations it cut short are not
// counted as errors.
func TestCancelStops(t *testing.T) {
	srv := newServer(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	res, err := load.Run(ctx, load.Config{Scenario: load.Cycle, Target: srv.url, PlatformKey: srv.platform,
		Concurrency: 4, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 10*time.Second || res.Errors.Total != 0 || res.Operations == 0 || !res.Pass {
		t.Fatalf("after cancel: %v, %+v", time.Since(start), res)
	}
}

// TestRatePaces: with a rate, the workers together start no more
// operations than the rate allows, however many they are.
func TestRatePaces(t *testing.T) {
	srv := newServer(t, true)
	const pace = 40.0
	res, err := load.Run(context.Background(), load.Config{Scenario: load.Mixed, Target: srv.url, PlatformKey: srv.platform,
		Concurrency: 8, Duration: time.Second, Rate: pace})
	if err != nil {
		t.Fatal(err)
	}
	// A burst of one: the first operation at once, then one per 1/pace.
	if !res.Pass || res.Rate != pace || res.Operations < 2 || res.Operations > int64(pace)+1 {
		t.Fatalf("%d operations in %vs at a rate of %v: %+v", res.Operations, res.ElapsedSeconds, pace, res)
	}
}

func TestRemoteTargetRefused(t *testing.T) {
	for _, target := range []string{"http://10.1.2.3:8080", "https://example.com", "http://[2001:db8::1]:8080", "http://0.0.0.0:8080"} {
		err := load.CheckTarget(target, false)
		if err == nil || !strings.Contains(err.Error(), "--allow-remote") {
			t.Errorf("%s: %v", target, err)
		}
		if err := load.CheckTarget(target, true); err != nil {
			t.Errorf("%s with allow-remote: %v", target, err)
		}
		_, err = load.Run(context.Background(), load.Config{Scenario: load.Evaluate, Target: target, APIKey: "k", Concurrency: 1, Count: 1})
		if err == nil || !strings.Contains(err.Error(), "not a loopback") {
			t.Errorf("run %s: %v", target, err)
		}
	}
	for _, target := range []string{"http://127.0.0.1:8080", "http://localhost:1", "http://[::1]:8080", "https://127.0.0.9"} {
		if err := load.CheckTarget(target, false); err != nil {
			t.Errorf("%s: %v", target, err)
		}
	}
	for _, target := range []string{"", "127.0.0.1:8080", "ftp://127.0.0.1", "http://127.0.0.1/?q=1", "http://u:p@127.0.0.1"} {
		if err := load.CheckTarget(target, true); err == nil {
			t.Errorf("%q accepted", target)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := load.Config{Scenario: load.Evaluate, Target: "http://127.0.0.1:1", APIKey: "k", Concurrency: 1, Count: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*load.Config){
		"scenario":    func(c *load.Config) { c.Scenario = "soak" },
		"credentials": func(c *load.Config) { c.APIKey = "" },
		"concurrency": func(c *load.Config) { c.Concurrency = 0 },
		"unbounded":   func(c *load.Config) { c.Count = 0 },
		"share":       func(c *load.Config) { c.CycleShare = 1.5 },
		"count":       func(c *load.Config) { c.Count = -1 },
		"rate":        func(c *load.Config) { c.Rate = -1 },
		"rate NaN":    func(c *load.Config) { c.Rate = math.NaN() },
		"rate Inf":    func(c *load.Config) { c.Rate = math.Inf(1) },
	} {
		c := ok
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Prefill records its decisions before the measured ones, and reports them
// apart: the server holds both.
func TestPrefill(t *testing.T) {
	srv := newServer(t, false)
	ctx := context.Background()
	org, err := srv.engine.Admin.CreateOrg(ctx, "Filled")
	if err != nil {
		t.Fatal(err)
	}
	res, err := load.Run(ctx, load.Config{Scenario: load.Evaluate, Target: srv.url, APIKey: org.Key.Secret,
		Concurrency: 4, Count: 20, Prefill: 150})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass || res.Operations != 20 || res.Prefill == nil || res.Prefill.Decisions != 150 || res.Prefill.PerSecond <= 0 {
		t.Fatalf("result %+v, prefill %+v", res, res.Prefill)
	}
	rep, err := srv.engine.Audit.VerifyLedger(ctx, org.Org.ID)
	if err != nil || !rep.Valid {
		t.Fatal(rep, err)
	}
	if rep.HeadSeq < 170 {
		t.Fatalf("the ledger holds %d entries; want the 150 prefilled and 20 measured decisions", rep.HeadSeq)
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil || !strings.Contains(table.String(), "prefill     150 decisions") {
		t.Fatalf("table:\n%s", table.String())
	}
}

// A fill that fails stops the run before it measures anything.
func TestPrefillFailureStops(t *testing.T) {
	srv := newLimitedServer(t, false, server.Options{RateLimit: 1, RateBurst: 5})
	org, err := srv.engine.Admin.CreateOrg(context.Background(), "Limited")
	if err != nil {
		t.Fatal(err)
	}
	_, err = load.Run(context.Background(), load.Config{Scenario: load.Evaluate, Target: srv.url, APIKey: org.Key.Secret,
		Concurrency: 2, Count: 5, Prefill: 100})
	if err == nil || !strings.Contains(err.Error(), "prefill: a decision failed (status 429") {
		t.Fatalf("err %v", err)
	}
}

// Orgs spreads the workers over that many orgs the run creates, each worker
// with its own key; cycles work in every org (the agent key is registered
// and the bundle published in each).
func TestManyOrgs(t *testing.T) {
	var mu sync.Mutex
	created, senders := 0, map[string]bool{}
	srv := newWrappedServer(t, true, server.Options{RateLimit: -1}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			switch r.URL.Path {
			case "/v1/platform/orgs":
				created++
			case "/v1/protocol/evaluate-decision", "/v1/authority/enforce-and-bind":
				senders[r.Header.Get("Authorization")] = true
			}
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	})
	res, err := load.Run(context.Background(), load.Config{Scenario: load.Mixed, CycleShare: 0.5, Target: srv.url,
		PlatformKey: srv.platform, Orgs: 3, Concurrency: 6, Count: 60})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass || res.Orgs != 3 || res.ShouldExecute.True == 0 || res.ShouldExecute.False != 0 {
		t.Fatalf("result %+v", res)
	}
	if created != 3 || len(senders) != 6 {
		t.Fatalf("created %d orgs, %d credentials sent decisions; want 3 and 6", created, len(senders))
	}
	if _, err := load.Run(context.Background(), load.Config{Scenario: load.Evaluate, Target: srv.url, APIKey: "clr_org_x",
		Orgs: 2, Concurrency: 2, Count: 1}); err == nil || !strings.Contains(err.Error(), "platform key") {
		t.Fatalf("two orgs with an org key: %v", err)
	}
}
