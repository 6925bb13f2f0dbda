package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
	"github.com/clearancehq/clearance/internal/acktest"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// The real binary, built once (without -race, to keep it fast).
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary returns the path of the built clearance binary.
func binary(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot build the binary")
	}
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "clearance-bin-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "clearance")
		cmd := exec.Command(gobin, "build", "-o", binPath, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// runCLI runs the binary to completion and returns its exit code and output.
func runCLI(t *testing.T, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = append(os.Environ(), environ...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// proc is a running `clearance serve` process.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	url     string
	dataDir string
	stderr  bytes.Buffer

	mu   sync.Mutex
	logs []map[string]any // stdout JSON lines

	done    chan struct{} // closed once the process has exited
	waitErr error
}

// startServer runs `clearance serve` on a free port with dataDir and waits
// until it logs "listening" and answers /v1/health.
func startServer(t *testing.T, dataDir string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", dataDir}, extra...)
	s := &proc{t: t, cmd: exec.Command(binary(t), args...), dataDir: dataDir, done: make(chan struct{})}
	s.cmd.Stderr = &s.stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan string, 1)
	go func() {
		// Drain stdout for the whole life of the process (a full pipe would
		// block the server's logging), then reap it.
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				m = map[string]any{"msg": "<not JSON>", "line": sc.Text()}
			}
			s.mu.Lock()
			s.logs = append(s.logs, m)
			s.mu.Unlock()
			if m["msg"] == "listening" {
				if addr, _ := m["addr"].(string); addr != "" {
					select {
					case listening <- addr:
					default:
					}
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})

	select {
	case addr := <-listening:
		s.url = "http://" + addr
	case <-s.done:
		t.Fatalf("clearance serve exited before listening (%v): stderr %s; log %v", s.waitErr, s.stderr.String(), s.logLines())
	case <-time.After(60 * time.Second):
		t.Fatalf("clearance serve did not log \"listening\" within 60s; log %v", s.logLines())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(s.url + "/v1/health")
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/v1/health not ready: %v", err)
		}
		select {
		case <-s.done:
			t.Fatalf("clearance serve exited: %v", s.waitErr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *proc) logLines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.logs...)
}

// hasLog reports whether the process logged msg.
func (s *proc) hasLog(msg string) bool {
	for _, m := range s.logLines() {
		if m["msg"] == msg {
			return true
		}
	}
	return false
}

// signal sends sig and waits for the process to exit; it returns the exit code.
func (s *proc) signal(sig os.Signal) int {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
	return s.wait()
}

func (s *proc) wait() int {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		s.t.Fatal("clearance serve did not exit within 60s")
	}
	return s.cmd.ProcessState.ExitCode()
}

// platformKey reads the platform key serve wrote into the data dir.
func platformKey(t *testing.T, dataDir string) string {
	t.Helper()
	path := filepath.Join(dataDir, platformKeyFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// reply is one HTTP answer.
type reply struct {
	status int
	header http.Header
	raw    []byte
	json   map[string]any
}

// call sends one request; transport errors are returned, not fatal, so
// that it may run on any goroutine and while the server is being killed.
func call(client *http.Client, method, url, key, body string, hdr map[string]string) (*reply, error) {
	r, err := acktest.CallWith(client, method, url, key, body, hdr)
	if err != nil {
		return nil, err
	}
	return &reply{status: r.Status, header: r.Header, raw: r.Raw, json: r.JSON}, nil
}

// mustCall is call on the test goroutine, expecting status want.
func mustCall(t *testing.T, method, url, key, body string, want int) *reply {
	t.Helper()
	r, err := call(http.DefaultClient, method, url, key, body, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	if r.status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, url, r.status, want, r.raw)
	}
	return r
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// TestMetricsListener: /metrics on the API address needs the platform key;
// --metrics-addr serves it to an unauthenticated scraper on its own listener.
func TestMetricsListener(t *testing.T) {
	s := startServer(t, t.TempDir(), "--metrics-addr", "127.0.0.1:0")
	mustCall(t, "GET", s.url+"/metrics", "", "", http.StatusUnauthorized)
	mustCall(t, "GET", s.url+"/metrics", platformKey(t, s.dataDir), "", http.StatusOK)
	var addr string
	for _, m := range s.logLines() {
		if m["msg"] == "metrics listening" {
			addr = str(m, "addr")
		}
	}
	if addr == "" {
		t.Fatal("serve did not log the metrics listener")
	}
	page := mustCall(t, "GET", "http://"+addr+"/metrics", "", "", http.StatusOK)
	if !strings.Contains(string(page.raw), "clearance_http_requests_total") {
		t.Fatalf("metrics listener page: %.300s", page.raw)
	}
	mustCall(t, "GET", "http://"+addr+"/v1/health", "", "", http.StatusNotFound)
}

func TestVersion(t *testing.T) {
	code, out, errOut := runCLI(t, nil, "version")
	want := "clearance " + clearance.Version + " (interface " + clearance.InterfaceVersion + "; module "
	if code != 0 || !strings.HasPrefix(out, want) || !strings.HasSuffix(out, ")\n") || errOut != "" {
		t.Fatalf("version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, again, _ := runCLI(t, nil, "--version"); code != 0 || again != out {
		t.Fatalf("--version: exit %d, %q, want %q", code, again, out)
	}
}

// Every command the usage lists runs (no "unknown command"), and it and its
// subcommands answer -h and --help with exit 0.
func TestEveryCommandAnswersHelp(t *testing.T) {
	_, usage, _ := runCLI(t, nil, "help")
	var listed []string
	for _, line := range strings.Split(usage, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "clearance" {
			listed = append(listed, f[1])
		}
	}
	want := []string{"serve", "healthcheck", "admin", "keys", "intent", "cycle", "loadtest", "migrate", "verify", "policy", "version"}
	if !slices.Equal(listed, want) {
		t.Fatalf("the usage lists %v, want %v", listed, want)
	}
	for _, args := range [][]string{{"serve"}, {"healthcheck"}, {"admin"}, {"admin", "org", "create"}, {"admin", "org", "list"},
		{"admin", "key", "create"}, {"admin", "key", "list"}, {"admin", "key", "revoke"}, {"keys", "agent"}, {"keys", "agent", "new"},
		{"intent"}, {"intent", "sign"}, {"cycle"}, {"keys"}, {"keys", "init"},
		{"keys", "rotate"}, {"keys", "revoke"}, {"loadtest"}, {"migrate"}, {"verify"}, {"verify", "packet"},
		{"verify", "capsule"}, {"verify", "receipt"}, {"policy"}, {"policy", "check"}, {"policy", "test"},
		{"policy", "eval"}, {"policy", "replay"}, {"policy", "push"}, {"version"}} {
		for _, h := range []string{"-h", "--help"} {
			code, out, errOut := runCLI(t, nil, append(slices.Clone(args), h)...)
			if code != 0 || out+errOut == "" || strings.Contains(errOut, "unknown") {
				t.Errorf("clearance %s %s: exit %d, stdout %.80q, stderr %.80q", strings.Join(args, " "), h, code, out, errOut)
			}
		}
	}
}

func TestUsageAndUnknownCommand(t *testing.T) {
	code, out, errOut := runCLI(t, nil, "frobnicate")
	if code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) || !strings.Contains(errOut, "usage:") || out != "" {
		t.Fatalf("unknown command: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, nil); code != 2 || !strings.Contains(errOut, "usage:") {
		t.Fatalf("no command: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := runCLI(t, nil, "help"); code != 0 || !strings.Contains(out, "clearance serve") {
		t.Fatalf("help: exit %d, stdout %q", code, out)
	}
	if code, _, errOut := runCLI(t, nil, "admin", "user", "delete"); code != 2 || !strings.Contains(errOut, "usage:") {
		t.Fatalf("unknown admin command: exit %d, stderr %q", code, errOut)
	}
}

func TestServeRefusesBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runCLI(t, nil, "serve", "--data", dir, "--log-level", "loud"); code != 2 || !strings.Contains(errOut, "log-level") {
		t.Fatalf("bad --log-level: exit %d, stderr %q", code, errOut)
	}
	if code, _, _ := runCLI(t, nil, "serve", "--no-such-flag"); code != 2 {
		t.Fatalf("unknown flag: exit %d, want 2", code)
	}
	code, out, _ := runCLI(t, nil, "serve", "--data", dir, "--addr", "127.0.0.1:0", "--store", "mysql://admin:hunter2@db/x")
	if code != 1 || !strings.Contains(out, "use a postgres:// URL") || strings.Contains(out, "hunter2") {
		t.Fatalf("unsupported --store: exit %d, stdout %q", code, out)
	}
	// A PostgreSQL server that cannot be reached fails the start (exit 1), never serves.
	code, out, _ = runCLI(t, nil, "serve", "--data", dir, "--addr", "127.0.0.1:0", "--store", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2")
	if code != 1 || !strings.Contains(out, "open store") {
		t.Fatalf("unreachable postgres: exit %d, stdout %q", code, out)
	}
}

func TestAdminOrgCreate(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	if !s.hasLog("created platform API key") {
		t.Errorf("first start should log the platform key's creation: %v", s.logLines())
	}
	plat := platformKey(t, dir)

	code, out, errOut := runCLI(t, nil, "admin", "org", "create", "--name", "Acme", "--server", s.url, "--data", dir)
	if code != 0 {
		t.Fatalf("admin org create: exit %d, stderr %q", code, errOut)
	}
	var created map[string]any
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("admin org create printed %q: %v", out, err)
	}
	key := str(created, "api_key")
	if !strings.HasPrefix(key, "clr_org_") || !clearance.ValidID(str(created, "org_id")) || str(created, "name") != "Acme" {
		t.Fatalf("admin org create printed %s", out)
	}
	// The key works.
	led := mustCall(t, "GET", s.url+"/v1/protocol/audit/ledger", key, "", http.StatusOK)
	if head, _ := led.json["head"].(map[string]any); head["seq"] != 2.0 {
		t.Fatalf("new org's ledger: %s", led.raw)
	}

	// The platform key and server may come from the environment.
	code, out, errOut = runCLI(t, []string{"CLEARANCE_PLATFORM_KEY=" + plat, "CLEARANCE_SERVER=" + s.url},
		"admin", "org", "create", "--name", "Beta", "--data", t.TempDir())
	if code != 0 || !strings.Contains(out, `"api_key":"clr_org_`) {
		t.Fatalf("admin org create from env: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// Failures: no name (usage), a wrong key (the server's refusal), no key at all.
	if code, _, errOut := runCLI(t, nil, "admin", "org", "create", "--server", s.url, "--data", dir); code != 2 || !strings.Contains(errOut, "--name") {
		t.Fatalf("no --name: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, []string{"CLEARANCE_PLATFORM_KEY=clr_plat_wrong"}, "admin", "org", "create", "--name", "X", "--server", s.url)
	if code != 1 || !strings.Contains(errOut, "401") {
		t.Fatalf("wrong platform key: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCLI(t, []string{"CLEARANCE_PLATFORM_KEY="}, "admin", "org", "create", "--name", "X", "--server", s.url, "--data", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "platform key") {
		t.Fatalf("no platform key: exit %d, stderr %q", code, errOut)
	}
}

func TestGracefulShutdownOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	plat := platformKey(t, dir)
	org := mustCall(t, "POST", s.url+"/v1/platform/orgs", plat, `{"name":"Acme"}`, http.StatusCreated)
	key := str(org.json, "api_key")
	d := mustCall(t, "POST", s.url+"/v1/protocol/evaluate-decision", key, `{"amount":2500}`, http.StatusOK)

	if code := s.signal(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d (%v), stderr %s", code, s.waitErr, s.stderr.String())
	}
	if !s.hasLog("stopped") || !s.hasLog("shutting down: draining in-flight requests") {
		t.Fatalf("graceful shutdown should log draining and \"stopped\": %v", s.logLines())
	}
	if _, err := http.Get(s.url + "/v1/health"); err == nil {
		t.Fatal("the server still answers after it stopped")
	}

	// A restart on the same data dir keeps the key, the decision and the ledger.
	s2 := startServer(t, dir)
	if s2.hasLog("created platform API key") || platformKey(t, dir) != plat {
		t.Fatal("a restart must reuse the platform key")
	}
	r := mustCall(t, "GET", s2.url+"/v1/protocol/dossiers/"+str(d.json, "dossier_id"), key, "", http.StatusOK)
	if r.header.Get("X-Clearance-Dossier-Digest") != str(d.json, "dossier_digest") {
		t.Fatal("dossier digest changed across a restart")
	}
	v := mustCall(t, "GET", s2.url+"/v1/protocol/audit/ledger/verify", key, "", http.StatusOK)
	if v.json["valid"] != true || v.json["head_seq"] != 3.0 {
		t.Fatalf("verify after restart: %s", v.raw)
	}
	if code := s2.signal(os.Interrupt); code != 0 {
		t.Fatalf("SIGINT: exit %d", code)
	}
}

func TestKeysRotateKeepsThePreviousKey(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"keys", "rotate", "--data", dir}, &out, &errb); code == 0 {
		t.Fatalf("rotating without a key ring must fail: %s", out.String())
	}
	first, _, err := keyfile.LoadOrCreate(dir, "grant")
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(context.Background(), []string{"keys", "rotate", "--data", dir, "--drain", "10m"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		Active   string `json:"active_kid"`
		Previous []struct {
			KID string `json:"kid"`
		} `json:"previous"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got.Active == first.KID() || len(got.Previous) != 1 || got.Previous[0].KID != first.KID() {
		t.Fatalf("rotation output %+v, first kid %s", got, first.KID())
	}
	ring, err := keyfile.LoadRing(dir, "grant", time.Now())
	if err != nil || ring.Active().KID() != got.Active {
		t.Fatalf("ring on disk: %v %v", ring, err)
	}
}

// TestMemoryLimitDefault: serve limits the Go heap only when embedded
// Pebble's caches are on it, and never over GOMEMLIMIT.
func TestMemoryLimitDefault(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if n, ok := memoryLimit(getenv, true, true); !ok || n != pebblestore.DefaultCacheLimit+storeCacheHeadroom {
		t.Fatalf("caches on the Go heap: %d, %v", n, ok)
	}
	if _, ok := memoryLimit(getenv, true, false); ok {
		t.Fatal("a limit with the caches off the Go heap (cgo)")
	}
	if _, ok := memoryLimit(getenv, false, true); ok {
		t.Fatal("a limit on PostgreSQL")
	}
	env["GOMEMLIMIT"] = "2GiB"
	if _, ok := memoryLimit(getenv, true, true); ok {
		t.Fatal("GOMEMLIMIT set: serve still chose its own limit")
	}
}

// TestTrimMalloc: the real trim returns whether it gave pages back, and
// never fails (without cgo or glibc it does nothing).
func TestTrimMalloc(t *testing.T) {
	if trimMalloc() && !mallocTrims {
		t.Fatal("a build without the trim reported pages given back")
	}
}

// TestGCPercentDefault: serve raises the GC target unless GOGC is set.
func TestGCPercentDefault(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if p, ok := gcPercent(getenv); !ok || p != defaultGCPercent {
		t.Fatalf("without GOGC: %d, %v; want %d, true", p, ok, defaultGCPercent)
	}
	env["GOGC"] = "50"
	if _, ok := gcPercent(getenv); ok {
		t.Fatal("GOGC=50 set: serve still chose its own GC percent")
	}
}
