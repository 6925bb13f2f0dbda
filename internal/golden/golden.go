// Package golden pins the RFC 8785 bytes of records whose digest enters the
// ledger: a renamed member or a changed encoding would change what old
// entries verify against, so it must be a visible change of a file under
// testdata/golden (go test -run Golden -update), never a silent one. A file
// holds exactly the canonical bytes (no trailing newline), so its SHA-256 is
// the payload digest the ledger records. Test support only.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/clearancehq/clearance/internal/canon"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// Check compares the canonical JSON of v with testdata/golden/<name>.json
// of the package under test, or rewrites the file with -update.
func Check(t *testing.T, name string, v any) {
	t.Helper()
	got, err := canon.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("canonical encoding changed; the ledger commits to these bytes:\n got %s\nwant %s", got, want)
	}
}
