//go:build otlp

package main

import (
	"github.com/rlock-go/rlock/tracing"
	"github.com/rlock-go/rlock/tracing/otlphttp"
)

// otlpOption gives tracing.SetupFromEnv the OTLP/HTTP exporter: this
// build has it (go build -tags otlp), and with it gRPC, grpc-gateway and
// protobuf, which the exporter's protocol package imports.
var otlpOption = tracing.WithOTLP(otlphttp.New)
