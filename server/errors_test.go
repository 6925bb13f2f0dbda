package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/internal/gosource"
)

// kernelTable is the file holding the ONE table from sentinel to Kind.
const kernelTable = "../internal/core/translate.go"

// TestEverySentinelHasARow walks every errors.go of the module: each
// exported Err* sentinel a domain package declares must have a row in the
// kernel's table, or, for a feature package (which the kernel cannot
// import), in the kindOf table of its own errors.go, whose errors then name
// their Kind themselves (core's kinded errors). So no refusal of a package
// can reach a caller as a 503 by omission. The kernel's Kinds, the server's
// own errors and the command's helpers (which never reach the engine) are
// not domain sentinels.
func TestEverySentinelHasARow(t *testing.T) {
	rows := tableRows(t)
	files, err := gosource.Files("..")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range files {
		if f.Test || filepath.Base(f.Path) != "errors.go" || f.Dir == "" || f.Dir == "server" || f.Dir == "internal/core" || strings.HasPrefix(f.Dir, "cmd/") {
			continue
		}
		own := ownRows(t, f.Path)
		for _, name := range sentinels(t, f.Path) {
			seen++
			q := path.Base(f.Dir) + "." + name
			if !rows[q] && !own[name] {
				t.Errorf("%s: sentinel %s has no row in %s (nor in a kindOf table of its own errors.go)", f.Path, q, kernelTable)
			}
		}
	}
	if seen < 40 {
		t.Fatalf("found %d sentinels: the walk is broken", seen)
	}
}

// tableRows returns the pkg.Name selectors of the kernel table's rows.
func tableRows(t *testing.T) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), kernelTable, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "kindOf" {
			return true
		}
		ast.Inspect(vs, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && strings.HasPrefix(sel.Sel.Name, "Err") {
					rows[id.Name+"."+sel.Sel.Name] = true
				}
			}
			return true
		})
		return false
	})
	if len(rows) == 0 {
		t.Fatalf("%s: no kindOf table found", kernelTable)
	}
	return rows
}

// ownRows returns the Err* identifiers that are keys of a map literal
// assigned to a package-level kindOf in file: a feature's own table.
func ownRows(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if len(vs.Names) != 1 || vs.Names[0].Name != "kindOf" || len(vs.Values) != 1 {
				continue
			}
			lit, ok := vs.Values[0].(*ast.CompositeLit)
			if !ok {
				continue
			}
			for _, el := range lit.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if id, ok := kv.Key.(*ast.Ident); ok && strings.HasPrefix(id.Name, "Err") {
						rows[id.Name] = true
					}
				}
			}
		}
	}
	return rows
}

// sentinels returns the exported Err* variables declared in file.
func sentinels(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
					out = append(out, n.Name)
				}
			}
		}
	}
	return out
}

// TestStatusesChosenInErrorsGo: errors.go is the only file of the server
// that names an error status (4xx, 5xx); handlers return errors and the
// route's refusal body, and success statuses are theirs to choose.
func TestStatusesChosenInErrorsGo(t *testing.T) {
	success := map[string]bool{"StatusOK": true, "StatusCreated": true, "StatusAccepted": true, "StatusNoContent": true,
		"StatusNotModified": true, "StatusFound": true, "StatusSeeOther": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || file == "errors.go" {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "http" && strings.HasPrefix(sel.Sel.Name, "Status") &&
				sel.Sel.Name != "StatusText" && !success[sel.Sel.Name] {
				t.Errorf("%s: http.%s: error statuses are chosen in errors.go only", file, sel.Sel.Name)
			}
			return true
		})
	}
}
