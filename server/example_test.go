package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// ExampleNew serves the HTTP API of an Engine.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "clearance-server-example-")
	defer os.RemoveAll(dir)
	backend, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer backend.Close()
	engine, _ := clearance.Open(backend, clearance.Options{})

	srv := httptest.NewServer(server.New(engine, server.Options{}))
	defer srv.Close()

	res, err := http.Get(srv.URL + "/v1/protocol/reason-codes") // needs a key
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	fmt.Println(res.StatusCode, res.Header.Get("Content-Type"), len(body) > 0)
	// Output: 401 application/problem+json true
}

// ExampleNew_tracing traces each request with a server span named by its
// route pattern, continuing the caller's W3C traceparent; an engine given
// the same provider adds its spans (policy, store commit, signing) as
// children.
func ExampleNew_tracing() {
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer backend.Close()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	engine, _ := clearance.Open(backend, clearance.Options{TracerProvider: tp})
	h := server.New(engine, server.Options{TracerProvider: tp, DisableAccessLog: true})

	rq := httptest.NewRequest("GET", "/v1/health", nil)
	rq.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.ServeHTTP(httptest.NewRecorder(), rq)
	for _, s := range spans.Ended() {
		fmt.Println(s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID())
	}
	// Output: GET /v1/health 4bf92f3577b34da6a3ce929d0e0e4736 00f067aa0ba902b7
}
