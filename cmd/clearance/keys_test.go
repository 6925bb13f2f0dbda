package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/store/pgstore"
	"github.com/clearancehq/clearance/store/pgstore/pgtest"
)

// keysOutput is what `clearance keys rotate|revoke` print.
type keysOutput struct {
	File     string `json:"file"`
	Active   string `json:"active_kid"`
	Previous []struct {
		KID       string `json:"kid"`
		KeepUntil string `json:"keep_until"`
	} `json:"previous"`
	Revoked []struct {
		KID       string `json:"kid"`
		RevokedAt string `json:"revoked_at"`
	} `json:"revoked"`
}

// runKeys runs `clearance keys args…` in process and decodes its output.
func runKeys(t *testing.T, args ...string) keysOutput {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), append([]string{"keys"}, args...), &out, &errb); code != 0 {
		t.Fatalf("keys %v: exit %d: %s", args, code, errb.String())
	}
	var got keysOutput
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("keys %v: %v: %s", args, err, out.String())
	}
	return got
}

func TestKeysInitCreatesKeyFilesAndRefusesToOverwrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc")
	grantFile, ledgerFile := filepath.Join(dir, "grant.json"), filepath.Join(dir, "ledger.json")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"keys", "init"}, &out, &errb); code != 2 {
		t.Fatalf("keys init without a file: exit %d, want 2", code)
	}
	out.Reset()
	if code := run(context.Background(), []string{"keys", "init", "--grant-key-file", grantFile, "--ledger-key-file", ledgerFile}, &out, &errb); code != 0 {
		t.Fatalf("keys init: exit %d: %s", code, errb.String())
	}
	var got struct {
		Created []struct {
			Key  string `json:"key"`
			File string `json:"file"`
			KID  string `json:"kid"`
		} `json:"created"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got.Created) != 2 {
		t.Fatalf("keys init output %s (%v)", out.String(), err)
	}
	for i, want := range []struct{ key, file string }{{"grant", grantFile}, {"ledger", ledgerFile}} {
		c := got.Created[i]
		ring, err := keyfile.ReadRing(want.file)
		if err != nil {
			t.Fatal(err)
		}
		if c.Key != want.key || c.File != want.file || c.KID != ring.Active().KID() {
			t.Fatalf("created[%d] = %+v, file holds %s", i, c, ring.Active().KID())
		}
		if fi, err := os.Stat(want.file); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600) {
			t.Fatalf("%s: %v, mode %v", want.file, err, fi.Mode().Perm())
		}
	}
	if got.Created[0].KID == got.Created[1].KID {
		t.Fatal("the grant and the ledger key are the same key")
	}

	// Never over an existing file, and nothing half done: the ledger file
	// that does not exist yet is not created either.
	before, _ := os.ReadFile(grantFile)
	other := filepath.Join(dir, "other-ledger.json")
	errb.Reset()
	if code := run(context.Background(), []string{"keys", "init", "--ledger-key-file", other, "--grant-key-file", grantFile}, &out, &errb); code != 1 {
		t.Fatalf("keys init over an existing file: exit %d, want 1", code)
	}
	if !bytes.Contains(errb.Bytes(), []byte("exists")) {
		t.Fatalf("the refusal does not say the file exists: %s", errb.String())
	}
	if after, _ := os.ReadFile(grantFile); !bytes.Equal(before, after) {
		t.Fatal("keys init changed an existing key file")
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("keys init created %s although it refused: %v", other, err)
	}
}

// keys rotate and keys revoke work on a key file as on the data dir, and
// revoking the active key makes a fresh key active.
func TestKeysRotateAndRevokeAKeyFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "grant.json")
	first, err := keyfile.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	rot := runKeys(t, "rotate", "--grant-key-file", file, "--drain", "10m")
	if rot.File != file || rot.Active == first.KID() || len(rot.Previous) != 1 || rot.Previous[0].KID != first.KID() || len(rot.Revoked) != 0 {
		t.Fatalf("rotate: %+v", rot)
	}
	rev := runKeys(t, "revoke", "--grant-key-file", file, "--kid", first.KID())
	if rev.Active != rot.Active || len(rev.Previous) != 0 || len(rev.Revoked) != 1 || rev.Revoked[0].KID != first.KID() {
		t.Fatalf("revoke a previous key: %+v", rev)
	}
	leaked := runKeys(t, "revoke", "--grant-key-file", file, "--kid", rot.Active)
	if leaked.Active == rot.Active || leaked.Active == first.KID() || len(leaked.Revoked) != 2 || len(leaked.Previous) != 0 {
		t.Fatalf("revoke the active key: %+v", leaked)
	}
	ring, err := keyfile.ReadRing(file)
	if err != nil || ring.Active().KID() != leaked.Active {
		t.Fatalf("ring on disk: %v", err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"keys", "revoke", "--grant-key-file", file, "--kid", "nope"}, &out, &errb); code != 1 {
		t.Fatalf("revoking an unknown kid: exit %d, want 1", code)
	}
	if code := run(context.Background(), []string{"keys", "revoke", "--grant-key-file", file}, &out, &errb); code != 2 {
		t.Fatalf("revoke without --kid: exit %d, want 2", code)
	}

	// The data dir ring too.
	dir := t.TempDir()
	dk, _, err := keyfile.LoadOrCreate(dir, "grant")
	if err != nil {
		t.Fatal(err)
	}
	if got := runKeys(t, "revoke", "--data", dir, "--kid", dk.KID()); got.Active == dk.KID() || len(got.Revoked) != 1 {
		t.Fatalf("revoke in the data dir: %+v", got)
	}
}

// healthKeys returns the kids /v1/health reports.
func healthKeys(t *testing.T, c mpClient) map[string]any {
	t.Helper()
	r := c.want(t, "GET", "/v1/health", nil, http.StatusOK)
	keys, _ := r.json["keys"].(map[string]any)
	return keys
}

// jwksOf returns the kids a server's JWKS lists.
func jwksOf(t *testing.T, c mpClient) []string {
	t.Helper()
	r := c.want(t, "GET", "/.well-known/clearance-execution-grant-jwks.json", nil, http.StatusOK)
	var set struct {
		Keys []struct {
			KID string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(r.raw, &set); err != nil {
		t.Fatalf("server %s JWKS: %v: %s", c.name, err, r.raw)
	}
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k.KID)
	}
	return kids
}

// awaitJWKS polls each server's JWKS until it lists exactly want: the
// reload is observed, not waited for.
func awaitJWKS(t *testing.T, want []string, servers ...mpClient) {
	t.Helper()
	for _, s := range servers {
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := jwksOf(t, s)
			if slices.Equal(got, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("server %s JWKS %v, want %v", s.name, got, want)
			}
			<-time.After(20 * time.Millisecond) // poll interval
		}
	}
}

// awaitLog polls p's log for a line with msg, after the first n lines.
func awaitLog(t *testing.T, p *proc, n int, msg string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lines := p.logLines()
		for _, m := range lines[min(n, len(lines)):] {
			if m["msg"] == msg {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log: %v", msg, lines[min(n, len(lines)):])
		}
		<-time.After(20 * time.Millisecond) // poll interval
	}
}

// A running server follows its grant key file: it picks up a rotation and
// a revocation without a restart, keeps its keys when the file turns
// unreadable, and reloads on SIGHUP.
func TestServeReloadsTheGrantKeyFile(t *testing.T) {
	keysDir := t.TempDir()
	grantFile := filepath.Join(keysDir, "grant.json")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"keys", "init", "--grant-key-file", grantFile}, &out, &errb); code != 0 {
		t.Fatalf("keys init: %s", errb.String())
	}
	first, err := keyfile.ReadRing(grantFile)
	if err != nil {
		t.Fatal(err)
	}
	kidA := first.Active().KID()
	dataDir := t.TempDir()
	p := startServer(t, dataDir, "--grant-key-file", grantFile, "--rate-limit", "-1")
	httpc := &http.Client{Timeout: 30 * time.Second}
	defer httpc.CloseIdleConnections()
	plat := mpClient{name: "A", url: p.url, key: platformKey(t, dataDir), httpc: httpc}
	org := plat.want(t, "POST", "/v1/platform/orgs", `{"name":"Reload"}`, http.StatusCreated)
	orgID := str(org.json, "org_id")
	c := mpClient{name: "A", url: p.url, key: str(org.json, "api_key"), httpc: httpc}
	agent, err := grant.NewKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c.want(t, "POST", "/v1/execution/agent-keys", map[string]any{"kid": agent.KID(), "public_jwk": agent.PublicJWK()}, http.StatusCreated)
	c.want(t, "POST", "/v1/protocol/policies/bundles", mpBundle, http.StatusCreated)
	if got := healthKeys(t, c)["grant"]; got != kidA {
		t.Fatalf("health grant kid %v, want %s", got, kidA)
	}
	tokA, hashA := mpBind(t, c, mpIntent(t, agent, orgID, 1))

	// Rotate: the new key signs, the old one still verifies.
	rot := runKeys(t, "rotate", "--grant-key-file", grantFile)
	awaitJWKS(t, []string{rot.Active, kidA}, c)
	if got := healthKeys(t, c)["grant"]; got != rot.Active {
		t.Fatalf("health grant kid after rotation %v, want %s", got, rot.Active)
	}
	if m := awaitLog(t, p, 0, "grant keys reloaded"); m["active_kid"] != rot.Active {
		t.Fatalf("reload log %v", m)
	}
	tokB, hashB := mpBind(t, c, mpIntent(t, agent, orgID, 2))
	if kidOf(t, tokB) != rot.Active {
		t.Fatalf("grant after rotation signed by %s, want %s", kidOf(t, tokB), rot.Active)
	}
	c.want(t, "POST", "/v1/execution/verify-token", map[string]any{"execution_token": tokA, "intent_hash": hashA}, http.StatusOK)

	// A file that cannot be read is reported and the keys in use are kept.
	good, err := os.ReadFile(grantFile)
	if err != nil {
		t.Fatal(err)
	}
	n := len(p.logLines())
	replaceFile(t, grantFile, []byte(`{"version":1,"active":`))
	if m := awaitLog(t, p, n, "grant key file unreadable: keeping the keys in use"); m["level"] != "ERROR" || m["active_kid"] != rot.Active {
		t.Fatalf("unreadable-file log %v", m)
	}
	if got := jwksOf(t, c); !slices.Equal(got, []string{rot.Active, kidA}) {
		t.Fatalf("JWKS after a bad file %v", got)
	}
	c.want(t, "POST", "/v1/execution/verify-token", map[string]any{"execution_token": tokB, "intent_hash": hashB}, http.StatusOK)
	n = len(p.logLines())
	replaceFile(t, grantFile, good)
	awaitLog(t, p, n, "grant key file readable again")

	// A revoked: its grants are refused at once, though A still drains.
	runKeys(t, "revoke", "--grant-key-file", grantFile, "--kid", kidA)
	awaitJWKS(t, []string{rot.Active}, c)
	if r := c.want(t, "POST", "/v1/execution/verify-token", map[string]any{"execution_token": tokA, "intent_hash": hashA}, http.StatusConflict); str(r.json, "code") != "GRANT_INVALID" {
		t.Fatalf("verify a grant of the revoked key: %s", r.raw)
	}
	if r := c.want(t, "POST", "/v1/execution/claim-token", map[string]any{"execution_token": tokA, "intent_hash": hashA}, http.StatusConflict); r.json["should_execute"] != false {
		t.Fatalf("claim a grant of the revoked key: %s", r.raw)
	}

	// SIGHUP rereads the file at once and says so; the server keeps running.
	n = len(p.logLines())
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if m := awaitLog(t, p, n, "grant keys unchanged"); m["active_kid"] != rot.Active {
		t.Fatalf("SIGHUP log %v", m)
	}
	c.want(t, "POST", "/v1/execution/verify-token", map[string]any{"execution_token": tokB, "intent_hash": hashB}, http.StatusOK)
	if code := p.signal(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d: %s", code, p.stderr.String())
	}
}

// replaceFile puts data at path (0600) in one rename, as an operator's
// deployment tool would.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// kidOf returns the kid in a compact JWS's protected header.
func kidOf(t *testing.T, token string) string {
	t.Helper()
	head, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	var h struct {
		KID string `json:"kid"`
	}
	if err != nil || json.Unmarshal(raw, &h) != nil {
		t.Fatalf("not a compact JWS: %q", token)
	}
	return h.KID
}

// With key files, serve creates no grant or ledger key in the data dir,
// logs no creation of one, and /v1/health reports the kids of the keys it
// uses; without, it creates and reports the data dir's.
func TestServeUsesOnlyTheKeyFilesItIsGiven(t *testing.T) {
	keysDir := t.TempDir()
	grantFile, ledgerFile := filepath.Join(keysDir, "grant.json"), filepath.Join(keysDir, "ledger.json")
	gk, err := keyfile.Create(grantFile)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := keyfile.Create(ledgerFile)
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	p := startServer(t, dataDir, "--grant-key-file", grantFile, "--ledger-key-file", ledgerFile)
	c := mpClient{name: "A", url: p.url, httpc: &http.Client{Timeout: 30 * time.Second}}
	if keys := healthKeys(t, c); keys["grant"] != gk.KID() || keys["ledger"] != lk.KID() || keys["reporting"] != nil {
		t.Fatalf("health keys %v, want grant %s and ledger %s and no reporting key", keys, gk.KID(), lk.KID())
	}
	for _, name := range []string{"grant", "ledger"} {
		path, _ := keyfile.RingPath(dataDir, name)
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("serve created %s although a key file was given (%v)", path, err)
		}
	}
	for _, m := range p.logLines() {
		if m["msg"] == "created signing key" && m["key"] != "producer" {
			t.Errorf("logged the creation of a key it does not use: %v", m)
		}
	}
	if code := p.signal(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}

	// Without files the data dir's keys are created, logged and reported.
	plain := t.TempDir()
	q := startServer(t, plain)
	keys := healthKeys(t, mpClient{name: "B", url: q.url, httpc: &http.Client{Timeout: 30 * time.Second}})
	for _, name := range []string{"grant", "ledger"} {
		k, created, err := keyfile.LoadOrCreate(plain, name)
		if err != nil || created {
			t.Fatalf("%s key in the data dir: created now %v, %v", name, created, err)
		}
		if keys[name] != k.KID() {
			t.Errorf("health %s kid %v, want %s", name, keys[name], k.KID())
		}
		logged := false
		for _, m := range q.logLines() {
			logged = logged || (m["msg"] == "created signing key" && m["key"] == name && m["kid"] == k.KID())
		}
		if !logged {
			t.Errorf("no creation logged for the %s key", name)
		}
	}
	if code := q.signal(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

// TestServeSignsReportsWithTheReportingKeyFile: keys init makes the
// reporting key, serve reports it in health and publishes it, and only it.
func TestServeSignsReportsWithTheReportingKeyFile(t *testing.T) {
	dir := t.TempDir()
	file, grantFile := filepath.Join(dir, "reporting.json"), filepath.Join(dir, "grant.json")
	if _, err := keyfile.Create(grantFile); err != nil {
		t.Fatal(err)
	}
	// A deployment's environment names its grant key file, which exists:
	// init of the reporting key alone leaves it be.
	t.Setenv("CLEARANCE_GRANT_KEY_FILE", grantFile)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"keys", "init", "--reporting-key-file", file}, &out, &errb); code != 0 {
		t.Fatalf("keys init: exit %d: %s", code, errb.String())
	}
	// The grant key is no reporting key.
	refused, err := exec.Command(binary(t), "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(),
		"--grant-key-file", grantFile, "--reporting-key-file", grantFile).CombinedOutput()
	if err == nil || !strings.Contains(string(refused), "reporting key") {
		t.Fatalf("serve with the grant key as the reporting key: %v\n%s", err, refused)
	}
	rk, err := keyfile.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := startServer(t, t.TempDir(), "--reporting-key-file", file)
	c := mpClient{name: "A", url: p.url, httpc: &http.Client{Timeout: 30 * time.Second}}
	if keys := healthKeys(t, c); keys["reporting"] != rk.KID() {
		t.Fatalf("health keys %v, want reporting %s", keys, rk.KID())
	}
	res, err := c.httpc.Get(p.url + "/.well-known/clearance-reporting-jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []struct {
			KID string `json:"kid"`
			X   string `json:"x"`
		} `json:"keys"`
	}
	err = json.NewDecoder(res.Body).Decode(&set)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK || len(set.Keys) != 1 || set.Keys[0].KID != rk.KID() ||
		set.Keys[0].X != base64.RawURLEncoding.EncodeToString(rk.Public()) {
		t.Fatalf("reporting JWKS: %d %+v %v", res.StatusCode, set, err)
	}
	if code := p.signal(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

// keys revoke --store refuses what it cannot do before writing anything: an
// embedded store, a kid the named file does not hold; with --store alone it
// writes only the database, and revoking twice keeps the first record.
func TestKeysRevokeInTheStore(t *testing.T) {
	grantFile := filepath.Join(t.TempDir(), "grant.json")
	active, err := keyfile.Create(grantFile)
	if err != nil {
		t.Fatal(err)
	}
	kid := active.KID()
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"keys", "revoke", "--kid", kid, "--store", "pebble:/tmp/x", "--grant-key-file", grantFile}, &out, &errb); code != 2 {
		t.Fatalf("revoke with a non-PostgreSQL store: exit %d, want 2: %s", code, errb.String())
	}
	pgtest.Admin(t)
	storeURL := pgtest.SchemaURL(t, pgtest.NewSchema(t, "clearance_keysrevoke_"))
	st, err := pgstore.Open(t.Context(), storeURL, pgstore.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	revoked := func() []string {
		t.Helper()
		list, err := st.RevokedGrantKeys(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var kids []string
		for _, r := range list {
			kids = append(kids, r.KID)
		}
		return kids
	}
	errb.Reset()
	if code := run(t.Context(), []string{"keys", "revoke", "--kid", "not-in-the-file", "--store", storeURL, "--grant-key-file", grantFile}, &out, &errb); code != 1 {
		t.Fatalf("revoke of a kid the file does not hold: exit %d, want 1: %s", code, errb.String())
	}
	if got := revoked(); len(got) != 0 {
		t.Fatalf("a refused revoke wrote %v to the database", got)
	}
	before, err := os.ReadFile(grantFile)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(t.Context(), []string{"keys", "revoke", "--kid", "some-retired-kid", "--store", storeURL}, &out, &errb); code != 0 {
		t.Fatalf("revoke in the database only: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), `"revoked_kid":"some-retired-kid"`) {
		t.Fatalf("output %s", out.String())
	}
	if after, _ := os.ReadFile(grantFile); !bytes.Equal(after, before) {
		t.Fatal("a database-only revoke changed the key file")
	}
	got := runKeys(t, "revoke", "--kid", kid, "--store", storeURL, "--grant-key-file", grantFile)
	if got.Active == kid || len(got.Revoked) != 1 || got.Revoked[0].KID != kid {
		t.Fatalf("revoke of the active key in file and database: %+v", got)
	}
	if kids := revoked(); !slices.Equal(kids, []string{kid, "some-retired-kid"}) && !slices.Equal(kids, []string{"some-retired-kid", kid}) {
		t.Fatalf("database revocations %v", kids)
	}
}
