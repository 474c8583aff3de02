package lock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The structure docs/design.md sets for package lock (issue 29, stage 2),
// checked on its source: what is about one hold lives in the hold, what
// differs between kinds is decided in kind.go, and *Client keeps
// construction, the map of holds and Close.

// maxClientMethods bounds *Client's method set (it embeds nothing, so
// its own methods are all of it).
const maxClientMethods = 25

// protocolFields are the fields of protocol that say which kind a lock
// is; only kind.go may branch on them.
var protocolFields = map[string]bool{"mode": true, "wait": true, "once": true, "writer": true, "quiet": true, "name": true}

// protocolValues are the protocols; only kind.go may compare with them.
var protocolValues = map[string]bool{"plainProtocol": true, "nonReentrantProtocol": true, "spinProtocol": true,
	"readProtocol": true, "writeProtocol": true, "fairProtocol": true}

// sourceFiles parses package lock's non-test files.
func sourceFiles(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		src, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, n, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[n] = f
	}
	return fset, files
}

// clientMethods lists the methods declared on Client or *Client.
func clientMethods(files map[string]*ast.File) []string {
	var ms []string
	for name, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
				continue
			}
			t := fd.Recv.List[0].Type
			if s, ok := t.(*ast.StarExpr); ok {
				t = s.X
			}
			if id, ok := t.(*ast.Ident); ok && id.Name == "Client" {
				ms = append(ms, name+": "+fd.Name.Name)
			}
		}
	}
	sort.Strings(ms)
	return ms
}

func TestClientMethodSet(t *testing.T) {
	_, files := sourceFiles(t)
	ms := clientMethods(files)
	if len(ms) > maxClientMethods {
		t.Errorf("*Client has %d methods, more than %d (docs/design.md): what is about one hold belongs to the hold (hold.go), the rest to the part of the Client that owns it:\n%s",
			len(ms), maxClientMethods, strings.Join(ms, "\n"))
	}
	// Client embeds nothing, so no method is promoted into its set.
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "Client" {
				return true
			}
			for _, fld := range ts.Type.(*ast.StructType).Fields.List {
				if len(fld.Names) == 0 {
					t.Errorf("Client embeds %v: its methods would join Client's", fld.Type)
				}
			}
			return false
		})
	}
}

// kindBranches lists the places outside kind.go where a condition (an
// if, a switch or its cases, a comparison) asks which kind a lock is: a
// protocol's field or a protocol value.
func kindBranches(fset *token.FileSet, files map[string]*ast.File) []string {
	var found []string
	asks := func(e ast.Node) bool {
		bad := false
		ast.Inspect(e, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if inner, ok := x.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "p" && protocolFields[x.Sel.Name] {
					bad = true
				}
			case *ast.Ident:
				if protocolValues[x.Name] {
					bad = true
				}
			}
			return !bad
		})
		return bad
	}
	for name, f := range files {
		if name == "kind.go" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var cond []ast.Node
			switch x := n.(type) {
			case *ast.IfStmt:
				cond = append(cond, x.Cond)
			case *ast.SwitchStmt:
				if x.Tag != nil {
					cond = append(cond, x.Tag)
				}
			case *ast.CaseClause:
				for _, e := range x.List {
					cond = append(cond, e)
				}
			case *ast.BinaryExpr:
				if x.Op == token.EQL || x.Op == token.NEQ || x.Op == token.LAND || x.Op == token.LOR {
					cond = append(cond, x)
				}
			}
			for _, c := range cond {
				if c != nil && asks(c) {
					found = append(found, fset.Position(c.Pos()).String())
				}
			}
			return true
		})
	}
	sort.Strings(found)
	return slices.Compact(found)
}

func TestKindsAreDecidedInKindGo(t *testing.T) {
	fset, files := sourceFiles(t)
	if found := kindBranches(fset, files); len(found) > 0 {
		t.Errorf("a condition asks which kind a lock is outside kind.go (make it a method of protocol):\n%s", strings.Join(found, "\n"))
	}
}

// The checks find what they look for: a branch on a kind, a comparison
// with a protocol, and a Client method too many.
func TestStructureChecksHaveTeeth(t *testing.T) {
	src := `package lock
func (c *Client) a() {}
func (c *Client) b() {}
func f(m *Mutex) {
	if m.p.once { }
	switch m.p.wait { case waitPoll: }
	_ = m.p == readProtocol
	if m.p.upgrade(m, 1) != nil { }
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "bad.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{"bad.go": f}
	if got := kindBranches(fset, files); len(got) != 3 {
		t.Errorf("kindBranches found %d of 3 branches on a kind: %v", len(got), got)
	}
	if got := clientMethods(files); len(got) != 2 {
		t.Errorf("clientMethods found %v, want a and b", got)
	}
}
