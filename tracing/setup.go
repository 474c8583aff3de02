package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

var (
	// ErrNoOTLP is returned by SetupFromEnv when the environment asks for
	// OTLP export and no WithOTLP option gives an exporter: the program
	// was built without one (the rlock CLI without -tags otlp).
	ErrNoOTLP = errors.New("rlock: the environment asks for OTLP export, but this program has no OTLP exporter")
)

// SetupOption configures SetupFromEnv.
type SetupOption func(*setupConfig)

type setupConfig struct {
	stdout      io.Writer
	serviceName string
	otlp        func(context.Context) (sdktrace.SpanExporter, error)
}

// WithOTLP gives SetupFromEnv the exporter to build when the environment
// asks for OTLP; package tracing/otlphttp's New is OTLP over HTTP:
//
//	shutdown, err := tracing.SetupFromEnv(ctx, tracing.WithOTLP(otlphttp.New))
//
// It is an option rather than built in because the OTLP exporter links
// gRPC, grpc-gateway and protobuf into the program (through the OTLP
// protocol's generated package), while a program that only uses New, or
// exports to stdout, needs none of them.
func WithOTLP(newExporter func(context.Context) (sdktrace.SpanExporter, error)) SetupOption {
	return func(c *setupConfig) { c.otlp = newExporter }
}

// WithStdout makes SetupFromEnv export spans to w, one JSON object per
// span, whatever the environment says: the CLI's --trace stdout.
func WithStdout(w io.Writer) SetupOption {
	return func(c *setupConfig) { c.stdout = w }
}

// WithServiceName sets the service.name resource attribute, unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES set it. Default: the
// SDK's, "unknown_service:<executable>".
func WithServiceName(name string) SetupOption {
	return func(c *setupConfig) { c.serviceName = name }
}

// nopShutdown is the shutdown of a SetupFromEnv that installed nothing.
func nopShutdown(context.Context) error { return nil }

// SetupFromEnv installs a global TracerProvider of the OpenTelemetry SDK
// (otel.SetTracerProvider) that exports spans as the standard environment
// variables say, for programs such as the rlock CLI; tracing.New() then
// uses it. It returns the function that flushes the spans not yet
// exported and stops the provider: call it before the program exits.
//
// The exporter is chosen as follows:
//
//   - WithStdout(w): JSON to w.
//   - OTEL_SDK_DISABLED=true: none.
//   - OTEL_TRACES_EXPORTER=none: none; =console: JSON to os.Stdout;
//     =otlp: OTLP over HTTP.
//   - otherwise OTLP over HTTP when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
//     (used as is, e.g. http://collector:4318/v1/traces) or
//     OTEL_EXPORTER_OTLP_ENDPOINT (/v1/traces is appended) is set, and
//     none when neither is.
//
// OTLP needs WithOTLP(otlphttp.New) (package tracing/otlphttp): without
// it, an environment that asks for OTLP is an error wrapping ErrNoOTLP,
// and nothing is installed.
//
// With no exporter, nothing is installed and shutdown does nothing. The
// OTLP exporter reads the rest of its OTEL_EXPORTER_OTLP_* variables
// itself (headers, certificates, compression, timeout, protocol
// http/protobuf or http/json; grpc is refused: use an OTLP/HTTP port,
// 4318 by default), and the SDK reads OTEL_TRACES_SAMPLER, OTEL_BSP_* and
// OTEL_RESOURCE_ATTRIBUTES. Only traces are set up: metrics go to the
// MeterProvider the program installs, if any.
func SetupFromEnv(ctx context.Context, opts ...SetupOption) (shutdown func(context.Context) error, err error) {
	var c setupConfig
	for _, opt := range opts {
		// nil is no option: a program can pass a WithOTLP that only some
		// of its builds have.
		if opt != nil {
			opt(&c)
		}
	}
	exp, err := exporterFromEnv(ctx, c)
	if err != nil || exp == nil {
		return nopShutdown, err
	}
	res, err := newResource(ctx, c.serviceName)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nopShutdown, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

func exporterFromEnv(ctx context.Context, c setupConfig) (sdktrace.SpanExporter, error) {
	if c.stdout != nil {
		return stdouttrace.New(stdouttrace.WithWriter(c.stdout))
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	var why string // what asks for OTLP
	switch v := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))); v {
	case "none":
		return nil, nil
	case "console":
		return stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
	case "otlp":
		why = "OTEL_TRACES_EXPORTER=otlp"
	case "":
		for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
			if os.Getenv(k) != "" {
				why = k + " is set"
				break
			}
		}
		if why == "" {
			return nil, nil
		}
	default:
		return nil, fmt.Errorf("rlock: OTEL_TRACES_EXPORTER=%q is not supported: use otlp, console or none", v)
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			if v != "http/protobuf" && v != "http/json" {
				return nil, fmt.Errorf("rlock: %s=%q is not supported: only OTLP over HTTP (http/protobuf, http/json)", k, v)
			}
			break // the traces variable wins
		}
	}
	if c.otlp == nil {
		return nil, fmt.Errorf("%w (%s)", ErrNoOTLP, why)
	}
	exp, err := c.otlp(ctx)
	if err != nil {
		return nil, fmt.Errorf("rlock: OTLP trace exporter: %w", err)
	}
	return exp, nil
}

// newResource describes the process: the SDK's defaults, under the
// service name given, under the environment's attributes.
func newResource(ctx context.Context, serviceName string) (*resource.Resource, error) {
	var opts []resource.Option
	if serviceName != "" {
		opts = append(opts, resource.WithAttributes(attribute.String("service.name", serviceName)))
	}
	opts = append(opts, resource.WithFromEnv())
	res, err := resource.New(ctx, opts...)
	if err == nil {
		res, err = resource.Merge(resource.Default(), res)
	}
	if err != nil {
		return nil, fmt.Errorf("rlock: trace resource: %w", err)
	}
	return res, nil
}
