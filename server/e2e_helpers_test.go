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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/store/pgstore/pgtest"

	"github.com/cockroachdb/pebble/v2"
	"github.com/jackc/pgx/v5"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/store/pgstore"
)

// env is one Clearance HTTP server over a real store: Pebble in a temp dir,
// or a fresh PostgreSQL schema (CLEARANCE_E2E_STORE, see openBackend).
type env struct {
	t        testing.TB
	dbDir    string // names the env's data on either backend (see openBackend)
	opts     server.Options
	store    store.Backend
	engine   *clearance.Engine
	server   *server.Server
	srv      *httptest.Server
	client   *http.Client
	platform string // the platform key's secret
	// engineOpts are the engine's options (zero: the defaults).
	engineOpts clearance.Options
}

// newEnv starts a server with opts over a fresh store.
func newEnv(t testing.TB, opts server.Options) *env {
	t.Helper()
	e := &env{t: t, dbDir: filepath.Join(t.TempDir(), "db"), opts: opts}
	e.start()
	secret, err := e.engine.Admin.NewPlatformSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.engine.Admin.EnsurePlatformKey(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	e.platform = secret
	t.Cleanup(e.stop)
	return e
}

// start opens the store of e.dbDir and serves it.
func (e *env) start() {
	e.t.Helper()
	st := openBackend(e.t, e.dbDir, nil)
	eng, err := clearance.Open(st, e.engineOpts)
	if err != nil {
		e.t.Fatalf("open engine: %v", err)
	}
	opts := e.opts
	opts.Registerer = nil // a fresh private registry per server
	e.store, e.engine = st, eng
	e.server = server.New(eng, opts)
	e.srv = httptest.NewServer(e.server)
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

// tamper stops the server, lets fn change the database behind the store's
// back (Pebble keys or PostgreSQL rows, see rawDB), and starts the server
// again on the same data.
func (e *env) tamper(fn func(db rawDB)) {
	e.t.Helper()
	e.stop()
	withRawDB(e.t, e.dbDir, fn)
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

// ---------------------------------------------------------------------------
// Backends: CLEARANCE_E2E_STORE=pebble (default) or postgres

// e2eStoreEnv picks the backend every env of the suite runs on.
const e2eStoreEnv = "CLEARANCE_E2E_STORE"

const (
	backendPebble   = "pebble"
	backendPostgres = "postgres"
)

// e2eBackend returns the backend the suite runs on; an unknown value fails.
func e2eBackend(t testing.TB) string {
	t.Helper()
	switch v := os.Getenv(e2eStoreEnv); v {
	case "", backendPebble:
		return backendPebble
	case backendPostgres:
		return backendPostgres
	default:
		t.Fatalf("%s=%q: want %q or %q", e2eStoreEnv, v, backendPebble, backendPostgres)
		return ""
	}
}

// onPostgres reports whether the suite runs on PostgreSQL.
func onPostgres(t testing.TB) bool {
	t.Helper()
	return e2eBackend(t) == backendPostgres
}

// byBackend returns onPebble or onPG, whichever matches the suite's
// backend: for the few answers that depend on how a backend lays out its
// records (see rawDB).
func byBackend(t testing.TB, onPebble, onPG string) string {
	t.Helper()
	if onPostgres(t) {
		return onPG
	}
	return onPebble
}

// openBackend opens the store of dir with clock (nil: the backend's own
// clock — time.Now for Pebble, the database clock for PostgreSQL). dir names
// an env's data on both backends: the Pebble directory, or the key under
// which the env's PostgreSQL schema is remembered. The first open of a dir
// on PostgreSQL creates a fresh schema with a random name, dropped when t
// ends (after the env's cleanup has closed its store); every later open of
// the same dir — a restart, a reopen, another env pointed at the same dir —
// uses that schema and sees the same data. The caller closes the store.
func openBackend(t testing.TB, dir string, clock func() time.Time) store.Backend {
	t.Helper()
	if !onPostgres(t) {
		st, err := pebblestore.Open(dir, pebblestore.Options{Logger: quietLogger{}, Now: clock})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		return st
	}
	schema := pgSchemaOf(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, pgtest.URL(), pgstore.Options{Schema: schema, Now: clock, MaxConns: pgMaxConns})
	if err != nil {
		t.Fatalf("open store (schema %s): %v", schema, err)
	}
	return st
}

// pgMaxConns caps each store's pool: tests run in parallel, each with its
// own stores, under the server's max_connections.
const pgMaxConns = 4

// pgSchemas maps an env's data dir to its PostgreSQL schema, so a
// restarted store sees the same data.
var pgSchemas sync.Map // dir -> schema name

// pgSchemaOf returns the schema of dir, creating it on first use; it is
// dropped when t ends (registered before the env's own cleanup, so it runs
// after the env has closed its store).
func pgSchemaOf(t testing.TB, dir string) string {
	t.Helper()
	if v, ok := pgSchemas.Load(dir); ok {
		return v.(string)
	}
	t.Cleanup(func() { pgSchemas.Delete(dir) })
	name := pgtest.NewSchema(t, "server_e2e_")
	pgSchemas.Store(dir, name)
	return name
}

// rawDB edits a stopped env's database behind the store's back, the same
// edit on either backend: Pebble keys (store/pebblestore's key layout) or
// rows of the env's PostgreSQL schema (store/pgstore/migrations). Failures
// fail the test.
//
// Where the backends store a record differently, so does an edit: Pebble
// keeps a ledger entry's seq and org_id inside its JSON value, PostgreSQL
// only in the row's key columns (org_id, seq), which is what it reads back.
// An entry written at (org, seq) on PostgreSQL therefore always reads as
// that org's entry at that seq, whatever en.OrgID and en.Seq say.
type rawDB interface {
	entry(orgID string, seq uint64) ledger.Entry
	putEntry(orgID string, seq uint64, en ledger.Entry)
	deleteEntry(orgID string, seq uint64)
	putHead(orgID string, h ledger.Head)
	// dossierBody is the stored canonical JSON of a dossier.
	dossierBody(orgID, dossierID string) []byte
	putDossierBody(orgID, dossierID string, body []byte)
	deleteDossier(orgID, dossierID string)
	deleteScopeClaim(orgID, scope string)
	// corruptEntry and corruptDossier overwrite the stored bytes with
	// garbage (on PostgreSQL, whose columns are typed, garbage text in the
	// hashed columns).
	corruptEntry(orgID string, seq uint64)
	corruptDossier(orgID, dossierID string)
}

// withRawDB runs fn on the database of dir, whose store must be closed, and
// commits fn's edits.
func withRawDB(t testing.TB, dir string, fn func(db rawDB)) {
	t.Helper()
	if !onPostgres(t) {
		db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
		if err != nil {
			t.Fatalf("open pebble: %v", err)
		}
		fn(pebbleRaw{t, db})
		if err := db.Close(); err != nil {
			t.Fatalf("close pebble: %v", err)
		}
		return
	}
	schema := pgSchemaOf(t, dir)
	ctx := context.Background()
	tx, err := pgtest.Admin(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	fn(pgRaw{t, tx})
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit tampering: %v", err)
	}
}

// pebbleRaw is rawDB on Pebble.
type pebbleRaw struct {
	t  testing.TB
	db *pebble.DB
}

func (r pebbleRaw) entry(orgID string, seq uint64) ledger.Entry {
	r.t.Helper()
	var en ledger.Entry
	if err := json.Unmarshal(pebbleGet(r.t, r.db, ledgerEntryKey(orgID, seq)), &en); err != nil {
		r.t.Fatalf("decode entry %d: %v", seq, err)
	}
	return en
}

func (r pebbleRaw) putEntry(orgID string, seq uint64, en ledger.Entry) {
	r.t.Helper()
	pebbleSet(r.t, r.db, ledgerEntryKey(orgID, seq), []byte(mustJSON(r.t, en)))
}

func (r pebbleRaw) deleteEntry(orgID string, seq uint64) {
	r.t.Helper()
	pebbleDelete(r.t, r.db, ledgerEntryKey(orgID, seq))
}

func (r pebbleRaw) putHead(orgID string, h ledger.Head) {
	r.t.Helper()
	pebbleSet(r.t, r.db, ledgerHeadKey(orgID), []byte(mustJSON(r.t, h)))
}

func (r pebbleRaw) dossierBody(orgID, dossierID string) []byte {
	r.t.Helper()
	v := pebbleGet(r.t, r.db, dossierKey(orgID, dossierID))
	return v[dossierBodyOffset(r.t, v):] // past the stored index metadata
}

func (r pebbleRaw) putDossierBody(orgID, dossierID string, body []byte) {
	r.t.Helper()
	k := dossierKey(orgID, dossierID)
	v := pebbleGet(r.t, r.db, k)
	v = append(v[:dossierBodyOffset(r.t, v)], body...)
	pebbleSet(r.t, r.db, k, v)
}

func (r pebbleRaw) deleteDossier(orgID, dossierID string) {
	r.t.Helper()
	pebbleDelete(r.t, r.db, dossierKey(orgID, dossierID))
}

func (r pebbleRaw) corruptEntry(orgID string, seq uint64) {
	r.t.Helper()
	pebbleSet(r.t, r.db, ledgerEntryKey(orgID, seq), []byte("\xff\x00 not an entry"))
}

func (r pebbleRaw) corruptDossier(orgID, dossierID string) {
	r.t.Helper()
	pebbleSet(r.t, r.db, dossierKey(orgID, dossierID), []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"))
}

func (r pebbleRaw) deleteScopeClaim(orgID, scope string) {
	r.t.Helper()
	pebbleDelete(r.t, r.db, append(orgKeyPrefix(orgID, 'c'), scope...))
}

// pgRaw is rawDB on PostgreSQL: one transaction whose search_path is the
// env's schema.
type pgRaw struct {
	t  testing.TB
	tx pgx.Tx
}

// exec runs one statement that must change exactly one row.
func (r pgRaw) exec(sql string, args ...any) {
	r.t.Helper()
	tag, err := r.tx.Exec(context.Background(), sql, args...)
	if err != nil {
		r.t.Fatalf("%s: %v", sql, err)
	}
	if tag.RowsAffected() != 1 {
		r.t.Fatalf("%s %v: %d rows changed, want 1", sql, args, tag.RowsAffected())
	}
}

func (r pgRaw) entry(orgID string, seq uint64) ledger.Entry {
	r.t.Helper()
	en := ledger.Entry{OrgID: orgID, Seq: seq}
	err := r.tx.QueryRow(context.Background(), `
		SELECT kind, subject_id, payload_digest, recorded_at, prev_entry_hash, entry_hash
		FROM ledger_entries WHERE org_id = $1 AND seq = $2`, orgID, int64(seq)).
		Scan(&en.Kind, &en.SubjectID, &en.PayloadDigest, &en.RecordedAt, &en.PrevEntryHash, &en.EntryHash)
	if err != nil {
		r.t.Fatalf("read entry %d of %s: %v", seq, orgID, err)
	}
	return en
}

func (r pgRaw) putEntry(orgID string, seq uint64, en ledger.Entry) {
	r.t.Helper()
	r.exec(`UPDATE ledger_entries SET kind = $3, subject_id = $4, payload_digest = $5, recorded_at = $6,
		prev_entry_hash = $7, entry_hash = $8 WHERE org_id = $1 AND seq = $2`,
		orgID, int64(seq), en.Kind, en.SubjectID, en.PayloadDigest, en.RecordedAt, en.PrevEntryHash, en.EntryHash)
}

func (r pgRaw) deleteEntry(orgID string, seq uint64) {
	r.t.Helper()
	r.exec(`DELETE FROM ledger_entries WHERE org_id = $1 AND seq = $2`, orgID, int64(seq))
}

func (r pgRaw) putHead(orgID string, h ledger.Head) {
	r.t.Helper()
	r.exec(`UPDATE ledger_heads SET seq = $2, entry_hash = $3 WHERE org_id = $1`, orgID, int64(h.Seq), h.EntryHash)
}

func (r pgRaw) dossierBody(orgID, dossierID string) []byte {
	r.t.Helper()
	var body []byte
	err := r.tx.QueryRow(context.Background(), `SELECT body FROM dossiers WHERE org_id = $1 AND dossier_id = $2`, orgID, dossierID).
		Scan(&body)
	if err != nil {
		r.t.Fatalf("read dossier %s of %s: %v", dossierID, orgID, err)
	}
	return body
}

func (r pgRaw) putDossierBody(orgID, dossierID string, body []byte) {
	r.t.Helper()
	r.exec(`UPDATE dossiers SET body = $3 WHERE org_id = $1 AND dossier_id = $2`, orgID, dossierID, body)
}

func (r pgRaw) deleteDossier(orgID, dossierID string) {
	r.t.Helper()
	r.exec(`DELETE FROM dossiers WHERE org_id = $1 AND dossier_id = $2`, orgID, dossierID)
}

func (r pgRaw) corruptEntry(orgID string, seq uint64) {
	r.t.Helper()
	r.exec(`UPDATE ledger_entries SET recorded_at = 'not a time', entry_hash = 'garbage' WHERE org_id = $1 AND seq = $2`, orgID, int64(seq))
}

func (r pgRaw) corruptDossier(orgID, dossierID string) {
	r.t.Helper()
	r.exec(`UPDATE dossiers SET body = '\xff00'::bytea WHERE org_id = $1 AND dossier_id = $2`, orgID, dossierID)
}

func (r pgRaw) deleteScopeClaim(orgID, scope string) {
	r.t.Helper()
	r.exec(`DELETE FROM scope_claims WHERE org_id = $1 AND scope = $2`, orgID, scope)
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

// metrics returns the /metrics page, read with the platform key.
func (e *env) metrics() string {
	e.t.Helper()
	r := e.do("GET", "/metrics", e.platform, nil, nil).want(e.t, http.StatusOK)
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
