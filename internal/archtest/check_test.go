package archtest

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/clearancehq/clearance/internal/gosource"
)

// violation is one broken rule, at a file (or a package directory).
type violation struct {
	kind string // "unlisted", "import", "impure-import", "clock"
	pkg  string
	at   string
	msg  string
}

func (v violation) String() string { return fmt.Sprintf("%s: %s", v.at, v.msg) }

// check walks the module rooted at root against table and returns the
// package directories it found and every violation. Nested modules (a
// directory with its own go.mod), testdata and hidden directories are not
// part of the module. Imports and clock reads are checked in non-test files
// only: tests may reach for anything.
func check(root string, table map[string]rule) (found []string, vs []violation, err error) {
	module, err := modulePath(root)
	if err != nil {
		return nil, nil, err
	}
	files, err := gosource.Files(root)
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	for _, f := range files {
		pkg := f.Dir
		r, listed := table[pkg]
		if !seen[pkg] {
			seen[pkg] = true
			found = append(found, pkg)
			if !listed {
				vs = append(vs, violation{"unlisted", pkg, displayPkg(pkg), "package is not in the allow-list: place it in a layer"})
			}
		}
		if !listed || f.Test {
			continue
		}
		fileVs, err := checkFile(f.Path, path.Join(pkg, filepath.Base(f.Path)), pkg, r, module, table)
		if err != nil {
			return nil, nil, err
		}
		vs = append(vs, fileVs...)
	}
	sort.Strings(found)
	return found, vs, err
}

func checkFile(path, relPath, pkg string, r rule, module string, table map[string]rule) ([]violation, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	isPure := pureRule(r)
	var vs []violation
	timeNames := map[string]bool{}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return nil, err
		}
		if p == "time" {
			name := "time"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			timeNames[name] = true
		}
		if target, ok := inModule(module, p); ok {
			if allowed(table, pkg, target) && isPure && !pureRule(table[target]) {
				vs = append(vs, violation{"impure-import", pkg, relPath, fmt.Sprintf("pure package %s imports %s, which does I/O", displayPkg(pkg), displayPkg(target))})
			}
			if !allowed(table, pkg, target) {
				why := ""
				if slices.Contains(r.deny, target) {
					why = ": its entry denies it"
				}
				vs = append(vs, violation{"import", pkg, relPath, fmt.Sprintf("%s (%s) must not import %s (%s)%s",
					displayPkg(pkg), r.layer, displayPkg(target), layerOf(table, target), why)})
			}
			continue
		}
		if isPure && forbidden(p) {
			vs = append(vs, violation{"impure-import", pkg, relPath, fmt.Sprintf("pure package %s imports %s", displayPkg(pkg), p)})
		}
	}
	if !isPure || len(timeNames) == 0 {
		return vs, nil
	}
	fset = token.NewFileSet()
	f, err = parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	// A reference counts, not only a call: `now := time.Now` reads the clock too.
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && timeNames[id.Name] && slices.Contains(clockCalls, sel.Sel.Name) {
			pos := fset.Position(sel.Pos())
			vs = append(vs, violation{"clock", pkg, fmt.Sprintf("%s:%d", relPath, pos.Line),
				fmt.Sprintf("pure package %s uses time.%s; take time as an input", displayPkg(pkg), sel.Sel.Name)})
		}
		return true
	})
	return vs, nil
}

// allowed reports whether package pkg may import target under table.
func allowed(table map[string]rule, pkg, target string) bool {
	from, ok := table[pkg]
	if !ok {
		return false
	}
	to, ok := table[target]
	if !ok {
		return false // an unlisted target is in no layer
	}
	if slices.Contains(from.deny, target) {
		return false
	}
	if slices.Contains(from.peers, target) {
		return true
	}
	return to.layer != from.layer && slices.Contains(mayImport[from.layer], to.layer)
}

func pureRule(r rule) bool { return !r.io && (r.pure || r.layer == leaf || r.layer == pure) }

func forbidden(p string) bool {
	for _, f := range forbiddenInPure {
		if p == f || strings.HasPrefix(p, f+"/") {
			return true
		}
	}
	return false
}

func inModule(module, p string) (string, bool) {
	if p == module {
		return "", true
	}
	rest, ok := strings.CutPrefix(p, module+"/")
	return rest, ok
}

func layerOf(table map[string]rule, pkg string) string {
	if r, ok := table[pkg]; ok {
		return r.layer
	}
	return "unlisted"
}

func displayPkg(pkg string) string {
	if pkg == "" {
		return "the root package"
	}
	return pkg
}

func modulePath(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s/go.mod: no module line", root)
}
