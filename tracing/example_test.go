package tracing_test

import (
	"context"
	"fmt"
	"os"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/tracing"
)

// A program that sets up OpenTelemetry itself gives its providers to
// New; without the options, New takes the global ones.
func ExampleNew() {
	ctx := context.Background()
	tp := sdktrace.NewTracerProvider() // with your exporter and sampler
	mp := sdkmetric.NewMeterProvider() // with your reader
	defer tp.Shutdown(ctx)
	defer mp.Shutdown(ctx)

	c, err := lock.New(ctx, lock.Config{
		Addrs:    []string{"127.0.0.1:6379"},
		Observer: tracing.New(tracing.WithTracerProvider(tp), tracing.WithMeterProvider(mp)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)
	// Every Lock, Unlock, renewal and loss of c's locks is now a span
	// (rlock.acquire, rlock.hold, rlock.release, rlock.renew) and metrics.
}

// A command-line program without a setup of its own: spans go to stdout
// as JSON, one object per span, as the rlock CLI's --trace stdout. For
// OTLP, see package tracing/otlphttp.
func ExampleSetupFromEnv() {
	ctx := context.Background()
	shutdown, err := tracing.SetupFromEnv(ctx, tracing.WithStdout(os.Stdout), tracing.WithServiceName("nightly-report"))
	if err != nil {
		fmt.Println("tracing disabled:", err)
	}
	defer shutdown(ctx) // exports what is left, then stops

	c, err := lock.New(ctx, lock.Config{Addrs: []string{"127.0.0.1:6379"}, Observer: tracing.New()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)
}
