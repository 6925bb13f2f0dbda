package storetest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/clearancehq/clearance"

// root is the module root, from this package's directory.
var root = filepath.Join("..", "..")

// TestAllRunsEverySuite fails when a conformance suite (a package named
// *test with an exported Run(t *testing.T, ...)) is not run by All, or
// when a backend runs a suite itself instead of calling storetest.All.
func TestAllRunsEverySuite(t *testing.T) {
	suites := findSuites(t, root)
	if len(suites) < 5 {
		t.Fatalf("found only %d conformance suites (%v): is the module root right?", len(suites), suites)
	}
	all := importsOf(t, parse(t, "all.go"))
	for _, s := range suites {
		if s != module+"/store/storetest" && !all[s] {
			t.Errorf("storetest.All does not run the conformance suite %s", s)
		}
	}
	backends, err := filepath.Glob(filepath.Join(root, "store", "*", "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	callers := map[string]bool{}
	for _, file := range backends {
		if filepath.Base(filepath.Dir(file)) == "storetest" {
			continue
		}
		checkBackendTest(t, file, suites, callers)
	}
	for _, dir := range []string{"pebblestore", "pgstore"} {
		if !callers[dir] {
			t.Errorf("store/%s: no test calls storetest.All", dir)
		}
	}
}

// checkBackendTest reports a suite's Run called directly from file, and
// records the file's directory in callers when it calls storetest.All.
func checkBackendTest(t *testing.T, file string, suites []string, callers map[string]bool) {
	f := parse(t, file)
	names := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = p
	}
	isSuite := func(p string) bool {
		for _, s := range suites {
			if s == p {
				return true
			}
		}
		return false
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok || !isSuite(names[x.Name]) {
			return true
		}
		switch {
		case names[x.Name] == module+"/store/storetest" && sel.Sel.Name == "All":
			callers[filepath.Base(filepath.Dir(file))] = true
		case sel.Sel.Name == "Run":
			t.Errorf("%s: calls %s.Run; a backend runs the suites only through storetest.All", file, x.Name)
		}
		return true
	})
}

// findSuites lists the import paths of the conformance suites under dir.
func findSuites(t *testing.T, dir string) []string {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != dir && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || !strings.HasSuffix(filepath.Base(filepath.Dir(p)), "test") {
			return nil
		}
		if declaresRun(parse(t, p)) {
			rel, err := filepath.Rel(dir, filepath.Dir(p))
			if err != nil {
				return err
			}
			out = append(out, module+"/"+filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// declaresRun reports whether f declares func Run(t *testing.T, ...).
func declaresRun(f *ast.File) bool {
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Recv != nil || fd.Name.Name != "Run" || len(fd.Type.Params.List) == 0 {
			continue
		}
		star, ok := fd.Type.Params.List[0].Type.(*ast.StarExpr)
		if !ok {
			continue
		}
		if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "T" {
			return true
		}
	}
	return false
}

func importsOf(t *testing.T, f *ast.File) map[string]bool {
	out := map[string]bool{}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = true
	}
	return out
}

func parse(t *testing.T, file string) *ast.File {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
