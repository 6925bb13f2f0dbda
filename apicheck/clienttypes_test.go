package apicheck

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestClientTypesAreGenerated regenerates the Go client's types
// (client/types.gen.go, see client/oapi-codegen.yaml) from the document and
// requires the committed file to be exactly that: the client's types cannot
// drift from the contract. To regenerate after changing the document, run
// the command in client/doc.go's go:generate line.
func TestClientTypesAreGenerated(t *testing.T) {
	out := filepath.Join(t.TempDir(), "types.gen.go")
	run(t, ".", "go", "tool", "oapi-codegen", "-config", "../client/oapi-codegen.yaml", "-o", out, specPath)
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../client/types.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("client/types.gen.go is not what docs/openapi.yaml generates (%d vs %d bytes): run go generate ./client/", len(got), len(want))
	}
}
