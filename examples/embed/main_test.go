package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), t.TempDir(), &out); err != nil {
		t.Fatal(err)
	}
	want := "ESCALATE SHADOW [PROTOCOL_OUTCOME_ESCALATE POLICY_MATCHED AMOUNT_IN_ESCALATION_BAND]\n" +
		"dossier digest matches the ledger: true\n" +
		"ledger valid: true entries: 3\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// TestREADMEShowsThisCode keeps the README's embedding snippet compiled: it
// must be the code between the README markers of main.go.
func TestREADMEShowsThisCode(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(src), "// README:begin\n")
	snippet, _, ok2 := strings.Cut(rest, "\t// README:end")
	if !ok || !ok2 {
		t.Fatal("README markers missing in main.go")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), dedent(snippet)) {
		t.Fatalf("README.md does not contain the snippet of examples/embed/main.go:\n%s", dedent(snippet))
	}
}

func dedent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	return strings.Join(lines, "\n")
}
