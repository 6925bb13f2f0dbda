package core

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the engine's spans.
const TracerName = "github.com/clearancehq/clearance"

// Names of the engine's spans.
const (
	SpanPolicyEvaluate  = "clearance.policy.evaluate"
	SpanStoreCommit     = "clearance.store.commit"
	SpanGrantSign       = "clearance.grant.sign"
	SpanAttestationSign = "clearance.attestation.sign"
	SpanEnvelopeSign    = "clearance.envelope.sign"
)

// Tracer starts the engine's OpenTelemetry spans. The zero Tracer is
// tracing turned off: Start hands the context back and a Span that does
// nothing, without allocating, so the hot path pays nothing for it.
type Tracer struct{ t trace.Tracer }

// NewTracer returns a Tracer of tp's; nil tp is the zero Tracer (no spans).
func NewTracer(tp trace.TracerProvider) Tracer {
	if tp == nil {
		return Tracer{}
	}
	return Tracer{tp.Tracer(TracerName)}
}

// On reports whether spans are made.
func (t Tracer) On() bool { return t.t != nil }

// Start starts a span named name as a child of ctx's span.
func (t Tracer) Start(ctx context.Context, name string) (context.Context, Span) {
	if t.t == nil {
		return ctx, Span{}
	}
	ctx, s := t.t.Start(ctx, name)
	return ctx, Span{s}
}

// Record makes a span of work that already happened, from start to end, as
// a child of ctx's span: for what another goroutine timed (a group commit).
func (t Tracer) Record(ctx context.Context, name string, start, end time.Time, attrs ...attribute.KeyValue) {
	if t.t == nil {
		return
	}
	_, s := t.t.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	s.End(trace.WithTimestamp(end))
}

// Span is a span in progress; the zero Span does nothing.
type Span struct{ s trace.Span }

// Recording reports whether attributes set on the span are kept: guard
// SetAttributes with it, so that the attributes are not even built when
// tracing is off.
func (s Span) Recording() bool { return s.s != nil && s.s.IsRecording() }

// SetAttributes sets attributes of the span.
func (s Span) SetAttributes(attrs ...attribute.KeyValue) {
	if s.s != nil {
		s.s.SetAttributes(attrs...)
	}
}

// End ends the span; a non-nil err marks it failed with the error's code
// (an *Error's Code, else "error"), never its message, which may quote
// what a caller sent.
func (s Span) End(err error) {
	if s.s == nil {
		return
	}
	if err != nil {
		code := "error"
		var ce *Error
		if errors.As(err, &ce) {
			code = ce.Code
		}
		s.s.SetStatus(codes.Error, code)
	}
	s.s.End()
}
