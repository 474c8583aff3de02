package tracing_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/tracing"
	"github.com/rlock-go/rlock/tracing/otlphttp"
)

// otelEnv clears the variables SetupFromEnv reads, for the test, and
// restores the global TracerProvider after it.
func otelEnv(t *testing.T) {
	for _, k := range []string{
		"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER",
	} {
		t.Setenv(k, "")
	}
	t.Cleanup(func() { otel.SetTracerProvider(tracenoop.NewTracerProvider()) })
}

// lockOnce takes and releases a lock with an Observer on the global
// providers, as the CLI does.
func lockOnce(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := lock.New(ctx, lock.Config{Addrs: []string{addr}, Observer: tracing.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	h, err := c.Mutex(name(t)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// collector is an OTLP/HTTP trace receiver on loopback.
type collector struct {
	mu    sync.Mutex
	paths []string
	names []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paths = append(c.paths, r.URL.Path)
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.names = append(c.names, ss.Scope.GetName()+" "+s.Name)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

func TestSetupFromEnvOTLP(t *testing.T) {
	for _, tc := range []struct{ name, variable, suffix string }{
		{"Endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", ""},
		{"TracesEndpoint", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "/v1/traces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			otelEnv(t)
			col := &collector{}
			srv := httptest.NewServer(col)
			defer srv.Close()
			t.Setenv(tc.variable, srv.URL+tc.suffix)
			redis := newEnv(t).srv

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			shutdown, err := tracing.SetupFromEnv(ctx, tracing.WithServiceName("rlock-test"), tracing.WithOTLP(otlphttp.New))
			if err != nil {
				t.Fatal(err)
			}
			lockOnce(t, redis.Addr())
			if err := shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			srv.Close() // ends the exporter's keep-alive connection

			col.mu.Lock()
			defer col.mu.Unlock()
			if len(col.paths) == 0 || col.paths[0] != "/v1/traces" {
				t.Fatalf("requests to %q, want /v1/traces", col.paths)
			}
			got := strings.Join(col.names, "\n")
			for _, want := range []string{tracing.SpanAcquire, tracing.SpanHold, tracing.SpanRelease} {
				if !strings.Contains(got, tracing.ScopeName+" "+want) {
					t.Errorf("no %s span exported; got:\n%s", want, got)
				}
			}
		})
	}
}

func TestSetupFromEnvStdout(t *testing.T) {
	otelEnv(t)
	redis := newEnv(t).srv
	var out bytes.Buffer
	ctx := context.Background()
	shutdown, err := tracing.SetupFromEnv(ctx, tracing.WithStdout(&out))
	if err != nil {
		t.Fatal(err)
	}
	lockOnce(t, redis.Addr())
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Name":"rlock.acquire"`, `"Name":"rlock.hold"`, `"Name":"rlock.release"`, `"Key":"rlock.lock.name"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout export has no %s:\n%s", want, out.String())
		}
	}
}

func TestSetupFromEnvNone(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"Unset", nil, ""},
		{"Disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, ""},
		{"ExporterNone", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, ""},
		{"GRPC", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"UnknownExporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := setupNothing(t, tc.env, tracing.WithOTLP(otlphttp.New))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
}

// setupNothing runs SetupFromEnv with opt in the environment env, checks
// that it installed no TracerProvider and that its shutdown works, and
// returns its error.
func setupNothing(t *testing.T, env map[string]string, opt tracing.SetupOption) error {
	t.Helper()
	otelEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	before := otel.GetTracerProvider()
	shutdown, err := tracing.SetupFromEnv(context.Background(), opt)
	if shutdown == nil || shutdown(context.Background()) != nil {
		t.Error("shutdown is nil or fails")
	}
	if otel.GetTracerProvider() != before {
		t.Error("a TracerProvider was installed")
	}
	return err
}

// TestSetupFromEnvNoOTLP: without WithOTLP, an environment that asks for
// OTLP is ErrNoOTLP naming what asked, and nothing is installed; one
// that does not ask still works.
func TestSetupFromEnvNoOTLP(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		why  string // "": no error
	}{
		{"Endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, "OTEL_EXPORTER_OTLP_ENDPOINT is set"},
		{"TracesEndpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set"},
		{"Exporter", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, "OTEL_TRACES_EXPORTER=otlp"},
		{"NotAsked", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := setupNothing(t, tc.env, nil)
			switch {
			case tc.why == "" && err != nil:
				t.Fatalf("err %v, want nil", err)
			case tc.why != "" && (!errors.Is(err, tracing.ErrNoOTLP) || !strings.Contains(err.Error(), tc.why)):
				t.Fatalf("err %v, want ErrNoOTLP naming %q", err, tc.why)
			}
		})
	}
}

// TestNoGRPC: a program importing package tracing links neither gRPC nor
// grpc-gateway (they come with the OTLP exporter, in tracing/otlphttp),
// and one importing tracing/otlphttp does: the test would notice if the
// split stopped mattering.
func TestNoGRPC(t *testing.T) {
	heavy := []string{"google.golang.org/grpc", "github.com/grpc-ecosystem/grpc-gateway"}
	deps := func(pkg string) string {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		return string(out)
	}
	got := deps("github.com/rlock-go/rlock/tracing")
	for _, h := range heavy {
		if strings.Contains(got, h+"/") || strings.Contains(got, h+"\n") {
			t.Errorf("package tracing imports %s", h)
		}
	}
	if got := deps("github.com/rlock-go/rlock/tracing/otlphttp"); !strings.Contains(got, heavy[0]) {
		t.Errorf("tracing/otlphttp no longer imports %s: the split may go", heavy[0])
	}
}
