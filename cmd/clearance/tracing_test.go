package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export and
// hands its spans over.
type otlpReceiver struct {
	*httptest.Server
	spans chan receivedSpan
}

type receivedSpan struct {
	service, name, traceID string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{spans: make(chan receivedSpan, 1024)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP export %s %s (%s)", req.Method, req.URL.Path, req.Header.Get("Content-Type"))
			http.Error(w, "unexpected", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			t.Error(err)
			return
		}
		// An ExportTraceServiceRequest has the wire form of TracesData
		// (resource_spans = 1), which needs no gRPC packages to decode.
		var data tracepb.TracesData
		if err := proto.Unmarshal(body, &data); err != nil {
			t.Errorf("OTLP export does not decode: %v", err)
			return
		}
		for _, rs := range data.ResourceSpans {
			var service string
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					r.spans <- receivedSpan{service: service, name: s.Name, traceID: string(hexOf(s.TraceId))}
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.Close)
	return r
}

func hexOf(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return out
}

// await returns the first span named name of trace traceID the receiver
// got.
func (r *otlpReceiver) await(t *testing.T, name, traceID string) receivedSpan {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case s := <-r.spans:
			if s.name == name && s.traceID == traceID {
				return s
			}
		case <-timeout:
			t.Fatalf("the receiver got no span %q of trace %s", name, traceID)
		}
	}
}

// TestServeExportsTraces: with --otlp-endpoint, or with only the standard
// OTEL_EXPORTER_OTLP_ENDPOINT, a request's server span reaches the OTLP
// receiver (at the latest when SIGTERM flushes the exporter), continuing
// the caller's traceparent and naming the service "clearance".
func TestServeExportsTraces(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, viaEnv := range []bool{false, true} {
		rcv := newOTLPReceiver(t)
		var s *proc
		if viaEnv {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
			s = startServer(t, t.TempDir())
		} else {
			s = startServer(t, t.TempDir(), "--otlp-endpoint", rcv.URL)
		}
		res, err := call(http.DefaultClient, "GET", s.url+"/v1/health", "", "",
			map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"})
		if err != nil || res.status != http.StatusOK {
			t.Fatalf("health: %v %v", res, err)
		}
		if code := s.signal(syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d, stderr %s", code, s.stderr.String())
		}
		if got := rcv.await(t, "GET /v1/health", traceID); got.service != "clearance" {
			t.Fatalf("env %v: span %+v, want service clearance", viaEnv, got)
		}
		if !s.hasLog("tracing on: spans are exported over OTLP/HTTP") {
			t.Errorf("env %v: serve did not log that tracing is on", viaEnv)
		}
	}
}

// TestServeTracingFlags: bad tracing flags are refused before anything
// starts (exit 2); tracing is off by default.
func TestServeTracingFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--otlp-endpoint", "localhost:4318"},
		{"--otlp-endpoint", "http://collector:4318?x=1"},
		{"--trace-sample-ratio", "1.5"},
		{"--trace-sample-ratio", "-0.1"},
	} {
		code, _, errOut := runCLI(t, nil, append([]string{"serve", "--data", dir, "--addr", "127.0.0.1:0"}, args...)...)
		if code != 2 || !strings.Contains(errOut, strings.TrimPrefix(args[0], "--")) {
			t.Errorf("serve %v: exit %d, stderr %q", args, code, errOut)
		}
	}
	if got, err := tracesURL("https://collector.example:4318/prefix/"); err != nil || got != "https://collector.example:4318/prefix/v1/traces" {
		t.Errorf("tracesURL = %q, %v", got, err)
	}
	if (tracingConfig{sampleRatio: 1}).on(func(string) string { return "" }) {
		t.Error("tracing is on without an endpoint")
	}
}

// TestServeAccessLog: each request is an info line of serve's log without
// the credential; --access-log=false leaves successful requests unlogged.
func TestServeAccessLog(t *testing.T) {
	for _, on := range []bool{true, false} {
		dir := t.TempDir()
		var s *proc
		if on {
			s = startServer(t, dir)
		} else {
			s = startServer(t, dir, "--access-log=false")
		}
		plat := platformKey(t, dir)
		created := mustCall(t, "POST", s.url+"/v1/platform/orgs", plat, `{"name":"Acme"}`, http.StatusCreated)
		if code := s.signal(syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d", code)
		}
		requestID, orgKey := created.header.Get("X-Request-Id"), str(created.json, "api_key")
		var lines int
		for _, m := range s.logLines() {
			if m["msg"] == "request" && m["request_id"] == requestID {
				lines++
				if m["level"] != "INFO" || m["route"] != "POST /v1/platform/orgs" || m["status"] != 201.0 || m["method"] != "POST" {
					t.Errorf("access line %v", m)
				}
			}
			for k, v := range m {
				if text, _ := v.(string); strings.Contains(text, plat) || strings.Contains(text, orgKey) {
					t.Errorf("log line member %s carries a key", k)
				}
			}
		}
		if want := map[bool]int{true: 1, false: 0}[on]; lines != want {
			t.Errorf("access log on=%v: %d lines of the request, want %d", on, lines, want)
		}
	}
}
