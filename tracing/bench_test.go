package tracing_test

import (
	"context"
	"slices"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/tracing"
)

// variant is one way of observing the benchmarked Client.
type variant struct {
	name string
	obs  *observe.Observer
}

// variants returns the three ways compared: no Observer, tracing on no-op
// providers, and tracing on the SDK sampling and recording everything
// (spans batched to an in-memory exporter, metrics kept by a reader).
func variants(b *testing.B) (vs [3]variant, reset func()) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(exp))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx)
		_ = mp.Shutdown(ctx)
	})
	return [3]variant{
		{"NoObserver", nil},
		{"Noop", tracing.New(
			tracing.WithTracerProvider(tracenoop.NewTracerProvider()),
			tracing.WithMeterProvider(metricnoop.NewMeterProvider()))},
		{"SDK", tracing.New(tracing.WithTracerProvider(tp), tracing.WithMeterProvider(mp))},
	}, exp.Reset
}

// benchClient returns a Client on srv, straight to redis-server (no
// fault-injecting proxy in the way), closed when the benchmark ends.
func benchClient(b *testing.B, srv *integration.Server, obs *observe.Observer) *lock.Client {
	ctx := context.Background()
	c, err := lock.New(ctx, lock.Config{Addrs: []string{srv.DirectAddr()}, Observer: obs})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(ctx) })
	return c
}

// lockUnlock takes a free lock and releases it.
func lockUnlock(b *testing.B, m *lock.Mutex) {
	ctx := context.Background()
	h, err := m.TryLock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := h.Unlock(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTryLockUnlock takes and releases a free lock on a real
// redis-server, once per variant:
//
//	go test ./tracing -run '^$' -bench TryLockUnlock -benchtime 3000x -count 5
func BenchmarkTryLockUnlock(b *testing.B) {
	srv := integration.Redis(b, integration.Options{})
	vs, reset := variants(b)
	for _, v := range vs {
		b.Run(v.name, func(b *testing.B) {
			m := benchClient(b, srv, v.obs).Mutex(name(b))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				lockUnlock(b, m)
				if i%1024 == 1023 {
					reset() // keep the exporter's memory flat
				}
			}
		})
	}
}

// BenchmarkOverhead runs the three variants interleaved, in blocks of 100
// operations, so that a machine busy with other work slows all three
// alike. It reports each variant's median time per TryLock+Unlock (the
// mean is at the mercy of a few scheduler stalls) and the overheads of
// the medians in percent:
//
//	go test ./tracing -run '^$' -bench Overhead -benchtime 30000x -count 5
func BenchmarkOverhead(b *testing.B) {
	srv := integration.Redis(b, integration.Options{})
	vs, reset := variants(b)
	var ms [3]*lock.Mutex
	var took [3][]time.Duration
	for i, v := range vs {
		ms[i] = benchClient(b, srv, v.obs).Mutex(name(b))
		took[i] = make([]time.Duration, 0, b.N/3+100)
	}
	for i := 0; b.Loop(); i++ {
		v := (i / 100) % 3
		start := time.Now()
		lockUnlock(b, ms[v])
		took[v] = append(took[v], time.Since(start))
		if i%1024 == 1023 {
			reset()
		}
	}
	var med [3]float64
	for v := range vs {
		if len(took[v]) == 0 {
			return
		}
		slices.Sort(took[v])
		med[v] = float64(took[v][len(took[v])/2].Nanoseconds())
		b.ReportMetric(med[v], vs[v].name+"-median-ns/op")
	}
	b.ReportMetric(100*(med[1]/med[0]-1), "noop-overhead-%")
	b.ReportMetric(100*(med[2]/med[0]-1), "sdk-overhead-%")
}
