// Package cyclo_test keeps the library's functions readable: none may be
// above cyclomatic complexity 15, as gocyclo (github.com/fzipp/gocyclo)
// measures it, computed here with go/ast so that the check needs no
// download.
package cyclo_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// limit is the highest complexity a library function may have.
const limit = 15

// packages are the library's packages, relative to the module root.
var packages = []string{"lock", "multilock", "watchdog", "pubsub", "reentrant", "internal"}

// allowed lists functions above the limit for now, with their score.
var allowed = map[string]int{}

// Complexity is gocyclo's: 1, plus one for each if, for, range, non-default
// case of a switch or select, && and ||, in the function and the function
// literals inside it.
func complexity(fn *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fn, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

// name is gocyclo's: "pkg (*Recv).Func" or "pkg Func".
func name(pkg string, fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return pkg + " " + fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	switch r := t.(type) {
	case *ast.StarExpr:
		x := r.X
		if ix, ok := x.(*ast.IndexExpr); ok {
			x = ix.X
		}
		return fmt.Sprintf("%s (*%s).%s", pkg, x.(*ast.Ident).Name, fn.Name.Name)
	case *ast.Ident:
		return fmt.Sprintf("%s (%s).%s", pkg, r.Name, fn.Name.Name)
	}
	return pkg + " " + fn.Name.Name
}

func TestComplexity(t *testing.T) {
	root := filepath.Join("..", "..")
	seen := map[string]bool{}
	var over []string
	for _, dir := range packages {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				n, score := name(f.Name.Name, fn), complexity(fn)
				seen[n] = true
				rel, _ := filepath.Rel(root, path)
				switch max, ok := allowed[n]; {
				case ok && score > max:
					over = append(over, fmt.Sprintf("%d %s %s (allowed %d for now)", score, n, rel, max))
				case !ok && score > limit:
					over = append(over, fmt.Sprintf("%d %s %s", score, n, rel))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(over)
	for _, o := range over {
		t.Errorf("cyclomatic complexity above %d: %s", limit, o)
	}
	for n := range allowed {
		if !seen[n] {
			t.Errorf("allowed %s is gone: remove it from the allow-list", n)
		}
	}
}

// TestComplexityMeasure checks the measure on known shapes.
func TestComplexityMeasure(t *testing.T) {
	src := `package p
func f(a, b bool, c chan int) {
	if a && b || a {
	}
	for range 3 {
	}
	switch {
	case a:
	case b:
	default:
	}
	select {
	case <-c:
	default:
	}
	_ = func() { for {} }
}`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 1 + if + && + || + range + 2 cases + 1 comm + the literal's for = 9
	if got := complexity(f.Decls[0].(*ast.FuncDecl)); got != 9 {
		t.Fatalf("complexity %d, want 9", got)
	}
}
