package apidoc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/clearancehq/clearance/internal/gosource"
)

// notProblemCodes are package directories whose Code* constants are not
// problem codes, so the Problem schema does not list them.
var notProblemCodes = map[string]string{
	"capsule": "finding codes of the Capsule draft, reported in verification results",
	"cmd":     "the load generator's client-side classes of responses",
	// The approval service's codes are its own API's (docs/approver.md),
	// not Clearance's.
	"approver": "the reference approval service's own problem codes",
}

// codeArgs are the constructors that take a problem code, by the package
// directory that calls them ("*" for any) and the called name (a function,
// a method, or pkg.Func), with the code's argument index. Other packages
// have helpers of the same names that take no code (artifact's invalid).
var codeArgs = map[string]map[string]int{
	"*": {
		"coded.New":    0, // coded.New(code, sentinel, ...)
		"core.New":     1, // core.New(kind, code, ...), in the feature packages
		"core.Invalid": 0, // core.Invalid(code, field, ...)
	},
	"": {
		"newError":    1, // newError(kind, code, ...)
		"invalid":     0, // invalid(code, field, ...)
		"parentChain": 4, // (*Engine).parentChain(ctx, org, parent, field, code)
	},
	"server": {
		"tokenError":  0, // tokenError(code, field, msg)
		"headerToken": 1, // (*call).headerToken(name, code)
		"bodyToken":   2, // bodyToken(v, field, code)
	},
}

// goFile is one non-test Go file of the module.
type goFile struct {
	path string // as opened
	dir  string // package directory relative to the module root, "" for the root
}

// moduleFiles lists the non-test Go files of the module rooted at root
// (gosource.Files: nested modules, testdata and hidden directories are not
// part of it).
func moduleFiles(t *testing.T, root string) []goFile {
	t.Helper()
	all, err := gosource.Files(root)
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	var files []goFile
	for _, f := range all {
		if !f.Test {
			files = append(files, goFile{path: f.Path, dir: f.Dir})
		}
	}
	return files
}

// testSupport reports whether dir is a test-support package (ledgertest,
// storetest, pgtest, ...): its codes describe fixtures, not the service.
func testSupport(dir string) bool {
	return strings.HasSuffix(filepath.Base(dir), "test")
}

func skipped(dir string) bool {
	if testSupport(dir) {
		return true
	}
	for prefix := range notProblemCodes {
		if dir == prefix || strings.HasPrefix(dir, prefix+"/") {
			return true
		}
	}
	return false
}

// codeConstName reports whether name is Code<Upper>... or code<Upper>...
func codeConstName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Code")
	if !ok {
		rest, ok = strings.CutPrefix(name, "code")
	}
	return ok && rest != "" && unicode.IsUpper([]rune(rest)[0])
}

// stableCodes collects the problem codes the module defines: the string
// values of constants named Code*/code*, and any `Code: "..."` literal
// (which TestNoLiteralProblemCodes forbids, but which still reaches the wire).
func stableCodes(t *testing.T, root string) []string {
	t.Helper()
	var codes []string
	add := func(e ast.Expr) {
		if s, ok := stringLit(e); ok && s != "" && !slices.Contains(codes, s) {
			codes = append(codes, s)
		}
	}
	fset := token.NewFileSet()
	for _, gf := range moduleFiles(t, root) {
		if skipped(gf.dir) {
			continue
		}
		f, err := parser.ParseFile(fset, gf.path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", gf.path, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, spec := range n.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, id := range vs.Names {
						if codeConstName(id.Name) && i < len(vs.Values) {
							add(vs.Values[i])
						}
					}
				}
			case *ast.KeyValueExpr:
				if id, ok := n.Key.(*ast.Ident); ok && id.Name == "Code" {
					add(n.Value)
				}
			}
			return true
		})
	}
	slices.Sort(codes)
	return codes
}

// stringLit returns the value of a string literal, or of a sum or
// parenthesis of them.
func stringLit(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.ParenExpr:
		return stringLit(e.X)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, ok := stringLit(e.X)
		if !ok {
			return "", false
		}
		y, ok := stringLit(e.Y)
		return x + y, ok
	}
	return "", false
}

// codeArg returns the index of call's code argument when the callee, as
// called from package directory dir, is a constructor of codeArgs.
func codeArg(call *ast.CallExpr, dir string) (string, int, bool) {
	var names []string
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		names = []string{fn.Name}
	case *ast.SelectorExpr:
		names = []string{fn.Sel.Name} // a method: the receiver does not matter
		if pkg, ok := fn.X.(*ast.Ident); ok {
			names = append(names, pkg.Name+"."+fn.Sel.Name)
		}
	}
	for _, name := range names {
		for _, scope := range []string{dir, "*"} {
			if i, ok := codeArgs[scope][name]; ok {
				return name, i, true
			}
		}
	}
	return "", 0, false
}

// literalCodes returns where file f, of package directory dir, spells a problem code as a string
// literal instead of a named constant: in the Code field of a composite
// literal, assigned to a .Code field, or as the code argument of a
// constructor in codeArgs. Const declarations are where codes are spelled,
// so they are not looked at.
func literalCodes(fset *token.FileSet, f *ast.File, dir string) []string {
	var found []string
	report := func(n ast.Node, what string, s string) {
		found = append(found, fmt.Sprintf("%s: %s %q: name it with a constant in the package's errors.go", fset.Position(n.Pos()), what, s))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			return n.Tok != token.CONST
		case *ast.CompositeLit:
			for _, el := range n.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "Code" {
					if s, ok := stringLit(kv.Value); ok {
						report(kv.Value, "Code field", s)
					}
				}
			}
		case *ast.AssignStmt:
			if len(n.Lhs) != len(n.Rhs) {
				return true
			}
			for i, lhs := range n.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "Code" {
					if s, ok := stringLit(n.Rhs[i]); ok {
						report(n.Rhs[i], "assigned to .Code", s)
					}
				}
			}
		case *ast.CallExpr:
			if name, i, ok := codeArg(n, dir); ok && i < len(n.Args) {
				if s, ok := stringLit(n.Args[i]); ok {
					report(n.Args[i], "code argument of "+name, s)
				}
			}
		}
		return true
	})
	return found
}

// TestNoLiteralProblemCodes keeps every problem code a named constant, so
// stableCodes (and a reader) finds each one where it is declared.
func TestNoLiteralProblemCodes(t *testing.T) {
	files := moduleFiles(t, moduleDir)
	if len(files) < 50 {
		t.Fatalf("found only %d Go files: is the module root right?", len(files))
	}
	fset := token.NewFileSet()
	for _, gf := range files {
		f, err := parser.ParseFile(fset, gf.path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", gf.path, err)
		}
		for _, v := range literalCodes(fset, f, gf.dir) {
			t.Error(v)
		}
	}
}

// TestLiteralCodesBites plants every shape of a literal code, and the
// shapes that are fine, in one parsed file.
func TestLiteralCodesBites(t *testing.T) {
	const src = `package planted

const CodeFine = "FINE"

var named = &Error{Kind: ErrNotFound, Code: CodeFine}

func f(e *Error, c *call) {
	_ = &Error{Kind: ErrNotFound, Code: "GRANT_NOT_FOUND"}    // line 8
	_ = newError(ErrNotFound, "KEY_NOT_FOUND", "key not found") // line 9
	_ = invalid("INVALID_QUERY", "q", "bad")                  // line 10
	e.Code = "MISSING_" + "FIELD"                             // line 11
	_ = coded.New("envelope_malformed", errX, "%s", "x")      // line 12
	_, _ = c.headerToken("Idempotency-Key", "INVALID_KEY")    // line 13
	_ = Finding{Code: ("concurrent_supersedes")}              // line 14
	_ = core.New(ErrNotFound, "KEY_NOT_FOUND", "in a feature") // line 15
	_ = newError(ErrNotFound, CodeFine, "a literal detail is fine")
	_ = invalid(CodeFine, "field", "so is a literal field")
	_ = other("NOT_A_CODE")
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "planted.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	lines := func(dir string) ([]int, string) {
		got := literalCodes(fset, f, dir)
		var lines []int
		for _, v := range got {
			var line, col int
			if _, err := fmt.Sscanf(strings.TrimPrefix(v, "planted.go:"), "%d:%d:", &line, &col); err != nil {
				t.Fatalf("unparsable report %q: %v", v, err)
			}
			lines = append(lines, line)
		}
		return lines, strings.Join(got, "\n")
	}
	// The constructors are per package: headerToken is the server's, and
	// artifact has an invalid of its own that takes no code.
	for _, c := range []struct {
		dir  string
		want []int
	}{
		{"", []int{8, 9, 10, 11, 12, 14, 15}},
		{"server", []int{8, 11, 12, 13, 14, 15}},
		{"artifact", []int{8, 11, 12, 14, 15}},
	} {
		if got, text := lines(c.dir); !slices.Equal(got, c.want) {
			t.Errorf("in %q: reported lines %v, want %v:\n%s", c.dir, got, c.want, text)
		}
	}
}

// TestStableCodesReadTheTree shows the collection follows the tree: a code
// in a file no list names is found; test files, testdata, nested modules,
// test-support packages and the packages of notProblemCodes are not read.
func TestStableCodesReadTheTree(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n")
	write("errors.go", "package m\n\nconst (\n\tCodeRoot = \"ROOT\"\n\tcodes = \"NOT_A_CODE_NAME\"\n)\n")
	write("checkpoints.go", "package m\n\nconst codeNew = \"NEW_FILE\"\n\nvar CodeVar = \"A_VAR_IS_NOT_A_CONST\"\n")
	write("server/x.go", "package server\n\nvar e = Error{Code: \"LITERAL\"}\n")
	write("x_test.go", "package m\n\nconst CodeTest = \"TEST_FILE\"\n")
	write("testdata/x.go", "package x\n\nconst CodeData = \"TESTDATA\"\n")
	write("bench/go.mod", "module example.com/bench\n")
	write("bench/x.go", "package bench\n\nconst CodeNested = \"NESTED\"\n")
	write("claim/claimtest/x.go", "package claimtest\n\nconst CodeSuite = \"SUITE\"\n")
	write("capsule/errors.go", "package capsule\n\nconst CodeFinding = \"finding\"\n")
	write("cmd/tool/x.go", "package main\n\nconst codeClass = \"CLASS\"\n")

	got := stableCodes(t, root)
	if want := []string{"LITERAL", "NEW_FILE", "ROOT"}; !slices.Equal(got, want) {
		t.Errorf("stableCodes = %v, want %v", got, want)
	}
}
