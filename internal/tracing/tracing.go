// Package tracing turns a request's recorded stages into OpenTelemetry
// spans and exports them over OTLP/HTTP. Spans are built after the request
// ends, from the stage recorder's intervals, so tracing adds nothing to the
// request's path; with no endpoint configured nothing is built at all.
// It is the only package that imports the OpenTelemetry SDK.
package tracing

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/firstword/firstword/internal/metering"
)

// Config enables the exporter.
type Config struct {
	// Endpoint is the OTLP/HTTP base URL, e.g. http://127.0.0.1:4318
	// (spans go to Endpoint + "/v1/traces").
	Endpoint    string
	Headers     map[string]string
	ServiceName string
	// SampleRatio is the share of traces kept (default 1).
	SampleRatio float64
}

// Tracer exports request traces. The zero of *Tracer (nil) is off.
type Tracer struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New starts an exporter. Shutdown flushes it.
func New(ctx context.Context, cfg Config) (*Tracer, error) {
	if cfg.ServiceName == "" {
		cfg.ServiceName = "firstword"
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.Endpoint, "/") + "/v1/traces")}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	ratio := cfg.SampleRatio
	if ratio <= 0 || ratio > 1 {
		ratio = 1
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithIDGenerator(&ids{}),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(cfg.ServiceName))),
	)
	return &Tracer{tp: tp, tracer: tp.Tracer("github.com/firstword/firstword")}, nil
}

// Shutdown flushes and stops the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// ID is a request's trace identity: the trace it belongs to and, when the
// client sent a traceparent, the client's span to parent it under.
type ID struct {
	Trace  trace.TraceID
	Parent trace.SpanID
	// Sampled is the client's sampling decision, when it sent one.
	Sampled bool
	Remote  bool
}

// String is the trace ID in hex, as logs and headers carry it.
func (id ID) String() string { return id.Trace.String() }

// FromRequest takes the trace from a W3C traceparent header, or starts a
// new one. It is cheap and runs whether or not tracing is on, so that logs
// and headers always carry a trace ID.
func FromRequest(r *http.Request) ID {
	if tp := r.Header.Get("Traceparent"); tp != "" {
		if id, ok := parseTraceparent(tp); ok {
			return id
		}
	}
	var id ID
	crand.Read(id.Trace[:])
	return id
}

// parseTraceparent parses "00-<32 hex>-<16 hex>-<2 hex>".
func parseTraceparent(s string) (ID, bool) {
	var id ID
	parts := strings.Split(strings.TrimSpace(s), "-")
	if len(parts) < 4 || len(parts[0]) != 2 || parts[0] == "ff" || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return id, false
	}
	if _, err := hex.Decode(id.Trace[:], []byte(parts[1])); err != nil || !id.Trace.IsValid() {
		return ID{}, false
	}
	if _, err := hex.Decode(id.Parent[:], []byte(parts[2])); err != nil || !id.Parent.IsValid() {
		return ID{}, false
	}
	flags, err := hex.DecodeString(parts[3])
	if err != nil {
		return ID{}, false
	}
	id.Sampled = flags[0]&1 == 1
	id.Remote = true
	return id, true
}

// traceIDKey carries the request's chosen trace ID to the ID generator.
type traceIDKey struct{}

// ids generates span IDs at random and uses the request's trace ID for the
// root span, so the trace ID in logs and headers is the exported one.
type ids struct{}

func (*ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	tid, _ := ctx.Value(traceIDKey{}).(trace.TraceID)
	if !tid.IsValid() {
		crand.Read(tid[:])
	}
	return tid, newSpanID()
}

func (*ids) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var s trace.SpanID
	crand.Read(s[:])
	return s
}

// Record implements metering.Meter: it exports the request as a root span
// with a child span per stage, at the stages' real times.
func (t *Tracer) Record(ctx context.Context, r *metering.Record) {
	if t == nil || r.Timings == nil {
		return
	}
	id, ok := parseTraceparent(r.TraceParent)
	if !ok {
		id = ID{}
		hex.Decode(id.Trace[:], []byte(r.TraceID))
	}
	ctx = context.WithoutCancel(ctx)
	ctx = context.WithValue(ctx, traceIDKey{}, id.Trace)
	if id.Remote {
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: id.Trace, SpanID: id.Parent, TraceFlags: flags(id.Sampled), Remote: true,
		}))
	}
	start := r.Timings.Start()
	end := start.Add(r.Total)
	ctx, root := t.tracer.Start(ctx, r.Surface+" "+r.Alias, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("firstword.request_id", r.RequestID),
			attribute.String("firstword.alias", r.Alias),
			attribute.String("firstword.deployment", r.Deployment),
			attribute.String("firstword.status", string(r.Status)),
			attribute.Int("firstword.attempts", r.Attempts),
			attribute.Float64("firstword.ttfw_ms", float64(r.TTFW.Microseconds())/1000),
			attribute.Int("gen_ai.usage.input_tokens", r.Usage.InputTokens),
			attribute.Int("gen_ai.usage.output_tokens", r.Usage.OutputTokens),
		))
	for _, s := range r.Timings.Stages() {
		opts := []trace.SpanStartOption{trace.WithTimestamp(start.Add(s.Start))}
		if s.Note != "" {
			opts = append(opts, trace.WithAttributes(attribute.String("firstword.note", s.Note)))
		}
		_, span := t.tracer.Start(ctx, s.Name, opts...)
		span.End(trace.WithTimestamp(start.Add(s.End)))
	}
	root.End(trace.WithTimestamp(end))
}

func flags(sampled bool) trace.TraceFlags {
	if sampled {
		return trace.FlagsSampled
	}
	return 0
}
