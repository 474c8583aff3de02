package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/tracing"
)

// Tracing in the CLI.
//
// run and demo install a global TracerProvider with tracing.SetupFromEnv
// before they connect: --trace stdout exports the spans as JSON on
// stdout; without the flag the OTEL_* environment decides (OTLP over
// HTTP when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, in a build with -tags otlp;
// see otlp_off.go; nothing otherwise). Every
// lock.Client gets tracing.New() as its Observer, and the command opens
// one span of its own ("rlock run", "rlock demo ...") so that the spans of
// every master land in one trace. The provider is flushed and stopped
// before rlock exits, bounded by traceFlushTimeout.

// traceStdout is the one value of --trace.
const traceStdout = "stdout"

// traceFlushTimeout bounds the flush of the spans at exit: an
// unreachable collector delays rlock's exit by at most this.
const traceFlushTimeout = 5 * time.Second

// traceScope is the instrumentation scope of the CLI's own spans.
const traceScope = "github.com/rlock-go/rlock/cmd/rlock"

// registerTrace adds --trace to fs.
func registerTrace(fs *flag.FlagSet, v *string) {
	fs.StringVar(v, "trace", "", "`stdout`: print the spans on stdout, one JSON object per span (default: export over OTLP/HTTP when $OTEL_EXPORTER_OTLP_ENDPOINT or $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, in an rlock built with -tags otlp)")
}

// checkTrace rejects a --trace value other than stdout.
func checkTrace(cmd, v string) error {
	if v != "" && v != traceStdout {
		return usagef("%s: --trace %q: want stdout (OTLP is set with the OTEL_EXPORTER_OTLP_* environment)", cmd, v)
	}
	return nil
}

// tracer is the tracing of one rlock command.
type tracer struct {
	shutdown func(context.Context) error
	tracer   trace.Tracer
	observer *observe.Observer // for every lock.Client of the command
	holds    *holdCapture      // the rlock.hold spans the observer starts
}

// startTracing installs the exporter that --trace or the environment
// asks for. A bad environment (an unsupported OTEL_TRACES_EXPORTER or
// protocol) is reported on stderr and traces nothing: the lock and the
// command matter more than their spans.
func startTracing(mode string) *tracer {
	var opts []tracing.SetupOption
	if mode == traceStdout {
		opts = append(opts, tracing.WithStdout(os.Stdout))
	}
	opts = append(opts, tracing.WithServiceName("rlock"), otlpOption)
	shutdown, err := tracing.SetupFromEnv(context.Background(), opts...)
	switch {
	case errors.Is(err, tracing.ErrNoOTLP):
		fmt.Fprintln(errOut, prefixed("tracing disabled: "+err.Error()+": this rlock is built without OTLP export; build it with -tags otlp, or use --trace stdout"))
	case err != nil:
		fmt.Fprintln(errOut, prefixed("tracing disabled: "+err.Error()))
	}
	// tracing.New and the tracer take the global providers: the SDK's if
	// SetupFromEnv installed one, else no-ops that record nothing.
	holds := &holdCapture{TracerProvider: otel.GetTracerProvider(), spans: map[string]trace.SpanContext{}}
	return &tracer{
		shutdown: shutdown,
		tracer:   otel.Tracer(traceScope, trace.WithInstrumentationVersion(versionString())),
		observer: tracing.New(tracing.WithTracerProvider(holds)),
		holds:    holds,
	}
}

// flush exports the spans not yet exported and stops the provider,
// bounded by traceFlushTimeout. A failure is reported on stderr and does
// not change rlock's exit status.
func (t *tracer) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	defer cancel()
	if err := t.shutdown(ctx); err != nil {
		fmt.Fprintln(errOut, prefixed("exporting spans: "+err.Error()))
	}
}

// The trace context crosses rlock in both directions through the
// environment, as OpenTelemetry's "environment variables as carriers"
// say: TRACEPARENT and TRACESTATE (W3C Trace Context), upper case.
//
//   - in: a valid TRACEPARENT in rlock's environment is the parent of its
//     "rlock run" span, so the run joins the caller's trace;
//   - out: the command gets TRACEPARENT (and TRACESTATE) of rlock's
//     rlock.hold span — for several masters, that of the first master in
//     --addr order among those that had granted the lock when its round
//     decided (a later grant joins the hold, not the command's context) —
//     so that its own spans nest
//     under the hold. Untraced (no exporter), the hold span is the
//     caller's context passed through, or nothing: then the command gets
//     rlock's TRACEPARENT unchanged.

// Environment variables carrying the trace context.
const (
	envTraceparent = "TRACEPARENT"
	envTracestate  = "TRACESTATE"
)

// envCarrier maps the W3C header names to environment variables.
type envCarrier map[string]string

func (c envCarrier) Get(key string) string { return c[strings.ToUpper(key)] }
func (c envCarrier) Set(key, value string) { c[strings.ToUpper(key)] = value }
func (c envCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, strings.ToLower(k))
	}
	return keys
}

// contextFromEnv returns ctx with the remote span context of
// $TRACEPARENT (and $TRACESTATE), if valid.
func contextFromEnv(ctx context.Context) context.Context {
	c := envCarrier{envTraceparent: os.Getenv(envTraceparent), envTracestate: os.Getenv(envTracestate)}
	return propagation.TraceContext{}.Extract(ctx, c)
}

// traceEnv returns TRACEPARENT and TRACESTATE for sc, nil when sc is not
// valid.
func traceEnv(sc trace.SpanContext) map[string]string {
	if !sc.IsValid() {
		return nil
	}
	c := envCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c
}

// holdCapture is the TracerProvider given to tracing.New: it passes
// everything to the real one and keeps the span context of each
// rlock.hold span by master address, for the command's TRACEPARENT.
type holdCapture struct {
	trace.TracerProvider
	mu    sync.Mutex
	spans map[string]trace.SpanContext // master address -> hold span
}

func (h *holdCapture) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return captureTracer{Tracer: h.TracerProvider.Tracer(name, opts...), h: h}
}

// span returns the hold span of the first of addrs that has one.
func (h *holdCapture) span(addrs []string) trace.SpanContext {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range addrs {
		if sc, ok := h.spans[a]; ok {
			return sc
		}
	}
	return trace.SpanContext{}
}

type captureTracer struct {
	trace.Tracer
	h *holdCapture
}

func (t captureTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, span := t.Tracer.Start(ctx, name, opts...)
	if name == tracing.SpanHold {
		cfg := trace.NewSpanStartConfig(opts...)
		for _, kv := range cfg.Attributes() {
			if kv.Key == "rlock.master.address" {
				t.h.mu.Lock()
				t.h.spans[kv.Value.AsString()] = span.SpanContext()
				t.h.mu.Unlock()
			}
		}
	}
	return ctx, span
}

// start opens the command's own span.
func (t *tracer) start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// endSpan ends the command's span with the exit status err gives.
func endSpan(span trace.Span, err error, conflict int) {
	code := codeOf(err, conflict)
	span.SetAttributes(attribute.Int("process.exit.code", code))
	if code != exitOK {
		span.SetStatus(codes.Error, prefixed(err.Error()))
	}
	span.End()
}
