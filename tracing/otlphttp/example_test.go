package otlphttp_test

import (
	"context"
	"fmt"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/tracing"
	"github.com/rlock-go/rlock/tracing/otlphttp"
)

// A command-line program that exports rlock's spans over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set, and traces nothing when it is not.
func Example() {
	ctx := context.Background()
	shutdown, err := tracing.SetupFromEnv(ctx,
		tracing.WithServiceName("nightly-report"),
		tracing.WithOTLP(otlphttp.New))
	if err != nil {
		fmt.Println("tracing disabled:", err)
	}
	defer shutdown(ctx) // flushes the spans not yet exported

	c, err := lock.New(ctx, lock.Config{
		Addrs:    []string{"127.0.0.1:6379"},
		Observer: tracing.New(), // the TracerProvider SetupFromEnv installed
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)
	// ... c.Mutex("nightly-report").Lock(ctx) ...
}
