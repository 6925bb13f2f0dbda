package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/clearancehq/clearance/tenant"
)

// tracerName is the instrumentation scope of the server's spans.
const tracerName = "github.com/clearancehq/clearance/server"

// startSpan starts the server span of a request, continuing the trace of
// its W3C traceparent header. Its name and attributes are the method and
// the route pattern: never the path itself, whose segments may be secrets
// (a share link's token), nor the query string.
func (s *Server) startSpan(r *http.Request, method, routePath string) (context.Context, trace.Span) {
	ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if method == "" {
		method = r.Method
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return s.tracer.Start(ctx, method+" "+routePath, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", routePath),
			attribute.String("url.scheme", scheme)))
}

// endSpan ends a request's span with its status (a 5xx is an error, as
// the semantic conventions of server spans have it) and request id.
func endSpan(span trace.Span, c *call) {
	span.SetAttributes(attribute.Int("http.response.status_code", c.status), attribute.String("clearance.request_id", c.requestID))
	if serverError(c.status) {
		span.SetStatus(codes.Error, http.StatusText(c.status))
	}
	span.End()
}

// logAccess writes the access log line of a request: at info level unless
// Options.DisableAccessLog, at warn level for a 5xx either way. It names
// the route pattern, never the path or query string (a share link's token,
// a reader URL's sig=), and no header or body.
func (s *Server) logAccess(route string, c *call, d time.Duration, span trace.Span) {
	level := slog.LevelInfo
	switch {
	case serverError(c.status):
		level = slog.LevelWarn
	case s.opts.DisableAccessLog:
		return
	}
	ctx := c.r.Context()
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := [9]slog.Attr{
		slog.String("method", c.r.Method), slog.String("route", route), slog.Int("status", c.status),
		slog.Float64("duration_ms", float64(d.Microseconds())/1000), slog.String("request_id", c.requestID),
		slog.Int64("bytes", c.out.bytes),
	}
	n := 6
	if org := c.principal.OrgID; org != "" && org != tenant.PlatformOrgID {
		attrs[n] = slog.String("org_id", org)
		n++
	}
	if span != nil {
		if sc := span.SpanContext(); sc.IsValid() {
			attrs[n] = slog.String("trace_id", sc.TraceID().String())
			n++
		}
	}
	s.log.LogAttrs(ctx, level, "request", attrs[:n]...)
}

// countingWriter counts the bytes of a response body.
type countingWriter struct {
	http.ResponseWriter
	bytes int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer
// (flushes of event streams, write deadlines).
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
