package lock_test

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite README.md's Go blocks from their Examples")

// marker names the Example a README Go block comes from:
// <!-- Example: lock.Example --> on the line before the block.
var marker = regexp.MustCompile(`^<!-- Example: (\w+)\.(\w+) -->$`)

// readmeLiterals turns what only a test has (the test server's address)
// into what a reader pastes: the README's blocks compile as they stand.
var readmeLiterals = strings.NewReplacer(
	`exampleAddr() // your Redis master, such as "127.0.0.1:6379"`, `"127.0.0.1:6379" // your Redis master`,
	"exampleAddr()", `"127.0.0.1:6379"`,
)

// exampleBody returns the body of the Example fn in package dir's
// example_test.go, dedented one tab, without its Output comment.
func exampleBody(t *testing.T, dir, fn string) string {
	t.Helper()
	path := filepath.Join("..", dir, "example_test.go")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn || fd.Recv != nil {
			continue
		}
		body := string(src[fset.Position(fd.Body.Lbrace).Offset+1 : fset.Position(fd.Body.Rbrace).Offset])
		var out []string
		for _, line := range strings.Split(strings.Trim(body, "\n"), "\n") {
			if strings.TrimSpace(line) == "// Output:" {
				break
			}
			out = append(out, strings.TrimPrefix(line, "\t"))
		}
		return readmeLiterals.Replace(strings.TrimRight(strings.Join(out, "\n"), "\n") + "\n")
	}
	t.Fatalf("%s: no func %s", path, fn)
	return ""
}

// Every Go block of the README is the body of an Example that go test
// compiles and runs (its Output checked): no exemptions. Regenerate with
// go test ./lock -run TestReadme -update-readme.
func TestReadme(t *testing.T) {
	path := filepath.Join("..", "README.md")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(src), "\n")
	var out bytes.Buffer
	blocks := 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out.WriteString(line)
		if strings.TrimSpace(line) != "```go" {
			continue
		}
		blocks++
		prev := ""
		for j := i - 1; j >= 0 && prev == ""; j-- {
			prev = strings.TrimSpace(lines[j])
		}
		m := marker.FindStringSubmatch(prev)
		if m == nil {
			t.Errorf("README.md:%d: a Go block without an <!-- Example: pkg.Func --> line before it", i+1)
			continue
		}
		want := exampleBody(t, m[1], m[2])
		var got strings.Builder
		j := i + 1
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			got.WriteString(lines[j])
		}
		if got.String() != want && !*updateReadme {
			t.Errorf("README.md:%d: the block differs from %s.%s's body; run go test ./lock -run TestReadme -update-readme\n--- README\n%s--- Example\n%s", i+1, m[1], m[2], got.String(), want)
		}
		out.WriteString(want)
		i = j - 1
	}
	if blocks == 0 {
		t.Fatal("README.md has no Go block")
	}
	if *updateReadme {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
