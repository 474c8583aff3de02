package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rlock-go/rlock/integration"
)

// stdoutSpan is the part of the stdout exporter's JSON the tests read.
type stdoutSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
}

func (s stdoutSpan) attr(key string) any {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.Value
		}
	}
	return nil
}

// decodeSpans reads the JSON objects the stdout exporter wrote.
func decodeSpans(t *testing.T, out string) []stdoutSpan {
	t.Helper()
	var spans []stdoutSpan
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var s stdoutSpan
		err := dec.Decode(&s)
		if errors.Is(err, io.EOF) {
			return spans
		}
		if err != nil {
			t.Fatalf("decoding spans: %v\n%s", err, out)
		}
		spans = append(spans, s)
	}
}

func TestRunTraceStdout(t *testing.T) {
	servers := masters(t, 3)
	name := lockName(t)
	r := runRlock(t, "run", "--addr", addrList(servers), "--name", name, "--trace", "stdout", "--", "echo", "ran")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	// The command's output first; the spans when rlock exits.
	out, ok := strings.CutPrefix(r.stdout, "ran\n")
	if !ok {
		t.Fatalf("stdout does not start with the command's output: %q", r.stdout)
	}
	spans := decodeSpans(t, out)

	var run *stdoutSpan
	for i, s := range spans {
		if s.Name == "rlock run" {
			run = &spans[i]
		}
	}
	if run == nil {
		t.Fatalf("no span rlock run among %d", len(spans))
	}
	if run.attr("rlock.lock.name") != name || run.attr("rlock.lock.kind") != "RedLock" || run.attr("process.exit.code") != float64(0) {
		t.Errorf("rlock run attributes %+v", run.Attributes)
	}
	// One acquire span per master, in the run's trace, under its span.
	acquired := map[any]bool{}
	for _, s := range spans {
		if s.Name != "rlock.acquire" {
			continue
		}
		if s.SpanContext.TraceID != run.SpanContext.TraceID || s.Parent.SpanID != run.SpanContext.SpanID {
			t.Errorf("rlock.acquire on %v is not a child of rlock run", s.attr("rlock.master.address"))
		}
		acquired[s.attr("rlock.master.address")] = true
	}
	for _, srv := range servers {
		if !acquired[srv.Addr()] {
			t.Errorf("no rlock.acquire span for master %s", srv.Addr())
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s", r.stdout)
	}
}

// collector is an OTLP/HTTP endpoint on loopback that records the paths
// posted to it.
type collector struct {
	srv   *httptest.Server
	mu    sync.Mutex
	posts []string // path and content type
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		if len(body) > 0 {
			c.posts = append(c.posts, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) received() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.posts...)
}

func TestRunTraceOTLP(t *testing.T) {
	srv := newServer(t, integration.Options{})
	bin, err := otlpBin()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  func(url string) []string
		path string
	}{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", func(url string) []string {
			return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + url}
		}, "/v1/traces"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", func(url string) []string {
			return []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + url + "/collector/traces"}
		}, "/collector/traces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			col := newCollector(t)
			r := runBinEnv(t, bin, tc.env(col.srv.URL), "run", "--addr", srv.Addr(), "--name", lockName(t), "--", "echo", "ran")
			if r.code != 0 || r.stdout != "ran\n" || r.stderr != "" {
				t.Fatalf("exit %d, stdout %q; stderr: %s", r.code, r.stdout, r.stderr)
			}
			// rlock flushed its spans before it exited.
			want := "POST " + tc.path + " application/x-protobuf"
			if got := col.received(); len(got) == 0 || got[0] != want {
				t.Fatalf("the collector received %q, want %q", got, want)
			}
		})
	}

	t.Run("default build", func(t *testing.T) {
		// The default build has no OTLP exporter: rlock says so, sends
		// nothing and runs the command.
		col := newCollector(t)
		r := runRlockEnv(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.srv.URL}, "run", "--addr", srv.Addr(), "--name", lockName(t), "--", "echo", "ran")
		want := "rlock: tracing disabled: the environment asks for OTLP export, but this program has no OTLP exporter (OTEL_EXPORTER_OTLP_ENDPOINT is set): this rlock is built without OTLP export; build it with -tags otlp, or use --trace stdout\n"
		if r.code != 0 || r.stdout != "ran\n" || r.stderr != want {
			t.Fatalf("exit %d, stdout %q; stderr %q, want %q", r.code, r.stdout, r.stderr, want)
		}
		if got := col.received(); len(got) != 0 {
			t.Fatalf("the collector received %q", got)
		}
	})

	t.Run("bad environment", func(t *testing.T) {
		// Tracing is set up wrong: rlock says so and runs the command.
		r := runRlockEnv(t, []string{"OTEL_TRACES_EXPORTER=zipkin"}, "run", "--addr", srv.Addr(), "--name", lockName(t), "--", "echo", "ran")
		if r.code != 0 || r.stdout != "ran\n" || !strings.Contains(r.stderr, "rlock: tracing disabled: OTEL_TRACES_EXPORTER=\"zipkin\"") {
			t.Fatalf("exit %d, stdout %q; stderr: %s", r.code, r.stdout, r.stderr)
		}
	})
}

// TestRunTraceContext: a TRACEPARENT in rlock's environment parents its
// spans, and the command gets the TRACEPARENT of rlock's hold span.
func TestRunTraceContext(t *testing.T) {
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
		in      = "00-" + traceID + "-" + spanID + "-01"
	)
	env := []string{"TRACEPARENT=" + in, "TRACESTATE=vendor=x"}
	printEnv := []string{"--", "sh", "-c", `echo "$TRACEPARENT"; echo "$TRACESTATE"`}

	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d masters", n), func(t *testing.T) {
			servers := masters(t, n)
			args := append([]string{"run", "--addr", addrList(servers), "--name", lockName(t), "--trace", "stdout"}, printEnv...)
			r := runRlockEnv(t, env, args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
			}
			lines := strings.SplitN(r.stdout, "\n", 3)
			if len(lines) < 3 {
				t.Fatalf("stdout %q", r.stdout)
			}
			out, state := lines[0], lines[1]
			spans := decodeSpans(t, lines[2])
			holds := map[any]stdoutSpan{}
			var run stdoutSpan
			for _, s := range spans {
				switch s.Name {
				case "rlock run":
					run = s
				case "rlock.hold":
					holds[s.attr("rlock.master.address")] = s
				}
			}
			if run.SpanContext.TraceID != traceID || run.Parent.SpanID != spanID {
				t.Fatalf("rlock run: trace %s parent %s, want %s and %s", run.SpanContext.TraceID, run.Parent.SpanID, traceID, spanID)
			}
			// The first master in --addr order among those that had
			// granted when the round decided: a RedLock decides at the
			// quorum, so with several masters it need not be the first.
			var hold stdoutSpan
			for _, s := range servers {
				h, ok := holds[s.Addr()]
				if ok && out == "00-"+traceID+"-"+h.SpanContext.SpanID+"-01" {
					hold = h
					break
				}
			}
			if hold.SpanContext.SpanID == "" || hold.Parent.SpanID != run.SpanContext.SpanID {
				t.Fatalf("the command's TRACEPARENT %q is not that of an rlock.hold span under rlock run (%d spans)", out, len(spans))
			}
			if n == 1 && hold.attr("rlock.master.address") != servers[0].Addr() {
				t.Fatalf("the command's hold span is of %v, want %s", hold.attr("rlock.master.address"), servers[0].Addr())
			}
			if state != "vendor=x" {
				t.Fatalf("the command's TRACESTATE %q", state)
			}
		})
	}

	t.Run("untraced", func(t *testing.T) {
		srv := newServer(t, integration.Options{})
		args := append([]string{"run", "--addr", srv.Addr(), "--name", lockName(t)}, printEnv...)
		r := runRlockEnv(t, env, args...)
		if r.code != 0 || r.stdout != in+"\nvendor=x\n" {
			t.Fatalf("exit %d, stdout %q; stderr: %s", r.code, r.stdout, r.stderr)
		}
	})
}
