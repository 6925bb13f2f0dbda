package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// env is one Clearance HTTP server over a real Pebble store in a temp dir.
type env struct {
	t        testing.TB
	dbDir    string
	opts     server.Options
	store    *pebblestore.Store
	engine   *clearance.Engine
	srv      *httptest.Server
	client   *http.Client
	platform string // the platform key's secret
}

// newEnv starts a server with opts over a fresh store.
func newEnv(t testing.TB, opts server.Options) *env {
	t.Helper()
	e := &env{t: t, dbDir: filepath.Join(t.TempDir(), "db"), opts: opts}
	e.start()
	secret, err := e.engine.NewPlatformSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.engine.EnsurePlatformKey(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	e.platform = secret
	t.Cleanup(e.stop)
	return e
}

// start opens the store in e.dbDir and serves it.
func (e *env) start() {
	e.t.Helper()
	st, err := pebblestore.Open(e.dbDir, pebblestore.Options{Logger: quietLogger{}})
	if err != nil {
		e.t.Fatalf("open store: %v", err)
	}
	eng, err := clearance.Open(st, clearance.Options{})
	if err != nil {
		e.t.Fatalf("open engine: %v", err)
	}
	opts := e.opts
	opts.Registerer = nil // a fresh private registry per server
	e.store, e.engine = st, eng
	e.srv = httptest.NewServer(server.New(eng, opts))
	e.client = e.srv.Client()
}

// stop closes the server and the store (idempotent).
func (e *env) stop() {
	if e.srv != nil {
		e.srv.Close()
		e.srv = nil
	}
	if e.store != nil {
		if err := e.store.Close(); err != nil {
			e.t.Errorf("close store: %v", err)
		}
		e.store = nil
	}
}

// tamper stops the server, lets fn change the database directly through
// Pebble, and starts the server again on the same data.
func (e *env) tamper(fn func(db *pebble.DB)) {
	e.t.Helper()
	e.stop()
	db, err := pebble.Open(e.dbDir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		e.t.Fatalf("open pebble: %v", err)
	}
	fn(db)
	if err := db.Close(); err != nil {
		e.t.Fatalf("close pebble: %v", err)
	}
	e.start()
}

// result is one HTTP exchange.
type result struct {
	Status int
	Header http.Header
	Raw    []byte
	JSON   map[string]any // nil when the body is not a JSON object
	what   string         // "METHOD path", for messages
}

// do sends one request. body is nil (no body), a string or []byte (sent as
// is) or anything else (JSON-encoded). A JSON Content-Type is set when there
// is a body, unless headers name one; a header given as "" is removed.
// do must run on the test goroutine; other goroutines use send.
func (e *env) do(method, path, key string, body any, headers map[string]string) *result {
	e.t.Helper()
	r, err := e.send(method, path, key, body, headers)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// send is do for any goroutine: it reports transport failures as errors.
func (e *env) send(method, path, key string, body any, headers map[string]string) (*result, error) {
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		case []byte:
			rd = bytes.NewReader(b)
		default:
			raw, err := json.Marshal(b)
			if err != nil {
				return nil, err
			}
			rd = bytes.NewReader(raw)
		}
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	r := &result{Status: res.StatusCode, Header: res.Header, Raw: raw, what: method + " " + path}
	if len(raw) > 0 && raw[0] == '{' {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err == nil {
			r.JSON = m
		}
	}
	return r, nil
}

func (r *result) String() string {
	return fmt.Sprintf("%s -> %d %s", r.what, r.Status, bytes.TrimSpace(r.Raw))
}

// str returns the string at a dotted path of the JSON body ("" if absent).
func (r *result) str(path string) string {
	s, _ := lookup(r.JSON, path).(string)
	return s
}

// num returns the number at a dotted path of the JSON body (-1 if absent).
func (r *result) num(path string) float64 {
	f, ok := lookup(r.JSON, path).(float64)
	if !ok {
		return -1
	}
	return f
}

// lookup walks a dotted path ("a.b.0.c") through decoded JSON.
func lookup(v any, path string) any {
	if path == "" {
		return v
	}
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// strs returns the string list at a dotted path.
func (r *result) strs(path string) []string {
	list, _ := lookup(r.JSON, path).([]any)
	out := make([]string, 0, len(list))
	for _, v := range list {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}

// want fails the test unless the status is code.
func (r *result) want(t testing.TB, code int) *result {
	t.Helper()
	if r.Status != code {
		t.Fatalf("want %d: %s", code, r)
	}
	return r
}

// wantProblem fails unless r is an application/problem+json answer with the
// status and stable code, carrying the request id it was sent with.
func (r *result) wantProblem(t testing.TB, status int, code string) *result {
	t.Helper()
	if r.Status != status {
		t.Fatalf("want %d %s: %s", status, code, r)
	}
	checkProblemShape(t, r)
	if got := r.str("code"); got != code {
		t.Fatalf("want code %s: %s", code, r)
	}
	return r
}

func checkProblemShape(t testing.TB, r *result) {
	t.Helper()
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/problem+json" {
		t.Fatalf("problem Content-Type is %q: %s", r.Header.Get("Content-Type"), r)
	}
	if r.JSON == nil {
		t.Fatalf("problem body is not a JSON object: %s", r)
	}
	if int(r.num("status")) != r.Status || r.str("type") != "about:blank" || r.str("title") == "" {
		t.Fatalf("problem members status/type/title are off: %s", r)
	}
	rid := r.str("request_id")
	if rid == "" || rid != r.Header.Get(server.HeaderRequestID) {
		t.Fatalf("problem request_id %q, header %q", rid, r.Header.Get(server.HeaderRequestID))
	}
	if !validCode(r.str("code")) {
		t.Fatalf("problem code %q is not a stable UPPER_SNAKE code", r.str("code"))
	}
}

func validCode(c string) bool {
	if c == "" {
		return false
	}
	for _, r := range c {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// org is a created organization with its first (org:*) key.
type org struct {
	ID, Key, KeyID string
}

// createOrg creates an org through the platform route.
func (e *env) createOrg(name string) org {
	e.t.Helper()
	r := e.do("POST", "/v1/platform/orgs", e.platform, map[string]string{"name": name}, nil).want(e.t, http.StatusCreated)
	return org{ID: r.str("org_id"), Key: r.str("api_key"), KeyID: r.str("key_id")}
}

// createKey issues a key with scopes for o and returns its secret.
func (e *env) createKey(o org, scopes ...string) string {
	e.t.Helper()
	r := e.do("POST", "/v1/platform/orgs/"+o.ID+"/api-keys", e.platform, map[string]any{"scopes": scopes}, nil).
		want(e.t, http.StatusCreated)
	return r.str("api_key")
}

// decide posts body to evaluate-decision and expects 200.
func (e *env) decide(key, body string) *result {
	e.t.Helper()
	return e.do("POST", "/v1/protocol/evaluate-decision", key, body, nil).want(e.t, http.StatusOK)
}

// publish posts a bundle and returns the answer (not checked).
func (e *env) publish(key, bundle string) *result {
	e.t.Helper()
	return e.do("POST", "/v1/protocol/policies/bundles", key, bundle, nil)
}

// head returns the org's ledger head seq.
func (e *env) head(key string) uint64 {
	e.t.Helper()
	r := e.do("GET", "/v1/protocol/audit/ledger?limit=1", key, nil, nil).want(e.t, http.StatusOK)
	return uint64(r.num("head.seq"))
}

// verify returns the ledger verify report.
func (e *env) verify(key string) *result {
	e.t.Helper()
	return e.do("GET", "/v1/protocol/audit/ledger/verify", key, nil, nil).want(e.t, http.StatusOK)
}

// entries returns every ledger entry of the key's org.
func (e *env) entries(key string) []map[string]any {
	e.t.Helper()
	var out []map[string]any
	after := 0.0
	for {
		r := e.do("GET", fmt.Sprintf("/v1/protocol/audit/ledger?limit=1000&after_seq=%d", int64(after)), key, nil, nil).
			want(e.t, http.StatusOK)
		list, _ := r.JSON["entries"].([]any)
		for _, v := range list {
			out = append(out, v.(map[string]any))
		}
		next := r.num("next_after_seq")
		if next <= 0 {
			return out
		}
		after = next
	}
}

// sha256Digest is Clearance's digest notation of b.
func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Key layout of store/pebblestore (see its keys.go): o <uvarint len org> <org> <sub> ...
func orgKeyPrefix(orgID string, sub byte) []byte {
	k := []byte{'o'}
	k = binary.AppendUvarint(k, uint64(len(orgID)))
	k = append(k, orgID...)
	return append(k, sub)
}

func ledgerEntryKey(orgID string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(orgKeyPrefix(orgID, 'l'), seq)
}

func ledgerHeadKey(orgID string) []byte { return orgKeyPrefix(orgID, 'h') }

func dossierKey(orgID, dossierID string) []byte {
	return append(orgKeyPrefix(orgID, 'd'), dossierID...)
}

// pebbleGet returns a copy of the value at key.
func pebbleGet(t testing.TB, db *pebble.DB, key []byte) []byte {
	t.Helper()
	v, closer, err := db.Get(key)
	if err != nil {
		t.Fatalf("pebble get %q: %v", key, err)
	}
	out := append([]byte(nil), v...)
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func pebbleSet(t testing.TB, db *pebble.DB, key, value []byte) {
	t.Helper()
	if err := db.Set(key, value, pebble.Sync); err != nil {
		t.Fatalf("pebble set: %v", err)
	}
}

func pebbleDelete(t testing.TB, db *pebble.DB, key []byte) {
	t.Helper()
	if err := db.Delete(key, pebble.Sync); err != nil {
		t.Fatalf("pebble delete: %v", err)
	}
}

// editJSON decodes a JSON object value, lets fn change it and re-encodes it.
func editJSON(t testing.TB, v []byte, fn func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode stored value: %v", err)
	}
	fn(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// quietLogger drops Pebble's chatter; a fatal error panics.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// metricSum adds up the samples of metric name in a Prometheus text page
// whose labels include every pair of want.
func metricSum(page, name string, want map[string]string) float64 {
	var sum float64
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		if end < 0 {
			continue
		}
		labels := parseLabels(line[len(name)+1 : end])
		ok := true
		for k, v := range want {
			if labels[k] != v {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// parseLabels parses k="v",k2="v2" (values without escaped quotes).
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		eq := strings.Index(s, "=\"")
		if eq < 0 {
			break
		}
		k := s[:eq]
		rest := s[eq+2:]
		q := strings.Index(rest, "\"")
		if q < 0 {
			break
		}
		out[k] = rest[:q]
		s = strings.TrimPrefix(rest[q+1:], ",")
	}
	return out
}

// metrics returns the /metrics page.
func (e *env) metrics() string {
	e.t.Helper()
	r := e.do("GET", "/metrics", "", nil, nil).want(e.t, http.StatusOK)
	return string(r.Raw)
}

// dossierBodyOffset returns where the dossier body starts in a stored
// dossier value: <uvarint len(meta)> <meta JSON> <body>.
func dossierBodyOffset(t testing.TB, v []byte) int {
	t.Helper()
	n, w := binary.Uvarint(v)
	if w <= 0 || n > uint64(len(v)-w) {
		t.Fatalf("stored dossier value is not <uvarint> <meta> <body>: %q", v)
	}
	return w + int(n)
}
