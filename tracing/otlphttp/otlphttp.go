// Package otlphttp is the OTLP over HTTP exporter for
// tracing.SetupFromEnv, kept out of package tracing because it links
// gRPC, grpc-gateway and protobuf into the program: the OTLP protocol's
// generated package, which the exporter encodes with, imports them.
// A program that records rlock's spans with tracing.New, or exports
// them to stdout, does without it.
//
//	shutdown, err := tracing.SetupFromEnv(ctx, tracing.WithOTLP(otlphttp.New))
//
// The rlock CLI links it only when built with -tags otlp.
package otlphttp

import (
	"context"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// New returns an OTLP/HTTP span exporter configured by the
// OTEL_EXPORTER_OTLP_* environment (endpoint, headers, certificates,
// compression, timeout), as tracing.SetupFromEnv documents. It does not
// connect: the first export does.
func New(ctx context.Context) (sdktrace.SpanExporter, error) {
	return otlptracehttp.New(ctx)
}
