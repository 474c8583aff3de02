// Command modzip adds one module version, taken from a git revision, to a
// file-based module proxy (GOPROXY=file://DIR): the layout the go command
// reads, <escaped module path>/@v/list, <version>.info, .mod and .zip.
// scripts/release runs it for each tag it makes.
//
//	modzip -repo . -proxy /tmp/proxy -module github.com/rlock-go/rlock/tracing \
//	       -dir tracing -version v0.4.0 -rev tracing/v0.4.0
//
// The zip is made by golang.org/x/mod/zip.CreateFromVCS from the
// revision, as a public module proxy makes it from the tag, so its hash
// (the h1: line go.sum records) is the one users will get. This module is
// not published: a program that imports rlock never requires
// golang.org/x/mod.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	var o options
	flag.StringVar(&o.repo, "repo", ".", "the git repository's top folder")
	flag.StringVar(&o.proxy, "proxy", "", "the proxy folder (created if missing)")
	flag.StringVar(&o.module, "module", "", "the module path")
	flag.StringVar(&o.dir, "dir", "", "the module's folder in the repository (empty: the top)")
	flag.StringVar(&o.version, "version", "", "the version, canonical semver (v1.2.3, v1.2.3-rc.1)")
	flag.StringVar(&o.rev, "rev", "", "the git revision to take the module from (its tag)")
	flag.Parse()
	if flag.NArg() > 0 || o.proxy == "" || o.module == "" || o.version == "" || o.rev == "" {
		fmt.Fprintln(os.Stderr, "usage: modzip -repo DIR -proxy DIR -module PATH [-dir SUBDIR] -version VERSION -rev REV")
		os.Exit(2)
	}
	if err := add(o); err != nil {
		fmt.Fprintln(os.Stderr, "modzip:", err)
		os.Exit(1)
	}
}

type options struct {
	repo, proxy, module, dir, version, rev string
}

// add writes the version's four files and adds it to the list.
func add(o options) error {
	if semver.Canonical(o.version) != o.version {
		return fmt.Errorf("%s is not a canonical semantic version", o.version)
	}
	if err := module.Check(o.module, o.version); err != nil {
		return err
	}
	gomod, err := git(o.repo, "show", o.rev+":"+path.Join(o.dir, "go.mod"))
	if err != nil {
		return err
	}
	mf, err := modfile.ParseLax("go.mod", gomod, nil)
	if err != nil {
		return err
	}
	if mf.Module == nil || mf.Module.Mod.Path != o.module {
		return fmt.Errorf("%s:%s/go.mod does not declare module %s", o.rev, o.dir, o.module)
	}
	when, err := git(o.repo, "log", "-1", "--format=%ct", o.rev)
	if err != nil {
		return err
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(string(when)), 10, 64)
	if err != nil {
		return fmt.Errorf("commit time of %s: %w", o.rev, err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{o.version, time.Unix(secs, 0).UTC()})
	if err != nil {
		return err
	}

	escPath, err := module.EscapePath(o.module)
	if err != nil {
		return err
	}
	escVer, err := module.EscapeVersion(o.version)
	if err != nil {
		return err
	}
	dir := filepath.Join(o.proxy, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(dir, escVer)

	var z bytes.Buffer
	mv := module.Version{Path: o.module, Version: o.version}
	if err := zip.CreateFromVCS(&z, mv, o.repo, o.rev, o.dir); err != nil {
		return fmt.Errorf("zip of %s from %s: %w", mv, o.rev, err)
	}
	for _, f := range []struct {
		ext  string
		data []byte
	}{{".zip", z.Bytes()}, {".mod", gomod}, {".info", info}} {
		if err := os.WriteFile(base+f.ext, f.data, 0o644); err != nil {
			return err
		}
	}
	return addToList(filepath.Join(dir, "list"), o.version)
}

// addToList adds version to the proxy's list of the module's versions,
// one a line, once.
func addToList(file, version string) error {
	b, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	versions := strings.Fields(string(b))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return os.WriteFile(file, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

// git runs git in repo and returns its standard output.
func git(repo string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
