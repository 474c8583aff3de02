package tracing_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/observe"
	"github.com/rlock-go/rlock/tracing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// name returns a lock name unique to the test.
func name(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return strings.NewReplacer("/", ":", " ", "_").Replace(t.Name()) + ":" + hex.EncodeToString(b[:])
}

// env is a real redis-server and SDK providers that keep what they get:
// spans in a recorder, metrics in a manual reader.
type env struct {
	t      *testing.T
	srv    *integration.Server
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	obs    *observe.Observer
	events *events
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, srv: integration.Redis(t, integration.Options{})}
	e.spans = tracetest.NewSpanRecorder()
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	e.reader = sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.tp.Shutdown(ctx)
		_ = mp.Shutdown(ctx)
	})
	e.obs, e.events = tap(tracing.New(tracing.WithTracerProvider(e.tp), tracing.WithMeterProvider(mp)))
	return e
}

// client returns a Client on the env's server with its Observer, closed
// when the test ends.
func (e *env) client(cfg lock.Config) *lock.Client {
	e.t.Helper()
	cfg.Addrs = []string{e.srv.Addr()}
	cfg.Observer = e.obs
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := lock.New(ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// events receives copies of the events the Observer was given, after it
// handled them: tests wait on these, never on time.
type events struct {
	waiting chan observe.Waiting
	renew   chan observe.Renew
	loss    chan observe.Loss
}

func tap(o *observe.Observer) (*observe.Observer, *events) {
	ev := &events{
		waiting: make(chan observe.Waiting, 16),
		renew:   make(chan observe.Renew, 256),
		loss:    make(chan observe.Loss, 16),
	}
	w := *o
	w.Waiting = func(ctx context.Context, e observe.Waiting) {
		o.Waiting(ctx, e)
		ev.waiting <- e
	}
	w.Renew = func(e observe.Renew) {
		o.Renew(e)
		select {
		case ev.renew <- e:
		default:
		}
	}
	w.Loss = func(ctx context.Context, e observe.Loss) {
		o.Loss(ctx, e)
		ev.loss <- e
	}
	return &w, ev
}

// recv returns the next value of ch, failing the test after 10s.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s event in 10s", what)
		panic("unreachable")
	}
}

// ended returns the ended spans named name, in the order they ended.
func (e *env) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only ended span named name.
func (e *env) one(name string) sdktrace.ReadOnlySpan {
	e.t.Helper()
	s := e.ended(name)
	if len(s) != 1 {
		e.t.Fatalf("%d %s spans ended, want 1", len(s), name)
	}
	return s[0]
}

func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// wantAttrs checks attributes of s; want values are string, bool, int or
// float64 (only its sign is checked: >0 or 0).
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]any) {
	t.Helper()
	for k, w := range want {
		v, ok := attr(s, k)
		if !ok {
			t.Errorf("%s: no attribute %s", s.Name(), k)
			continue
		}
		var got any
		switch w.(type) {
		case string:
			got = v.AsString()
		case bool:
			got = v.AsBool()
		case int:
			got = int(v.AsInt64())
		case float64:
			got = v.AsFloat64()
			if w.(float64) > 0 && got.(float64) > 0 {
				continue
			}
		}
		if got != w {
			t.Errorf("%s: %s = %v, want %v", s.Name(), k, got, w)
		}
	}
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) (sdktrace.Event, bool) {
	for _, ev := range s.Events() {
		if ev.Name == name {
			return ev, true
		}
	}
	return sdktrace.Event{}, false
}

func eventAttr(ev sdktrace.Event, key string) string {
	for _, kv := range ev.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

func linksTo(s sdktrace.ReadOnlySpan, sc trace.SpanContext) bool {
	for _, l := range s.Links() {
		if l.SpanContext.SpanID() == sc.SpanID() {
			return true
		}
	}
	return false
}

// metrics collects what the reader has.
func (e *env) metrics() metricdata.ResourceMetrics {
	e.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := e.reader.Collect(context.Background(), &rm); err != nil {
		e.t.Fatal(err)
	}
	return rm
}

func find(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

func matches(set attribute.Set, kvs []attribute.KeyValue) bool {
	for _, kv := range kvs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum adds the points of counter name whose attributes include kvs.
func sum(t *testing.T, rm metricdata.ResourceMetrics, name string, kvs ...attribute.KeyValue) int64 {
	t.Helper()
	m, ok := find(rm, name)
	if !ok {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T", name, m.Data)
	}
	var n int64
	for _, p := range s.DataPoints {
		if _, named := p.Attributes.Value("rlock.lock.name"); named {
			t.Errorf("%s has a lock name attribute", name)
		}
		if matches(p.Attributes, kvs) {
			n += p.Value
		}
	}
	return n
}

// hist returns the count and sum of histogram name's points whose
// attributes include kvs.
func hist(t *testing.T, rm metricdata.ResourceMetrics, name string, kvs ...attribute.KeyValue) (uint64, float64) {
	t.Helper()
	m, ok := find(rm, name)
	if !ok {
		return 0, 0
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is a %T", name, m.Data)
	}
	var n uint64
	var s float64
	for _, p := range h.DataPoints {
		if matches(p.Attributes, kvs) {
			n += p.Count
			s += p.Sum
		}
	}
	return n, s
}

func outcome(s string) attribute.KeyValue { return attribute.String("rlock.outcome", s) }
func reason(s string) attribute.KeyValue  { return attribute.String("rlock.reason", s) }
