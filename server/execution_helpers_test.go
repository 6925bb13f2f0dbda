package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/server"
)

// Execution routes under test.
const (
	pathBind        = "/v1/authority/enforce-and-bind"
	pathVerifyToken = "/v1/execution/verify-token"
	pathClaim       = "/v1/execution/claim-token"
	pathConsume     = "/v1/execution/consume-token"
	pathFinalize    = "/v1/execution/finalize-token"
	pathJWKS        = "/.well-known/clearance-execution-grant-jwks.json"
	pathAgentKeys   = "/v1/execution/agent-keys"
	pathProvKeys    = "/v1/execution/provider-keys"
	pathReconcile   = "/v1/execution/reconciliations"

	pipelineUA = "agent-safe-pipeline/0.2.0"
)

// execStart is the moment every execution env's clock starts at.
var execStart = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// bandsBundle is an ENFORCEMENT bundle whose answer depends on the amount:
// below 1,000 ALLOW, from 1,000 ESCALATE, from 5,000 REVIEW_REQUIRED, from
// 10,000 BLOCK (the most restrictive matching rule wins).
const bandsBundle = `{"bundle_id":"exec","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"esc","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"ESCALATE","reason_codes":["MID"]},
 {"id":"rev","match":[{"field":"amount","op":"ge","value":5000}],"outcome":"REVIEW_REQUIRED","reason_codes":["HIGH"]},
 {"id":"blk","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// stricterBundle escalates everything: a grant bound under bandsBundle is
// stale once it is active.
const stricterBundle = `{"bundle_id":"exec","version":"v2","mode":"ENFORCEMENT","rules":[],
 "default":{"outcome":"ESCALATE","reason_codes":["HOLD"]}}`

// execEnv is a Clearance HTTP server with grant signing over a real store
// (Pebble or PostgreSQL, see openBackend), with one clock (which the test
// moves) for the engine, the store and the server, an org with a registered
// agent and provider key, and the org's policy bundle. It reuses env's
// request helpers; newEnv is untouched.
type execEnv struct {
	*env
	now      *atomic.Int64 // unix nanos
	ring     *grant.KeyRing
	o        org
	agent    grant.Key
	provider grant.Key
	seq      atomic.Int64
	tr       *http.Transport
	// approvals names the approval services (nil: none), set by the setup
	// of newExecEnvWith.
	approvals approval.Directory
	// tune adjusts the engine's options before it opens (nil: none), set
	// by the setup of newExecEnvWith.
	tune func(o *clearance.Options)
	// secretsKey seals the secrets the engine keeps (nil: none), set by
	// the setup of newExecEnvWith.
	secretsKey []byte
	// engineClock, storeClock and dbClock separate the engine's clock from
	// the store's (clock_e2e_test.go), set by the setup of newExecEnvWith:
	// engineClock is the engine's (nil: now); storeClock the store's (nil:
	// the engine's); dbClock gives the store its own clock instead
	// (PostgreSQL's database clock, Pebble's time.Now).
	engineClock func() time.Time
	storeClock  func() time.Time
	dbClock     bool
}

// testSeed is a deterministic 32-byte Ed25519 seed.
func testSeed(b byte) []byte {
	s := make([]byte, 32)
	s[0], s[31] = b, 0x5a
	return s
}

func mustKey(t testing.TB, b byte) grant.Key {
	t.Helper()
	k, err := grant.KeyFromSeed(testSeed(b))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newExecEnv starts a signing server (ring of one key) with an org whose
// bundle is bundle ("" keeps the starter policy, SHADOW).
func newExecEnv(t testing.TB, bundle string) *execEnv {
	t.Helper()
	return newExecEnvWith(t, bundle, nil)
}

// newExecEnvWith is newExecEnv with setup applied before the server opens.
func newExecEnvWith(t testing.TB, bundle string, setup func(x *execEnv)) *execEnv {
	t.Helper()
	x := &execEnv{now: &atomic.Int64{}}
	x.now.Store(execStart.UnixNano())
	x.env = &env{t: t, dbDir: filepath.Join(t.TempDir(), "db"),
		opts: server.Options{RateLimit: -1, AuthRateLimit: -1}}
	if setup != nil {
		setup(x)
	}
	x.ring = grant.NewKeyRing(mustKey(t, 1))
	x.open(x.ring)
	secret, err := x.engine.Admin.NewPlatformSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := x.engine.Admin.EnsurePlatformKey(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	x.platform = secret
	t.Cleanup(func() {
		x.stop()
		if x.tr != nil {
			x.tr.CloseIdleConnections()
		}
	})
	x.o = x.createOrg("Exec")
	x.agent, x.provider = mustKey(t, 2), mustKey(t, 3)
	x.registerKey(t, pathAgentKeys, x.o.Key, x.agent, "").want(t, http.StatusCreated)
	x.registerKey(t, pathProvKeys, x.o.Key, x.provider, "psp.example").want(t, http.StatusCreated)
	if bundle != "" {
		if r := x.publish(x.o.Key, bundle); r.Status >= 300 {
			t.Fatalf("publish: %s", r)
		}
	}
	return x
}

func (x *execEnv) clock() time.Time {
	if x.engineClock != nil {
		return x.engineClock().UTC()
	}
	return time.Unix(0, x.now.Load()).UTC()
}

// storeClockFunc is the clock x's stores judge leases by (nil: their own).
func (x *execEnv) storeClockFunc() func() time.Time {
	switch {
	case x.dbClock:
		return nil
	case x.storeClock != nil:
		return x.storeClock
	}
	return x.clock
}

// advance moves the one clock of engine, store and server.
func (x *execEnv) advance(d time.Duration) { x.now.Add(int64(d)) }

// open opens the store of dbDir with ring and serves it.
func (x *execEnv) open(ring *grant.KeyRing) {
	t := x.t
	t.Helper()
	st := openBackend(t, x.dbDir, x.storeClockFunc())
	eng, err := clearance.Open(st, x.engineOptions(ring))
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	x.ring = ring
	x.store, x.engine = st, eng
	x.srv = httptest.NewServer(server.New(eng, x.opts))
	if x.tr != nil {
		x.tr.CloseIdleConnections()
	}
	x.tr = x.srv.Client().Transport.(*http.Transport).Clone()
	x.tr.MaxIdleConnsPerHost = 128
	x.client = &http.Client{Transport: x.tr}
}

// engineOptions are the options of x's engines, signing with ring.
func (x *execEnv) engineOptions(ring *grant.KeyRing) clearance.Options {
	opts := clearance.Options{Now: x.clock, GrantKeys: ring, LedgerKey: testLedgerKey(x.t),
		ShareSecret: testShareSecret, ApprovalServices: x.approvals, AllowPrivateDestinations: x.approvals != nil,
		SecretsKey: x.secretsKey}
	if x.tune != nil {
		x.tune(&opts)
	}
	return opts
}

// peer starts a second server over x's data, with an engine of its own:
// on PostgreSQL a store of its own too, as another machine would have.
func (x *execEnv) peer() *env {
	x.t.Helper()
	p := &env{t: x.t, dbDir: x.dbDir, opts: x.opts, platform: x.platform}
	st := x.store
	if onPostgres(x.t) {
		st = openBackend(x.t, x.dbDir, x.storeClockFunc())
		p.store = st // closed by p.stop
	}
	eng, err := clearance.Open(st, x.engineOptions(x.ring))
	if err != nil {
		x.t.Fatalf("open a second engine: %v", err)
	}
	p.engine = eng
	p.server = server.New(eng, x.opts)
	p.srv = httptest.NewServer(p.server)
	tr := p.srv.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 128
	p.client = &http.Client{Transport: tr}
	x.t.Cleanup(func() { p.stop(); tr.CloseIdleConnections() })
	return p
}

// testLedgerKey is the fixed ledger key of the test servers.
func testLedgerKey(t testing.TB) *ledger.Key {
	t.Helper()
	k, err := ledger.NewKey("clearance-test-ledger", bytes.Repeat([]byte{0x4c}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// reopen closes the server and the store and opens them again with ring:
// how a restarted server picks up a rotated key ring.
func (x *execEnv) reopen(ring *grant.KeyRing) {
	x.t.Helper()
	x.stop()
	x.open(ring)
}

// req is env.do for a test or subtest t (env.do fails the env's own t).
// A "User-Agent" header given as "-" sends no User-Agent at all.
func (x *execEnv) req(t testing.TB, method, path, key string, body any, headers map[string]string) *result {
	t.Helper()
	noUA := headers["User-Agent"] == "-"
	if noUA {
		h := map[string]string{}
		for k, v := range headers {
			if k != "User-Agent" {
				h[k] = v
			}
		}
		headers = h
	}
	if !noUA {
		r, err := x.send(method, path, key, body, headers)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Go's client adds its own User-Agent unless the header is set to "".
	var rd io.Reader
	if s, ok := body.(string); ok {
		rd = strings.NewReader(s)
	} else if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	rq, err := http.NewRequest(method, x.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	rq.Header.Set("Content-Type", "application/json")
	rq.Header.Set("Authorization", "Bearer "+key)
	for k, v := range headers {
		rq.Header.Set(k, v)
	}
	rq.Header["User-Agent"] = []string{""}
	return x.roundTrip(t, rq)
}

// roundTrip sends rq and reads its answer.
func (x *execEnv) roundTrip(t testing.TB, rq *http.Request) *result {
	t.Helper()
	res, err := x.client.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := &result{Status: res.StatusCode, Header: res.Header, Raw: raw, what: rq.Method + " " + rq.URL.RequestURI()}
	if len(raw) > 0 && raw[0] == '{' {
		_ = json.Unmarshal(raw, &r.JSON)
	}
	return r
}

// registerKey posts {kid, iss?, public_jwk} of k to a key registry.
func (x *execEnv) registerKey(t testing.TB, path, apiKey string, k grant.Key, iss string) *result {
	t.Helper()
	body := map[string]any{"kid": k.KID(), "public_jwk": k.PublicJWK()}
	if iss != "" {
		body["iss"] = iss
	}
	return x.req(t, "POST", path, apiKey, body, nil)
}

// intentSpec describes one signed execution intent; zero members take
// defaults (the env's org and agent key, fresh id, nonce and scope, amount
// 100).
type intentSpec struct {
	org, id, nonce, scope, effect string
	amount                        float64
	key                           *grant.Key
	mutate                        func(m map[string]any)
}

// intent returns the compact JWS of an intent and its intent_id.
func (x *execEnv) intent(t testing.TB, s intentSpec) (jws, id string) {
	t.Helper()
	n := x.seq.Add(1)
	if s.org == "" {
		s.org = x.o.ID
	}
	if s.id == "" {
		s.id = fmt.Sprintf("intent-%d", n)
	}
	if s.nonce == "" {
		s.nonce = fmt.Sprintf("nonce-%d", n)
	}
	if s.scope == "" {
		s.scope = fmt.Sprintf("scope-%d", n)
	}
	if s.amount == 0 {
		s.amount = 100
	}
	k := x.agent
	if s.key != nil {
		k = *s.key
	}
	m := map[string]any{
		"intent_id": s.id, "org_id": s.org, "actor": map[string]any{"id": "agent-7", "type": "agent"},
		"action":       map[string]any{"type": "refund", "amount": s.amount, "currency": "EUR", "target": "order-1"},
		"workflow_key": "refunds", "decision_type": "REFUND", "nonce": s.nonce,
		"concurrency_scope": s.scope, "escalation": map[string]any{"mode": "NONE"}, "issued_at": x.clock().Format(time.RFC3339),
	}
	if s.effect != "" {
		m["expected_effect_digest"] = s.effect
	}
	if s.mutate != nil {
		s.mutate(m)
	}
	payload, err := canon.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	jws, err = grant.SignIntent(k, payload)
	if err != nil {
		t.Fatal(err)
	}
	return jws, s.id
}

// bind posts a signed intent to enforce-and-bind with the org's key.
func (x *execEnv) bind(t testing.TB, jws string, headers map[string]string) *result {
	t.Helper()
	return x.req(t, "POST", pathBind, x.o.Key, map[string]any{"signed_intent": jws}, headers)
}

// issued is a grant from an ALLOW in ENFORCEMENT.
type issued struct {
	token, hash, grantID, intentID string
	bind                           *result
}

// grantFor binds s and requires a grant.
func (x *execEnv) grantFor(t testing.TB, s intentSpec) issued {
	t.Helper()
	jws, id := x.intent(t, s)
	r := x.bind(t, jws, nil).want(t, http.StatusOK)
	g := issued{token: r.str("execution_token"), hash: r.str("intent_hash"), grantID: r.str("grant_id"), intentID: id, bind: r}
	if r.str("outcome") != "ALLOW" || r.str("mode") != "ENFORCEMENT" || g.token == "" || g.grantID == "" || g.hash == "" {
		t.Fatalf("expected a grant: %s", r)
	}
	return g
}

// claim posts {execution_token, intent_hash} to path (claim or consume).
func (x *execEnv) claim(t testing.TB, path, token, hash string) *result {
	t.Helper()
	return x.req(t, "POST", path, x.o.Key, map[string]any{"execution_token": token, "intent_hash": hash}, nil)
}

// claimed claims g and requires a live claim.
func (x *execEnv) claimed(t testing.TB, g issued) *result {
	t.Helper()
	r := x.claim(t, pathClaim, g.token, g.hash).want(t, http.StatusOK)
	if lookup(r.JSON, "should_execute") != true || r.str("claim_token") == "" || r.str("claim_attestation") == "" {
		t.Fatalf("expected a live claim: %s", r)
	}
	return r
}

// finalize posts a finalize-token body; extra members are merged in.
func (x *execEnv) finalize(t testing.TB, token, claimToken, outcome string, extra map[string]any) *result {
	t.Helper()
	body := map[string]any{"execution_token": token, "claim_token": claimToken, "outcome": outcome}
	for k, v := range extra {
		body[k] = v
	}
	return x.req(t, "POST", pathFinalize, x.o.Key, body, nil)
}

// wantFailedClaim checks the fail-closed claim body of a 409.
func wantFailedClaim(t testing.TB, r *result, code string) {
	t.Helper()
	if r.Status != http.StatusConflict {
		t.Fatalf("want 409 %s: %s", code, r)
	}
	if r.JSON == nil || lookup(r.JSON, "should_execute") != false {
		t.Fatalf("a refused claim must say should_execute false: %s", r)
	}
	for _, k := range []string{"claim_token", "claim_lease_expires_at", "claim_attestation", "grant_id", "decision_id"} {
		v, present := r.JSON[k]
		if !present || v != nil {
			t.Fatalf("a refused claim must carry %s: null: %s", k, r)
		}
	}
	if lookup(r.JSON, "valid") != false {
		t.Fatalf("a refused claim must say valid false: %s", r)
	}
	if code != "" && r.str("code") != code {
		t.Fatalf("want code %s: %s", code, r)
	}
	if r.str("request_id") == "" || r.str("request_id") != r.Header.Get(server.HeaderRequestID) {
		t.Fatalf("refused claim request_id: %s", r)
	}
}

// neverExecutes fails if r could be read as authorizing execution.
func neverExecutes(t testing.TB, r *result) {
	t.Helper()
	if lookup(r.JSON, "should_execute") == true || r.str("claim_token") != "" || r.str("claim_attestation") != "" {
		t.Fatalf("a refused request authorized execution: %s", r)
	}
}

// ledgerOK requires the org's ledger to verify.
func (x *execEnv) ledgerOK(t testing.TB) {
	t.Helper()
	r := x.req(t, "GET", pathVerify, x.o.Key, nil, nil).want(t, http.StatusOK)
	if lookup(r.JSON, "valid") != true {
		t.Fatalf("ledger does not verify: %s", r)
	}
}

// fetchJWKS reads the public JWKS without credentials.
func (x *execEnv) fetchJWKS(t testing.TB) jose.JSONWebKeySet {
	t.Helper()
	r := x.req(t, "GET", pathJWKS, "", nil, nil).want(t, http.StatusOK)
	if ct := r.Header.Get("Content-Type"); ct != "application/jwk-set+json" {
		t.Fatalf("JWKS Content-Type %q", ct)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(r.Raw, &set); err != nil {
		t.Fatalf("JWKS: %v: %s", err, r.Raw)
	}
	for _, k := range set.Keys {
		if !k.IsPublic() {
			t.Fatalf("JWKS has private material: %s", r.Raw)
		}
	}
	if bytes.Contains(r.Raw, []byte(`"d"`)) {
		t.Fatalf("JWKS has a \"d\" member: %s", r.Raw)
	}
	return set
}

func jwksKIDs(set jose.JSONWebKeySet) []string {
	out := make([]string, 0, len(set.Keys))
	for _, k := range set.Keys {
		out = append(out, k.KeyID)
	}
	return out
}

// verifyOffline verifies a compact JWS as a downstream system would, with
// go-jose and crypto/ed25519 and the JWKS only (no Clearance package): alg
// EdDSA, the typ wanted, a kid found in the set, a valid signature. It
// returns the decoded claims and the kid.
func verifyOffline(t testing.TB, token, typ string, set jose.JSONWebKeySet) (map[string]any, string) {
	t.Helper()
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatalf("parse JWS: %v", err)
	}
	if len(jws.Signatures) != 1 {
		t.Fatalf("%d signatures", len(jws.Signatures))
	}
	h := jws.Signatures[0].Protected
	if h.Algorithm != string(jose.EdDSA) {
		t.Fatalf("alg %q", h.Algorithm)
	}
	if got, _ := h.ExtraHeaders[jose.HeaderType].(string); got != typ {
		t.Fatalf("typ %q, want %q", got, typ)
	}
	keys := set.Key(h.KeyID)
	if len(keys) != 1 {
		t.Fatalf("kid %q: %d keys in the JWKS %v", h.KeyID, len(keys), jwksKIDs(set))
	}
	pub, ok := keys[0].Key.(ed25519.PublicKey)
	if !ok {
		t.Fatalf("JWKS key %q is %T, not Ed25519", h.KeyID, keys[0].Key)
	}
	payload, err := jws.Verify(pub)
	if err != nil {
		t.Fatalf("go-jose verify: %v", err)
	}
	// The same check by hand, with crypto/ed25519 alone.
	parts := strings.Split(token, ".")
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		t.Fatalf("ed25519 verify failed (%v)", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return claims, h.KeyID
}

// jwsPart decodes segment i (0 header, 1 payload) of a compact JWS.
func jwsPart(t testing.TB, token string, i int) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// b64 is unpadded base64url.
func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// compact assembles a compact JWS from a header, a raw payload and a
// signature produced by sign over "<header>.<payload>".
func compact(t testing.TB, header map[string]any, payload []byte, sign func(input []byte) []byte) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	input := b64(h) + "." + b64(payload)
	return input + "." + b64(sign([]byte(input)))
}

// payloadOf returns the raw payload bytes of a compact JWS.
func payloadOf(t testing.TB, token string) []byte {
	t.Helper()
	parts := strings.Split(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// effectDigestOf is the sha256: digest Clearance uses for effects.
func effectDigestOf(s string) string { return sha256Digest([]byte(s)) }

// bareJWK is k's public JWK without its own kid, to register under any kid.
func bareJWK(k grant.Key) map[string]any {
	return map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(k.Public())}
}
