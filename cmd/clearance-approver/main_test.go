package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clearancehq/clearance/approver"
)

const (
	credA = "cred-org-a-0123456789abcdef"
	credB = "cred-org-b-0123456789abcdef"
)

func writeFile(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-h"}, 0, "clearance-approver serve"},
		{[]string{"help"}, 0, "clearance-approver enroll"},
		{[]string{"serve", "-h"}, 0, "-credentials-file"},
		{[]string{"enroll", "-h"}, 0, "-approver"},
		{nil, 2, "usage"},
		{[]string{"bogus"}, 2, "unknown command"},
	} {
		var out, errb bytes.Buffer
		if got := run(context.Background(), c.args, &out, &errb); got != c.code || !strings.Contains(out.String()+errb.String(), c.out) {
			t.Errorf("%q: exit %d, want %d; output %q", c.args, got, c.code, out.String()+errb.String())
		}
	}
}

func TestServeRefusesBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "creds", "# org credential\norg_a "+credA+"\n\norg_b "+credB+"\n", 0o600)
	keys := writeFile(t, dir, "keys", "org_a clr_org_key\n", 0o600)
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no credentials file", nil, 2, "--credentials-file is required"},
		{"hints half configured", []string{"--credentials-file", good, "--clearance-url", "http://127.0.0.1:1"}, 2, "go together"},
		{"arguments", []string{"--credentials-file", good, "extra"}, 2, "unexpected arguments"},
		{"log level", []string{"--credentials-file", good, "--log-level", "loud"}, 2, "--log-level"},
		{"readable by others", []string{"--credentials-file", writeFile(t, dir, "open", "org_a "+credA+"\n", 0o644)}, 1, "0600"},
		{"bad line", []string{"--credentials-file", writeFile(t, dir, "bad", "org_a\n", 0o600)}, 1, "want \\\"org_id secret\\\""},
		{"duplicate credential", []string{"--credentials-file", writeFile(t, dir, "dup", "org_a "+credA+"\norg_b "+credA+"\n", 0o600)}, 1, "twice"},
		{"empty", []string{"--credentials-file", writeFile(t, dir, "empty", "# none\n", 0o600)}, 1, "no credential"},
		{"short credential", []string{"--credentials-file", writeFile(t, dir, "short", "org_a short\n", 0o600)}, 1, "shorter"},
		{"IP address as RP ID", []string{"--credentials-file", good, "--public-url", "http://127.0.0.1:8090"}, 1, "IP address"},
		{"keys file duplicate", []string{"--credentials-file", good, "--clearance-url", "http://127.0.0.1:1",
			"--clearance-keys-file", writeFile(t, dir, "dupkeys", "org_a k1\norg_a k2\n", 0o600)}, 1, "twice"},
		{"clearance URL", []string{"--credentials-file", good, "--clearance-url", "127.0.0.1:1", "--clearance-keys-file", keys}, 1, "absolute"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data")}, c.args...)
			var out, errb bytes.Buffer
			got := run(context.Background(), args, &out, &errb)
			if got != c.code || !strings.Contains(out.String()+errb.String(), c.msg) {
				t.Errorf("exit %d, want %d; output %s%s", got, c.code, out.String(), errb.String())
			}
			if strings.Contains(out.String()+errb.String(), credA) {
				t.Error("a credential was printed")
			}
		})
	}
}

// server is a serve run in process.
type server struct {
	addr   string
	cancel context.CancelFunc
	done   chan int
	lines  chan map[string]any // the log, closed once the server exited
}

// startServer runs serve with args and waits until it listens.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &server{cancel: cancel, done: make(chan int, 1), lines: make(chan map[string]any, 100)}
	go func() {
		code := run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), pw, pw)
		pw.Close()
		s.done <- code
	}()
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			if m["msg"] == "listening" {
				listening <- m["addr"].(string)
			}
			select {
			case s.lines <- m:
			default:
			}
		}
		close(listening)
		close(s.lines) // the server has exited and every line is read
	}()
	addr, ok := <-listening
	if !ok {
		t.Fatalf("the server did not start (exit %d)", <-s.done)
	}
	s.addr = addr
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop ends the server as SIGTERM would and returns its exit code.
func (s *server) stop(t *testing.T) int {
	t.Helper()
	if s.cancel == nil {
		return 0
	}
	s.cancel()
	s.cancel = nil
	return <-s.done
}

func call(t *testing.T, method, url, cred string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, data
}

// TestServe runs the service, enrolls an approver with the enroll command,
// opens a request, stops it and starts it again on the same data
// directory: the request and the signing key are still there.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	creds := writeFile(t, dir, "creds", "org_a "+credA+"\norg_b "+credB+"\n", 0o600)
	args := []string{"--data", data, "--public-url", "http://localhost:8090", "--issuer", "https://approvals.example/iss", "--credentials-file", creds}
	s := startServer(t, args...)
	base := "http://" + s.addr

	code, jwks := call(t, http.MethodGet, base+"/.well-known/jwks.json", "", nil)
	if code != http.StatusOK || !strings.Contains(string(jwks), `"crv":"Ed25519"`) {
		t.Fatalf("jwks: %d %s", code, jwks)
	}
	var out, errb bytes.Buffer
	if got := run(context.Background(), []string{"enroll", "--server", base, "--credentials-file", creds, "--org", "org_a", "--approver", "alice@example.com"}, &out, &errb); got != 0 {
		t.Fatalf("enroll: exit %d: %s", got, errb.String())
	}
	var e approver.Enrollment
	if err := json.Unmarshal(out.Bytes(), &e); err != nil || e.ApproverID != "alice@example.com" || !strings.HasPrefix(e.EnrollmentURL, "http://localhost:8090/enroll/") {
		t.Fatalf("enroll printed %s (%v)", out.String(), err)
	}
	if code, page := call(t, http.MethodGet, base+strings.TrimPrefix(e.EnrollmentURL, "http://localhost:8090"), "", nil); code != http.StatusOK || !strings.Contains(string(page), "alice@example.com") {
		t.Fatalf("enrollment page: %d", code)
	}
	if got := run(context.Background(), []string{"enroll", "--server", base, "--credentials-file", creds, "--org", "org_c", "--approver", "x"}, io.Discard, io.Discard); got != 1 {
		t.Errorf("enroll for an org without a credential: exit %d", got)
	}

	open := map[string]any{
		"org_id": "org_a", "escalation_id": "esc-1", "intent_hash": "sha256:" + strings.Repeat("0", 64),
		"actor":      map[string]any{"id": "agent", "type": "agent"},
		"action":     map[string]any{"type": "payment.send", "amount": "10.00", "currency": "EUR"},
		"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	}
	code, body := call(t, http.MethodPost, base+"/v1/approval-requests", credA, open)
	if code != http.StatusCreated {
		t.Fatalf("open: %d %s", code, body)
	}
	var r approver.ApprovalRequest
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if code, _ := call(t, http.MethodGet, base+"/v1/approval-requests/"+r.RequestID, credB, nil); code != http.StatusNotFound {
		t.Errorf("org B read org A's request: %d", code)
	}
	if got := s.stop(t); got != 0 {
		t.Fatalf("stop: exit %d", got)
	}
	stopped := false
	for m := range s.lines {
		if m["msg"] == "stopped" {
			stopped = true
		}
		if strings.Contains(fmt.Sprint(m), credA) || strings.Contains(fmt.Sprint(m), strings.TrimPrefix(e.EnrollmentURL, "http://localhost:8090/enroll/")) {
			t.Errorf("a secret was logged: %v", m)
		}
	}
	if !stopped {
		t.Error("no \"stopped\" log line")
	}
	fi, err := os.Stat(filepath.Join(data, "signing-key.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key file: %v %v", fi, err)
	}

	s2 := startServer(t, args...)
	base = "http://" + s2.addr
	code, body = call(t, http.MethodGet, base+"/v1/approval-requests/"+r.RequestID, credA, nil)
	var r2 approver.ApprovalRequest
	if code != http.StatusOK || json.Unmarshal(body, &r2) != nil || r2.Status != approver.StatusPending || r2.ApprovalURL != r.ApprovalURL {
		t.Fatalf("after restart: %d %s", code, body)
	}
	if _, jwks2 := call(t, http.MethodGet, base+"/.well-known/jwks.json", "", nil); !bytes.Equal(jwks, jwks2) {
		t.Errorf("the signing key changed across a restart: %s vs %s", jwks, jwks2)
	}
}

// TestSignals builds the binary and stops it with SIGTERM and SIGINT: it
// drains and exits 0.
func TestSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "clearance-approver")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	creds := writeFile(t, dir, "creds", "org_a "+credA+"\n", 0o600)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data"), "--credentials-file", creds)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stdout)
			var tail []string
			for sc.Scan() {
				tail = append(tail, sc.Text())
				if strings.Contains(sc.Text(), `"msg":"listening"`) {
					break
				}
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			for sc.Scan() {
				tail = append(tail, sc.Text())
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("exit: %v\n%s", err, strings.Join(tail, "\n"))
			}
			if !strings.Contains(strings.Join(tail, "\n"), `"msg":"stopped"`) {
				t.Errorf("no stopped line:\n%s", strings.Join(tail, "\n"))
			}
		})
	}
}
