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

// methodsOf lists the methods declared on typ or *typ, as "file: name".
func methodsOf(files map[string]*ast.File, typ string) []string {
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
			if id, ok := t.(*ast.Ident); ok && id.Name == typ {
				ms = append(ms, name+": "+fd.Name.Name)
			}
		}
	}
	sort.Strings(ms)
	return ms
}

// clientMethods lists the methods declared on Client or *Client.
func clientMethods(files map[string]*ast.File) []string { return methodsOf(files, "Client") }

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

// TestHoldIsOneFile checks that the hold, the state machine of one
// (lock name, holder field, layout), is one file: every method of *hold
// is declared in hold.go (with the types only it uses: gen, fairPlace).
func TestHoldIsOneFile(t *testing.T) {
	_, files := sourceFiles(t)
	for _, m := range methodsOf(files, "hold") {
		if !strings.HasPrefix(m, "hold.go: ") {
			t.Errorf("%s: a method of *hold outside hold.go (docs/design.md: the hold is one file)", m)
		}
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

// maxGoroutineFunctions bounds the distinct functions run as goroutines
// across the packages a lock goes through (issue 29, stage 2).
const maxGoroutineFunctions = 10

// goroutines is docs/design.md's table of them: each go statement's
// place ("package: function: what it runs") and who owns and joins it.
// A go statement not in it fails TestGoroutineTable.
var goroutines = map[string]string{
	"lock: lend: wk.run":               "a Client's worker (settlers, UNSUBSCRIBEs, replica counts, slot tables, multilock's per-master calls); Close stops lending and joins it (c.bg)",
	"lock: start: c.wd.Run":            "the Client's watchdog loop; Close stops it and joins it (c.bg)",
	"lock: start: c.cleaner.run":       "the Client's latch cleaner; Close stops it and joins it (c.bg)",
	"lock: start: c.followMaster":      "a Sentinel Client's master follower; Close stops it and joins it (c.bg)",
	"lock: Close: c.teardown":          "Close's join of the background goroutines and close of the connections; Close waits for it within its ctx, after which it ends by itself (rueidis closes a silent connection within a second)",
	"pubsub: wakeLocked: h.background": "a Hub's subscribe/unsubscribe worker; Hub.Close joins it (h.wg)",
	"pubsub: connectLocked: h.watch":   "a Hub connection's watcher, which reconnects; Hub.Close joins it (h.wg)",
	"pubsub: hubAtLocked: s.rehome":    "Shards' move of a Hub's waiters to a slot's new master; Shards.Close joins it (s.wg)",
	"watchdog: send: func literal":     "a renewal round trip given up on by its tick; Run joins it before it returns (r.strays)",
}

// goStatements lists the go statements of the non-test files of dir as
// "package: enclosing function: what it runs". What a func literal runs
// is its one call that is not deferred, when it has one.
func goStatements(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, goStatementsOf(f)...)
	}
	return out
}

func goStatementsOf(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				out = append(out, f.Name.Name+": "+fd.Name.Name+": "+goTarget(g.Call))
			}
			return true
		})
	}
	return out
}

func goTarget(call *ast.CallExpr) string {
	lit, ok := call.Fun.(*ast.FuncLit)
	if !ok {
		return exprText(call.Fun)
	}
	var calls []string
	for _, s := range lit.Body.List {
		if e, ok := s.(*ast.ExprStmt); ok {
			if c, ok := e.X.(*ast.CallExpr); ok {
				calls = append(calls, exprText(c.Fun))
				continue
			}
		}
		if _, ok := s.(*ast.DeferStmt); !ok {
			return "func literal"
		}
	}
	if len(calls) == 1 {
		return calls[0]
	}
	return "func literal"
}

func exprText(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprText(x.X) + "." + x.Sel.Name
	}
	return "expression"
}

// TestGoroutineTable: every go statement of lock, multilock, pubsub,
// watchdog, reentrant and internal/... is in the table, with its owner
// and join, and there are at most maxGoroutineFunctions of them.
func TestGoroutineTable(t *testing.T) {
	dirs := []string{".", "../multilock", "../pubsub", "../watchdog", "../reentrant"}
	internal, err := filepath.Glob("../internal/*")
	if err != nil {
		t.Fatal(err)
	}
	dirs = append(dirs, internal...)
	found := map[string]bool{}
	for _, d := range dirs {
		for _, s := range goStatements(t, d) {
			found[s] = true
			if goroutines[s] == "" {
				t.Errorf("go statement %q is not in the goroutine table (lock/structure_internal_test.go, docs/design.md): run it on a worker, or add it with its owner and join", s)
			}
		}
	}
	for s := range goroutines {
		if !found[s] {
			t.Errorf("the goroutine table names %q, which no go statement runs: remove it", s)
		}
	}
	if len(goroutines) > maxGoroutineFunctions {
		t.Errorf("%d functions run as goroutines, at most %d", len(goroutines), maxGoroutineFunctions)
	}
}

// The goroutine check finds a go statement and what it runs.
func TestGoroutineCheckHasTeeth(t *testing.T) {
	src := `package lock
func (c *Client) f() {
	go c.settle(1)
	go func() { defer c.bg.Done(); c.wd.Run(bg) }()
	go func() { x := 1; _ = x }()
}`
	f, err := parser.ParseFile(token.NewFileSet(), "bad.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"lock: f: c.settle", "lock: f: c.wd.Run", "lock: f: func literal"}
	if got := goStatementsOf(f); !slices.Equal(got, want) {
		t.Errorf("goStatementsOf found %q, want %q", got, want)
	}
}
