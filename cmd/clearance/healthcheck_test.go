package main

import (
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
	"github.com/clearancehq/clearance/store/pgstore/pgtest"
)

// healthcheck against a real server: 0 while it is healthy (by --url, or
// by CLEARANCE_ADDR as the container image sets it), 1 for what is not a
// healthy Clearance (a 404, a stopped server, one that does not answer in
// time), 2 for a usage error.
func TestHealthcheck(t *testing.T) {
	s := startServer(t, t.TempDir(), "--metrics-addr", "127.0.0.1:0")
	code, out, errOut := runCLI(t, nil, "healthcheck", "--url", s.url)
	if code != 0 || out != s.url+"/v1/health: ok\n" {
		t.Fatalf("healthy server: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	addr := strings.TrimPrefix(s.url, "http://")
	_, port, _ := net.SplitHostPort(addr)
	if code, out, errOut := runCLI(t, []string{"CLEARANCE_ADDR=0.0.0.0:" + port}, "healthcheck"); code != 0 || !strings.Contains(out, "127.0.0.1:"+port) {
		t.Fatalf("healthcheck by CLEARANCE_ADDR=0.0.0.0:%s: exit %d, stdout %q, stderr %q", port, code, out, errOut)
	}

	var metricsAddr string
	for _, m := range s.logLines() {
		if m["msg"] == "metrics listening" {
			metricsAddr = str(m, "addr")
		}
	}
	if code, _, errOut := runCLI(t, nil, "healthcheck", "--url", "http://"+metricsAddr); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("a listener without /v1/health: exit %d, stderr %q", code, errOut)
	}

	// A listener that accepts and never answers: the timeout ends the check.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	code, _, errOut = runCLI(t, nil, "healthcheck", "--url", "http://"+silent.Addr().String(), "--timeout", "300ms")
	if code != 1 || !strings.Contains(errOut, "deadline exceeded") || time.Since(start) > 20*time.Second {
		t.Fatalf("a server that does not answer: exit %d after %v, stderr %q", code, time.Since(start), errOut)
	}

	for _, args := range [][]string{{"--url", "ftp://" + addr}, {"--url", "not a url"}, {"--timeout", "0s"}, {"extra"}} {
		if code, _, errOut := runCLI(t, nil, append([]string{"healthcheck"}, args...)...); code != 2 || !strings.Contains(errOut, "usage:") {
			t.Errorf("healthcheck %v: exit %d, stderr %q", args, code, errOut)
		}
	}

	if code := s.signal(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	if code, _, errOut := runCLI(t, nil, "healthcheck", "--url", s.url); code != 1 || !strings.Contains(errOut, "unhealthy") {
		t.Fatalf("stopped server: exit %d, stderr %q", code, errOut)
	}
}

// A server that answers but is degraded (503: its active grant key was
// revoked in the database) is unhealthy.
func TestHealthcheckDegraded(t *testing.T) {
	pgtest.Admin(t)
	storeURL := pgtest.SchemaURL(t, pgtest.NewSchema(t, "clearance_healthcheck_"))
	grantFile := filepath.Join(t.TempDir(), "grant.json")
	active, err := keyfile.Create(grantFile)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, t.TempDir(), "--store", storeURL, "--grant-key-file", grantFile)
	if code, _, errOut := runCLI(t, nil, "healthcheck", "--url", s.url); code != 0 {
		t.Fatalf("before the revocation: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, nil, "keys", "revoke", "--kid", active.KID(), "--store", storeURL); code != 0 {
		t.Fatalf("keys revoke: exit %d: %s", code, errOut)
	}
	// The server learns of revocations in the database within a second.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, errOut := runCLI(t, nil, "healthcheck", "--url", s.url)
		if code == 1 && strings.Contains(errOut, "503") && strings.Contains(errOut, "degraded") {
			return
		}
		if code != 0 || time.Now().After(deadline) {
			t.Fatalf("after the revocation: exit %d, stderr %q", code, errOut)
		}
		<-time.After(100 * time.Millisecond) // poll interval
	}
}

func TestLocalURLOf(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8080":   "http://127.0.0.1:8080",
		":8080":          "http://127.0.0.1:8080",
		"[::]:8080":      "http://[::1]:8080",
		"127.0.0.1:9000": "http://127.0.0.1:9000",
		"[::1]:9000":     "http://[::1]:9000",
		"10.1.2.3:80":    "http://10.1.2.3:80",
	} {
		if got := localURLOf(addr); got != want {
			t.Errorf("localURLOf(%q) = %q, want %q", addr, got, want)
		}
	}
}
