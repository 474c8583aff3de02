package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/tracing"
)

// Tracing in the CLI.
//
// run and demo install a global TracerProvider with tracing.SetupFromEnv
// before they connect: --trace stdout exports the spans as JSON on
// stdout; without the flag the OTEL_* environment decides (OTLP over
// HTTP when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, nothing otherwise). Every
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
	fs.StringVar(v, "trace", "", "`stdout`: print the spans on stdout, one JSON object per span (default: export over OTLP/HTTP when $OTEL_EXPORTER_OTLP_ENDPOINT or $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set)")
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
	observer *lock.Observer // for every lock.Client of the command
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
	opts = append(opts, tracing.WithServiceName("rlock"))
	shutdown, err := tracing.SetupFromEnv(context.Background(), opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, prefixed("tracing disabled: "+err.Error()))
	}
	// tracing.New and the tracer take the global providers: the SDK's if
	// SetupFromEnv installed one, else no-ops that record nothing.
	return &tracer{
		shutdown: shutdown,
		tracer:   otel.Tracer(traceScope, trace.WithInstrumentationVersion(versionString())),
		observer: tracing.New(),
	}
}

// flush exports the spans not yet exported and stops the provider,
// bounded by traceFlushTimeout. A failure is reported on stderr and does
// not change rlock's exit status.
func (t *tracer) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	defer cancel()
	if err := t.shutdown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, prefixed("exporting spans: "+err.Error()))
	}
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
