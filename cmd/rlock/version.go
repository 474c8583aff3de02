package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
)

// version is set at link time: go build -ldflags "-X main.version=v1.2.3".
// Without it, the module version from the build info is shown.
var version = ""

const versionUsage = `rlock version

Prints the versions this binary was built from, as the Go build info
records them: rlock (the module github.com/rlock-go/rlock/cmd/rlock), the
library (github.com/rlock-go/rlock) and tracing modules, rueidis, and
the Go toolchain, then whether OTLP export is built in. A binary
installed with "go install github.com/rlock-go/rlock/cmd/rlock@VERSION"
shows VERSION; one built from a clone of the repository shows (devel).`

// The modules rlock version names, in its order.
const (
	modCLI     = "github.com/rlock-go/rlock/cmd/rlock"
	modLibrary = "github.com/rlock-go/rlock"
	modTracing = "github.com/rlock-go/rlock/tracing"
	modRueidis = "github.com/redis/rueidis"
)

func versionMain(args []string) error {
	if len(args) > 0 {
		return usagef("version takes no arguments")
	}
	bi, _ := debug.ReadBuildInfo()
	printVersions(os.Stdout, bi)
	return nil
}

// printVersions writes one line per module, then Go's and the OTLP line.
func printVersions(w io.Writer, bi *debug.BuildInfo) {
	fmt.Fprintf(w, "rlock    %s %s\n", versionString(), modCLI)
	for _, m := range []struct{ label, path string }{
		{"library", modLibrary},
		{"tracing", modTracing},
		{"rueidis", modRueidis},
	} {
		fmt.Fprintf(w, "%-8s %s %s\n", m.label, depVersion(bi, m.path), m.path)
	}
	fmt.Fprintf(w, "go       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if otlpOption != nil {
		fmt.Fprintln(w, "otlp     built in (-tags otlp)")
	} else {
		fmt.Fprintln(w, "otlp     not built in: --trace stdout only (go install -tags otlp for OTLP/HTTP)")
	}
}

// versionString is the -X main.version value, else the main module's
// version from the build info ("(devel)" for a build from a clone), with
// the VCS revision when the build recorded one.
func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}

// depVersion is the version of module path in bi: "(devel)" for a module
// of the workspace or a replaced one, as go version -m shows them.
func depVersion(bi *debug.BuildInfo, path string) string {
	if bi == nil {
		return "(unknown)"
	}
	for _, d := range bi.Deps {
		if d.Path != path {
			continue
		}
		v := d.Version
		if d.Replace != nil {
			v = d.Replace.Version
		}
		if v == "" {
			v = "(devel)"
		}
		return v
	}
	return "(not linked)"
}
