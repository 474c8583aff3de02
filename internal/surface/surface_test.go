// Package surface holds the test that keeps the library's exported
// surface deliberate: every exported identifier (types, functions,
// methods, constants, variables; struct fields are left out) of the
// library packages is listed in testdata/api.txt, and a change to it
// must change that file too (go test ./internal/surface -update).
package surface

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/api.txt")

// packages are the library's public packages, relative to the module root.
var packages = []string{"lock", "multilock", "observe", "reentrant", "pubsub", "watchdog", "redissonconfig"}

// exported lists pkg's exported identifiers, methods as Type.Method.
func exported(t *testing.T, dir string) []string {
	fs := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fs, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					names = append(names, d.Name.Name)
					continue
				}
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
					names = append(names, id.Name+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

func TestExportedSurface(t *testing.T) {
	var b strings.Builder
	for _, p := range packages {
		names := exported(t, filepath.Join("..", "..", p))
		b.WriteString("# " + p + " (" + strconv.Itoa(len(names)) + ")\n")
		for _, n := range names {
			b.WriteString(p + "." + n + "\n")
		}
	}
	got := b.String()
	golden := filepath.Join("testdata", "api.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got == string(want) {
		return
	}
	gotL, wantL := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for _, l := range gotL {
		if !slices.Contains(wantL, l) {
			t.Errorf("exported now, not in testdata/api.txt: %s", l)
		}
	}
	for _, l := range wantL {
		if !slices.Contains(gotL, l) {
			t.Errorf("in testdata/api.txt, no longer exported: %s", l)
		}
	}
	t.Error("the exported surface changed: if that is deliberate, run go test ./internal/surface -update and say why in CHANGELOG.md")
}
