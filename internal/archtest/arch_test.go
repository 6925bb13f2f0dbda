package archtest

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
)

func TestImportArrows(t *testing.T) {
	root := moduleRoot(t)
	found, vs, err := check(root, packages)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 10 {
		t.Fatalf("found only %d packages: is the module root right?", len(found))
	}
	for _, v := range vs {
		t.Error(v)
	}
	// The list stays the map of the tree: an entry without a package is stale.
	for pkg := range packages {
		if !slices.Contains(found, pkg) {
			t.Errorf("allow-list names %s, which is not a package of the module", displayPkg(pkg))
		}
	}
}

func TestTableIsWellFormed(t *testing.T) {
	for pkg, r := range packages {
		if _, ok := mayImport[r.layer]; !ok {
			t.Errorf("%s: unknown layer %q", displayPkg(pkg), r.layer)
		}
		for _, p := range r.peers {
			if q, ok := packages[p]; !ok || q.layer != r.layer {
				t.Errorf("%s: peer %s is not a listed package of layer %s", displayPkg(pkg), p, r.layer)
			}
		}
		for _, p := range r.deny {
			if _, ok := packages[p]; !ok {
				t.Errorf("%s: denies %s, which is not listed", displayPkg(pkg), p)
			}
		}
	}
	for l, below := range mayImport {
		for _, b := range below {
			if _, ok := mayImport[b]; !ok || b == l {
				t.Errorf("layer %s may import %q: not another layer", l, b)
			}
			if slices.Contains(mayImport[b], l) {
				t.Errorf("layers %s and %s may import each other", l, b)
			}
		}
	}
}

func TestRulesCatchViolations(t *testing.T) {
	if allowed(packages, "policy", "store/pebblestore") {
		t.Error("policy importing store/pebblestore should be banned")
	}
	if allowed(packages, "", "server") {
		t.Error("the engine importing server should be banned")
	}
	if !allowed(packages, "server", "") {
		t.Error("server importing the engine should be allowed")
	}
	if allowed(packages, "store/pebblestore", "") {
		t.Error("a backend importing the engine should be banned")
	}
	if allowed(packages, "server", "store/pebblestore") || allowed(packages, "", "store/pgstore") {
		t.Error("only cmd and examples choose a backend")
	}
	if allowed(packages, "", "ledger/ledgertest") {
		t.Error("production code importing a test suite should be banned")
	}
	if allowed(packages, "policy", "grant") || allowed(packages, "tenant", "ledger") {
		t.Error("a pure or record package importing one its entry does not allow should be banned")
	}
	for pkg, r := range packages {
		// Binaries (the cmd layer) are not library packages.
		if r.layer != cmd && r.layer != suite && r.layer != example && !allowed(packages, "cmd/clearance", pkg) {
			t.Errorf("cmd may import every library package; not %s", displayPkg(pkg))
		}
	}
	if !pureRule(packages["policy"]) || !pureRule(packages["tenant"]) || pureRule(packages["server"]) || pureRule(packages["internal/outbound"]) {
		t.Error("purity list wrong")
	}
}

// TestAllowListBites runs the checker on a small module written for the
// purpose: each planted violation must be reported, and nothing else.
func TestAllowListBites(t *testing.T) {
	module, err := modulePath(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	files := map[string]string{
		"go.mod": "module " + module + "\n\ngo 1.26\n",
		// (a) a folder nobody placed in a layer
		"newfeature/x.go": "package newfeature\n",
		// (b) forbidden imports: upward, a backend from server, a suite from production, a pure package doing I/O
		"ledger/x.go": "package ledger\n\nimport _ \"" + module + "/server\"\n",
		"server/x.go": "package server\n\nimport _ \"" + module + "/store/pebblestore\"\n",
		"x.go":        "package clearance\n\nimport _ \"" + module + "/ledger/ledgertest\"\n",
		"policy/x.go": "package policy\n\nimport _ \"os\"\n",
		// (c) the clock in pure packages, plainly and under another name
		"grant/x.go":   "package grant\n\nimport \"time\"\n\nfunc now() time.Time { return time.Now() }\n",
		"capsule/x.go": "package capsule\n\nimport clock \"time\"\n\nvar tick = clock.NewTicker\n",
		// (d) pure packages reaching the network through a leaf that does I/O
		"policy/y.go": "package policy\n\nimport _ \"" + module + "/internal/outbound\"\n",
		"tenant/x.go": "package tenant\n\nimport _ \"" + module + "/internal/outbound\"\n",
		// allowed: a same-layer peer, time as a value, the clock in a test
		// file, the clock outside the pure layers, and a nested module
		"proof/x.go":             "package proof\n\nimport (\n\t\"time\"\n\n\t_ \"" + module + "/ledger\"\n)\n\nfunc later(t time.Time) time.Time { return t.Add(time.Second) }\n",
		"grant/x_test.go":        "package grant\n\nimport \"time\"\n\nvar _ = time.Now()\n",
		"store/x.go":             "package store\n\nimport \"time\"\n\nvar _ = time.Now\n",
		"internal/outbound/x.go": "package outbound\n\nimport (\n\t_ \"net/http\"\n\t\"time\"\n)\n\nvar _ = time.Now\n",
		"audit/x.go":             "package audit\n\nimport _ \"" + module + "/internal/outbound\"\n",
		"bench/go.mod":           "module example.com/bench\n",
		"bench/x.go":             "package bench\n",
		"testdata/x/x.go":        "package x\n",
		".hidden/x/x.go":         "package x\n",
		"ledger/x_test.go":       "package ledger\n\nimport _ \"" + module + "/cmd/clearance\"\n",
	}
	for name, body := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, vs, err := check(root, packages)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.kind+" "+v.at)
	}
	sort.Strings(got)
	want := []string{
		"clock capsule/x.go:5",
		"clock grant/x.go:5",
		"import ledger/x.go",
		"import server/x.go",
		"import x.go",
		"impure-import policy/x.go",
		"impure-import policy/y.go",
		"impure-import tenant/x.go",
		"unlisted newfeature",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n got %q\nwant %q", got, want)
		for _, v := range vs {
			t.Log(v)
		}
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
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
