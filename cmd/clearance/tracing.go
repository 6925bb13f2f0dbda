package main

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/clearancehq/clearance"
)

// tracingConfig is how serve exports traces.
type tracingConfig struct {
	// endpoint is --otlp-endpoint: the OTLP/HTTP base URL, as
	// OTEL_EXPORTER_OTLP_ENDPOINT is one (traces go to its path +
	// "/v1/traces"); "" leaves the endpoint to the OTEL_EXPORTER_OTLP_*
	// variables.
	endpoint string
	// sampleRatio is --trace-sample-ratio: the share of new traces
	// sampled; a request with a traceparent follows its sampled flag.
	sampleRatio float64
}

// on reports whether serve exports traces: --otlp-endpoint, or one
// of the standard endpoint variables, is set.
func (c tracingConfig) on(getenv func(string) string) bool {
	return c.endpoint != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// check refuses a flag value the exporter would silently replace with its
// default.
func (c tracingConfig) check() error {
	if c.sampleRatio < 0 || c.sampleRatio > 1 {
		return fmt.Errorf("bad --trace-sample-ratio %v: want 0 to 1", c.sampleRatio)
	}
	if c.endpoint == "" {
		return nil
	}
	if _, err := tracesURL(c.endpoint); err != nil {
		return err
	}
	return nil
}

// tracesURL is the traces URL of an OTLP/HTTP base endpoint: its path +
// "/v1/traces", as the OTLP exporter specification appends it to
// OTEL_EXPORTER_OTLP_ENDPOINT.
func tracesURL(endpoint string) (string, error) {
	u, err := neturl.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("bad --otlp-endpoint %q: want an http or https base URL such as http://localhost:4318", endpoint)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	return u.String(), nil
}

// newTracerProvider returns the tracer provider serve's engine and server
// report to, exporting in batches over OTLP/HTTP, with shutdown (which
// flushes what is queued); nil and a no-op when tracing is off. The
// exporter reads the other OTEL_EXPORTER_OTLP_* variables (headers,
// certificates, timeout) itself; OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name the service (default "clearance").
func newTracerProvider(ctx context.Context, c tracingConfig, getenv func(string) string) (trace.TracerProvider, func(context.Context) error, error) {
	if !c.on(getenv) {
		return nil, func(context.Context) error { return nil }, nil
	}
	var opts []otlptracehttp.Option
	if c.endpoint != "" {
		u, err := tracesURL(c.endpoint)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "clearance"), attribute.String("service.version", clearance.Version)),
		resource.WithFromEnv()) // later wins: the variables override the defaults
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		// A caller's sampled traceparent is a wish, not an order: the ratio
		// applies to it too, so that no client can make every request traced.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.sampleRatio),
			sdktrace.WithRemoteParentSampled(sdktrace.TraceIDRatioBased(c.sampleRatio)))))
	return tp, tp.Shutdown, nil
}
