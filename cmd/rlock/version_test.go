package main

import (
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersion: rlock version names the CLI, the library, tracing and
// rueidis with their versions as the build info has them ((devel) for
// this workspace build), then Go's.
func TestVersion(t *testing.T) {
	r := runRlock(t, "version")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	rueidis := "(unknown)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		rueidis = depVersion(bi, modRueidis) // the test binary links the same rueidis
	}
	want := []string{
		"rlock    (devel) github.com/rlock-go/rlock/cmd/rlock",
		"library  (devel) github.com/rlock-go/rlock",
		"tracing  (devel) github.com/rlock-go/rlock/tracing",
		"rueidis  " + rueidis + " github.com/redis/rueidis",
		"go       " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		"otlp     not built in: --trace stdout only (go install -tags otlp for OTLP/HTTP)",
	}
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rlock version printed\n%s\nwant\n%s", r.stdout, strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(rueidis, "v1.") {
		t.Errorf("rueidis version %q", rueidis)
	}

	bin, err := otlpBin()
	if err != nil {
		t.Fatal(err)
	}
	r = runBinEnv(t, bin, nil, "version")
	if r.code != 0 || !strings.Contains(r.stdout, "\notlp     built in (-tags otlp)\n") {
		t.Fatalf("-tags otlp: exit %d, stdout %q; stderr: %s", r.code, r.stdout, r.stderr)
	}
}

// TestLeanBinary: the default binary links neither gRPC nor grpc-gateway
// (the OTLP exporter's protocol package imports them); -tags otlp does.
func TestLeanBinary(t *testing.T) {
	heavy := []string{"google.golang.org/grpc", "github.com/grpc-ecosystem/grpc-gateway/v2"}
	linked := func(bin string) string {
		out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
		if err != nil {
			t.Fatalf("go version -m: %v\n%s", err, out)
		}
		return string(out)
	}
	def := linked(rlockBin)
	for _, h := range heavy {
		if strings.Contains(def, "\tdep\t"+h+"\t") {
			t.Errorf("the default rlock links %s", h)
		}
	}
	bin, err := otlpBin()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(linked(bin), "\tdep\t"+heavy[0]+"\t") {
		t.Errorf("rlock -tags otlp does not link %s: the build tag may go", heavy[0])
	}
	if t.Failed() {
		t.Logf("go version -m (default):\n%s", def)
	}
}
