package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/server"
)

// spanLog records every ended span and announces the server spans as they
// end, so a test waits for a request's span instead of sleeping: the
// server ends it after the answer is written.
type spanLog struct {
	*tracetest.SpanRecorder
	servers chan sdktrace.ReadOnlySpan
}

func newSpanLog() *spanLog {
	return &spanLog{SpanRecorder: tracetest.NewSpanRecorder(), servers: make(chan sdktrace.ReadOnlySpan, 256)}
}

func (l *spanLog) OnEnd(s sdktrace.ReadOnlySpan) {
	l.SpanRecorder.OnEnd(s)
	if s.SpanKind() == trace.SpanKindServer {
		l.servers <- s
	}
}

// await returns the next server span named name.
func (l *spanLog) await(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case s := <-l.servers:
			if s.Name() == name {
				return s
			}
		case <-timeout:
			t.Fatalf("no server span %q ended", name)
		}
	}
}

// children returns the ended spans whose parent is parent, by name.
func (l *spanLog) children(parent sdktrace.ReadOnlySpan) map[string][]sdktrace.ReadOnlySpan {
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range l.Ended() {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() && s.SpanContext().TraceID() == parent.SpanContext().TraceID() {
			out[s.Name()] = append(out[s.Name()], s)
		}
	}
	return out
}

// attr returns the value of a span's attribute ("" when absent).
func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// TestTraceOfEnforceAndBindAndClaim: with tracing on, an enforce-and-bind
// over HTTP is a server span named by its route pattern that continues the
// caller's W3C trace, with the policy evaluation, the grant's signing and
// the store commit as its children; a claim's span has the policy check,
// the store commit and the attestation's signing. No span carries the API
// key, the signed intent or a token.
func TestTraceOfEnforceAndBindAndClaim(t *testing.T) {
	spans := newSpanLog()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	x := newExecEnvWith(t, bandsBundle, func(x *execEnv) {
		x.opts.TracerProvider = tp
		x.tune = func(o *clearance.Options) { o.TracerProvider = tp }
	})

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	jws, _ := x.intent(t, intentSpec{})
	bound := x.bind(t, jws, map[string]string{"traceparent": "00-" + traceID + "-" + parentID + "-01"}).want(t, http.StatusOK)
	bind := spans.await(t, "POST /v1/authority/enforce-and-bind")
	if got := bind.SpanContext().TraceID().String(); got != traceID {
		t.Fatalf("the request's span is in trace %s, want the caller's %s", got, traceID)
	}
	if p := bind.Parent(); p.SpanID().String() != parentID || !p.IsRemote() {
		t.Fatalf("the request's span has parent %v (remote %v), want the caller's %s", p.SpanID(), p.IsRemote(), parentID)
	}
	if bind.SpanKind() != trace.SpanKindServer || attr(bind, "http.route") != "/v1/authority/enforce-and-bind" ||
		attr(bind, "http.request.method") != "POST" || attr(bind, "http.response.status_code") != "200" ||
		attr(bind, "clearance.request_id") != bound.Header.Get(server.HeaderRequestID) {
		t.Fatalf("request span: kind %v, attributes %v", bind.SpanKind(), bind.Attributes())
	}
	kids := spans.children(bind)
	for _, name := range []string{"clearance.policy.evaluate", "clearance.grant.sign", "clearance.store.commit"} {
		if len(kids[name]) == 0 {
			t.Errorf("enforce-and-bind has no child span %s; children: %v", name, names(kids))
		}
	}
	if p := kids["clearance.policy.evaluate"]; len(p) == 1 && (attr(p[0], "clearance.decision.outcome") != "ALLOW" ||
		attr(p[0], "clearance.decision.mode") != "ENFORCEMENT" || attr(p[0], "clearance.policy.version") != "v1") {
		t.Errorf("policy span attributes %v", p[0].Attributes())
	}
	for _, c := range kids["clearance.store.commit"] {
		if want := byBackend(t, "pebble", "postgresql"); attr(c, "db.system.name") != want || attr(c, "clearance.store.batch_size") == "" ||
			attr(c, "clearance.store.batch_size") == "0" {
			t.Errorf("store commit span attributes %v, want db.system.name %s and a batch", c.Attributes(), want)
		}
		if !c.EndTime().After(c.StartTime()) || c.StartTime().Before(bind.StartTime()) || c.EndTime().After(bind.EndTime()) {
			t.Errorf("store commit span %v–%v is not within its request's %v–%v", c.StartTime(), c.EndTime(), bind.StartTime(), bind.EndTime())
		}
	}

	token, hash := bound.str("execution_token"), bound.str("intent_hash")
	claimed := x.claimed(t, issued{token: token, hash: hash})
	claimSpan := spans.await(t, "POST /v1/execution/claim-token")
	if claimSpan.Parent().IsValid() {
		t.Fatalf("a request without traceparent has parent %v, want a new trace", claimSpan.Parent())
	}
	kids = spans.children(claimSpan)
	for _, name := range []string{"clearance.policy.evaluate", "clearance.store.commit", "clearance.attestation.sign"} {
		if len(kids[name]) != 1 {
			t.Errorf("claim has %d child spans %s, want 1; children: %v", len(kids[name]), name, names(kids))
		}
	}

	secrets := []string{x.o.Key, jws, token, claimed.str("claim_token"), claimed.str("claim_attestation")}
	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			for _, secret := range secrets {
				if strings.Contains(kv.Value.Emit(), secret) {
					t.Errorf("span %s attribute %s carries a secret", s.Name(), kv.Key)
				}
			}
		}
	}
}

func names(m map[string][]sdktrace.ReadOnlySpan) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	return out
}

// TestMetricsAfterACycle: after grant → claim → finalize, a claim refused,
// a forged token and a finalization refused, /metrics has the families of
// store commits, claims, finalizations, grant verification failures, job
// queues and ledger sealing with the values of what happened, and the whole
// page (with the Go and process collectors serve adds) passes promlint.
func TestMetricsAfterACycle(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	x := newExecEnvWith(t, bandsBundle, func(x *execEnv) { x.opts.Registerer = reg })

	g := x.grantFor(t, intentSpec{})
	c := x.claimed(t, g)
	wantFailedClaim(t, x.claim(t, pathClaim, g.token, g.hash), claim.CodeReplay)
	x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil).wantProblem(t, http.StatusConflict, claim.CodeAlreadyFinalized)
	forged := g.token[:len(g.token)-4] + "AAAA"
	x.req(t, "POST", pathVerifyToken, x.o.Key, map[string]any{"execution_token": forged, "intent_hash": g.hash}, nil).
		wantProblem(t, http.StatusConflict, clearance.CodeGrantInvalid)
	wantFailedClaim(t, x.claim(t, pathClaim, forged, g.hash), clearance.CodeGrantInvalid)

	page := x.req(t, "GET", "/metrics", x.platform, nil, nil).want(t, http.StatusOK)
	problems, err := promlint.New(bytes.NewReader(page.Raw)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(page.Raw))
	if err != nil {
		t.Fatal(err)
	}
	value := func(family string, labels map[string]string) (float64, bool) {
		f := families[family]
		if f == nil {
			return 0, false
		}
	next:
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
		return 0, false
	}
	backend := byBackend(t, "pebble", "postgresql")
	for _, w := range []struct {
		family string
		labels map[string]string
		want   float64
	}{
		{"clearance_claims_total", map[string]string{"outcome": "won", "code": ""}, 1},
		{"clearance_claims_total", map[string]string{"outcome": "refused", "code": claim.CodeReplay}, 1},
		{"clearance_claims_total", map[string]string{"outcome": "refused", "code": clearance.CodeGrantInvalid}, 1},
		{"clearance_finalizations_total", map[string]string{"outcome": "committed", "code": ""}, 1},
		{"clearance_finalizations_total", map[string]string{"outcome": "refused", "code": claim.CodeAlreadyFinalized}, 1},
		{"clearance_grant_verification_failures_total", map[string]string{"code": clearance.CodeGrantInvalid}, 2},
		{"clearance_job_queue_depth", map[string]string{"queue": "outbox"}, 0},
		{"clearance_job_queue_depth", map[string]string{"queue": "export"}, 0},
	} {
		if got, ok := value(w.family, w.labels); !ok || got != w.want {
			t.Errorf("%s%v = %v (present %v), want %v", w.family, w.labels, got, ok, w.want)
		}
	}
	if _, ok := value("clearance_finalizations_total", map[string]string{"code": clearance.CodeGrantInvalid}); ok {
		t.Error("a finalization refused for its state counted as a grant verification failure")
	}
	for _, q := range clearance.JobQueues() {
		if _, ok := value("clearance_job_queue_depth", map[string]string{"queue": q}); !ok {
			t.Errorf("no queue depth of %s", q)
		}
	}
	// Every write of the cycle committed: the org, keys, bundle, grant,
	// claim, finalization (the refused finalization wrote its refusal too).
	commits, ok := value("clearance_store_commit_duration_seconds", map[string]string{"backend": backend})
	if batches, _ := value("clearance_store_commit_batch_size", map[string]string{"backend": backend}); !ok || commits < 6 || batches != commits {
		t.Errorf("store commits %v (present %v), batch-size samples %v: want one of each per commit, at least 6", commits, ok, batches)
	}
	// Pebble tells what its caches hold (a memtable is allocated from the
	// start), within their size; PostgreSQL's are in the database.
	memtables, hasMemory := value("clearance_store_cache_bytes", map[string]string{"cache": "memtables"})
	_, hasBlocks := value("clearance_store_cache_bytes", map[string]string{"cache": "block_cache"})
	limit, _ := value("clearance_store_cache_limit_bytes", nil)
	switch backend {
	case "pebble":
		if !hasMemory || !hasBlocks || memtables <= 0 || memtables > limit {
			t.Errorf("store caches: memtables %v (present %v), block cache present %v, limit %v", memtables, hasMemory, hasBlocks, limit)
		}
	default:
		if hasMemory || hasBlocks {
			t.Errorf("store cache memory reported on %s", backend)
		}
	}
	// Nothing seals in this server (no Run): its writes wait for a checkpoint.
	if age, ok := value("clearance_ledger_unsealed_age_seconds", nil); !ok || age <= 0 {
		t.Errorf("unsealed age %v (present %v), want > 0", age, ok)
	}
}

// lineLog is a JSON logger whose lines a test reads, announcing each.
type lineLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan map[string]any
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var m map[string]any
	if err := json.Unmarshal(p, &m); err == nil {
		l.lines <- m
	}
	return l.buf.Write(p)
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// await returns the next line whose request_id is id.
func (l *lineLog) await(t *testing.T, id string) map[string]any {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-l.lines:
			if m["request_id"] == id {
				return m
			}
		case <-timeout:
			t.Fatalf("no log line of request %s", id)
		}
	}
}

// TestAccessLog: a request is one info line naming the route pattern,
// status, duration, request id, org and response size, and nothing the
// client sent that may be secret: the Authorization header, a query
// string's sig=, the body. DisableAccessLog (--access-log=false) leaves
// it unlogged.
func TestAccessLog(t *testing.T) {
	logs := &lineLog{lines: make(chan map[string]any, 256)}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e := newEnv(t, server.Options{RateLimit: -1, Logger: logger})
	o := e.createOrg("Logged")
	const bodySecret, sigSecret = "body-secret-4711", "sig-secret-0815"
	path := "/v1/protocol/evaluate-decision?sig=" + sigSecret
	body := `{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":2500,"note":"` + bodySecret + `"}`
	r := e.do("POST", path, o.Key, body, nil)
	if r.Status != http.StatusBadRequest {
		t.Fatalf("evaluate with an unknown member: %s", r)
	}
	id := r.Header.Get(server.HeaderRequestID)
	line := logs.await(t, id)
	want := map[string]any{"level": "INFO", "msg": "request", "method": "POST", "route": "POST /v1/protocol/evaluate-decision",
		"status": float64(r.Status), "org_id": o.ID, "bytes": float64(len(r.Raw))}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("access line %s = %v, want %v: %v", k, line[k], v, line)
		}
	}
	if d, ok := line["duration_ms"].(float64); !ok || d < 0 {
		t.Errorf("access line duration_ms = %v", line["duration_ms"])
	}
	if n := strings.Count(logs.String(), `"request_id":"`+id+`"`); n != 1 {
		t.Errorf("request %s logged %d times, want once", id, n)
	}
	for _, secret := range []string{o.Key, "Bearer", sigSecret, "sig=", bodySecret, e.platform} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log carries %q", secret)
		}
	}

	// Off: served in this goroutine, so the line would be written by now.
	quiet := server.New(e.engine, server.Options{RateLimit: -1, Logger: logger, DisableAccessLog: true})
	rq := httptest.NewRequest("POST", path, strings.NewReader(body))
	rq.Header.Set("Authorization", "Bearer "+o.Key)
	rq.Header.Set(server.HeaderRequestID, "quiet-request")
	rec := httptest.NewRecorder()
	quiet.ServeHTTP(rec, rq)
	if rec.Code != http.StatusBadRequest || strings.Contains(logs.String(), "quiet-request") {
		t.Fatalf("access log off: status %d, log %s", rec.Code, logs.String())
	}
}
