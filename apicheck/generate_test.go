package apicheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	// The generated Go client imports the oapi-codegen runtime; importing
	// it here keeps it (and its checksums) in go.mod, which `go mod tidy`
	// would otherwise drop since no committed file uses it.
	_ "github.com/oapi-codegen/runtime"
	_ "github.com/oapi-codegen/runtime/types"
)

// specPath is the document, relative to this module's directory (where go
// test runs the tests).
const specPath = "../docs/openapi.yaml"

// run runs name with args in dir and fails the test with its output if it
// does not succeed.
func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.Bytes())
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// TestGoClientCompiles generates the Go client (types and client, see
// oapi-codegen.yaml) and builds it with testdata/client_usage.go, which
// uses a few of its operations and checks that numbers kept their width.
// The package goes to a directory of this module (so it builds against
// this go.mod) whose name starts with "_", which ./... patterns skip; the
// test removes it.
func TestGoClientCompiles(t *testing.T) {
	dir, err := os.MkdirTemp(".", "_generated")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	client := filepath.Join(dir, "client.go")

	start := time.Now()
	// go test puts its own go first on PATH.
	run(t, ".", "go", "tool", "oapi-codegen", "-config", "oapi-codegen.yaml", "-o", client, specPath)
	generated := time.Since(start)
	copyFile(t, filepath.Join("testdata", "client_usage.go"), filepath.Join(dir, "client_usage.go"))

	start = time.Now()
	run(t, ".", "go", "build", "./"+filepath.ToSlash(dir))
	t.Logf("oapi-codegen wrote %d lines in %v; go build took %v", countLines(t, client), generated.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// TestTypeScriptClientCompiles installs openapi-typescript and TypeScript
// as ts/package-lock.json pins them, generates the document's types and
// type-checks ts/usage.ts against them (strict tsc, no output).
func TestTypeScriptClientCompiles(t *testing.T) {
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("CLEARANCE_REQUIRE_NODE") == "1" {
			t.Fatalf("CLEARANCE_REQUIRE_NODE=1 but node or npm is missing (node: %v, npm: %v)", errNode, errNpm)
		}
		t.Skip("node and npm are needed to generate and check the TypeScript client; CLEARANCE_REQUIRE_NODE=1 makes their absence a failure")
	}
	spec, err := filepath.Abs(specPath)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	run(t, "ts", npm, "ci", "--no-audit", "--no-fund")
	installed := time.Since(start)

	out := t.TempDir()
	for _, f := range []string{"usage.ts", "tsconfig.json"} {
		copyFile(t, filepath.Join("ts", f), filepath.Join(out, f))
	}
	schema := filepath.Join(out, "schema.ts")
	start = time.Now()
	run(t, "ts", node, filepath.Join("node_modules", "openapi-typescript", "bin", "cli.js"), spec, "-o", schema)
	generated := time.Since(start)

	start = time.Now()
	run(t, "ts", node, filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", filepath.Join(out, "tsconfig.json"))
	t.Logf("npm ci took %v; openapi-typescript wrote %d lines in %v; tsc took %v",
		installed.Round(time.Millisecond), countLines(t, schema), generated.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
