package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeBlock returns the shell block of the README between the markers
// <!-- NAME:begin --> and <!-- NAME:end -->.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- "+name+":begin -->\n")
	block, _, ok2 := strings.Cut(rest, "<!-- "+name+":end -->")
	if !ok || !ok2 {
		t.Fatalf("README has no %s block", name)
	}
	block = strings.TrimSpace(block)
	body, ok := strings.CutPrefix(block, "```sh\n")
	if !ok || !strings.HasSuffix(body, "\n```") {
		t.Fatalf("the %s block is not one sh fence", name)
	}
	return strings.TrimSuffix(body, "```")
}

// The README's agent cycle, run as printed: in a fresh directory holding
// the binary as ./clearance, next to a server whose data is ./clearance-data
// (the newcomer's layout), with bash -euo pipefail so that any step that
// fails fails the test.
func TestReadmeCycleRunsAsPrinted(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not on PATH")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not on PATH")
	}
	script := readmeBlock(t, "readme-cycle")
	work := t.TempDir()
	bin, err := os.ReadFile(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "clearance"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, filepath.Join(work, "clearance-data"))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = work
	// The README's default is 127.0.0.1:8080; the test's server is elsewhere.
	cmd.Env = append(os.Environ(), "CLEARANCE_SERVER="+s.url, "CLEARANCE_API_KEY=", "CLEARANCE_PLATFORM_KEY=", "CLEARANCE_DATA=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's cycle failed: %v\n%s", err, out)
	}
	for _, want := range []string{"refunding order-1", `"finalized":"COMMITTED"`, `"outcome":"BLOCK"`, "exit 3", `"valid": true`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the README's cycle printed no %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "never printed") {
		t.Errorf("the blocked command ran:\n%s", out)
	}
}
