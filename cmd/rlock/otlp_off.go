//go:build !otlp

package main

import "github.com/rlock-go/rlock/tracing"

// otlpOption is nil in the default build: no OTLP exporter, so that
// go install links neither gRPC nor grpc-gateway (they come with it).
// --trace stdout and OTEL_TRACES_EXPORTER=console still export; an
// environment asking for OTLP is reported (tracing.ErrNoOTLP) and traces
// nothing. Build with -tags otlp for OTLP/HTTP (otlp.go).
var otlpOption tracing.SetupOption
