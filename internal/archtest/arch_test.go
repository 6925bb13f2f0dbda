package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/clearancehq/clearance"

// pure packages: no I/O, no storage, no clock, no global randomness.
var pure = []string{"policy", "grant", "ledger", "dossier", "tenant", "capsule", "artifact", "proof", "export", "internal/canon", "internal/strictjson"}

// forbiddenInPure are imports no pure package may have.
var forbiddenInPure = []string{"net/http", "database/sql", "os", "log", "log/slog", "crypto/rand", "math/rand", "math/rand/v2",
	"github.com/cockroachdb/pebble/v2", "github.com/jackc/pgx/v5"}

// layers: a package (prefix) may not import these module packages (prefixes).
var layers = map[string][]string{
	"policy":   {"", "server", "store", "cmd", "ledger", "dossier", "grant", "tenant"},
	"grant":    {"", "server", "store", "cmd", "policy", "ledger", "dossier", "tenant"},
	"ledger":   {"", "server", "store", "cmd", "policy", "dossier", "grant", "tenant"},
	"dossier":  {"", "server", "store", "cmd", "policy"},
	"tenant":   {"", "server", "store", "cmd", "policy", "ledger", "dossier", "grant"},
	"store":    {"", "server", "cmd"},
	"export":   {"", "server", "store", "cmd", "policy", "dossier", "grant", "tenant", "claim", "artifact"},
	"":         {"server", "cmd", "store/pebblestore"},
	"server":   {"cmd", "store/pebblestore"},
	"internal": {"", "server", "store", "cmd"},
}

func TestImportArrows(t *testing.T) {
	root := moduleRoot(t)
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bench") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		if pkg == "." {
			pkg = ""
		}
		files++
		checkFile(t, path, pkg)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Fatalf("walked only %d files: is the module root right?", files)
	}
}

func checkFile(t *testing.T, path, pkg string) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if isTestSupport(pkg) {
		return
	}
	isPure := owns(pure, pkg)
	names := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		local := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			local = imp.Name.Name
		}
		names[local] = p
		if isPure && contains(forbiddenInPure, p) {
			t.Errorf("%s: pure package %q imports %s", path, pkg, p)
		}
		if rest, ok := strings.CutPrefix(p, module); ok {
			target := strings.TrimPrefix(rest, "/")
			if banned := bannedFor(pkg); banned != nil && hits(banned, target) {
				t.Errorf("%s: package %q must not import %q", path, pkg, target)
			}
		}
	}
	if !isPure {
		return
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && names[id.Name] == "time" && sel.Sel.Name == "Now" {
			t.Errorf("%s: pure package %q calls time.Now; take time as an input", fset.Position(sel.Pos()), pkg)
		}
		return true
	})
}

// isTestSupport: conformance suites (…test packages) may import what they test.
func isTestSupport(pkg string) bool {
	last := pkg[strings.LastIndex(pkg, "/")+1:]
	return strings.HasSuffix(last, "test") && last != "archtest"
}

// bannedFor returns the rule of the longest matching layer prefix.
func bannedFor(pkg string) []string {
	best, found := "", false
	for prefix := range layers {
		if (prefix == "" || pkg == prefix || strings.HasPrefix(pkg, prefix+"/")) && (!found || len(prefix) > len(best)) {
			best, found = prefix, true
		}
	}
	if !found {
		return nil
	}
	if best == "" && pkg != "" {
		return nil // only the root package itself follows the root rule
	}
	return layers[best]
}

// hits reports whether target is one of the banned packages or below one.
func hits(banned []string, target string) bool {
	for _, b := range banned {
		if b == "" {
			if target == "" {
				return true
			}
			continue
		}
		if target == b || strings.HasPrefix(target, b+"/") {
			return true
		}
	}
	return false
}

func owns(list []string, pkg string) bool {
	for _, p := range list {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

func TestRulesCatchViolations(t *testing.T) {
	if !hits(bannedFor("policy"), "store/pebblestore") {
		t.Error("policy importing store/pebblestore should be banned")
	}
	if !hits(bannedFor(""), "server") {
		t.Error("the engine importing server should be banned")
	}
	if hits(bannedFor("server"), "") {
		t.Error("server importing the engine should be allowed")
	}
	if !hits(bannedFor("store/pebblestore"), "") {
		t.Error("a backend importing the engine should be banned")
	}
	if bannedFor("cmd/clearance") != nil {
		t.Error("cmd may import everything")
	}
	if !owns(pure, "policy") || owns(pure, "server") {
		t.Error("purity list wrong")
	}
}
