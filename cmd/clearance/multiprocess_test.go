package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clearancehq/clearance/store/pgstore/pgtest"

	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
)

// mpClient is one org's view of a server: its URL and the org's API key.
type mpClient struct {
	name, url, key string
	httpc          *http.Client
}

func (c mpClient) do(t *testing.T, method, path string, body any) *reply {
	t.Helper()
	r, err := c.try(method, path, body)
	if err != nil {
		t.Fatalf("server %s: %s %s: %v", c.name, method, path, err)
	}
	return r
}

// try sends one request; safe on any goroutine.
func (c mpClient) try(method, path string, body any) (*reply, error) {
	var s string
	switch b := body.(type) {
	case nil:
	case string:
		s = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		s = string(raw)
	}
	return call(c.httpc, method, c.url+path, c.key, s, nil)
}

func (c mpClient) want(t *testing.T, method, path string, body any, status int) *reply {
	t.Helper()
	r := c.do(t, method, path, body)
	if r.status != status {
		t.Fatalf("server %s: %s %s: status %d, want %d: %s", c.name, method, path, r.status, status, r.raw)
	}
	return r
}

const mpBundle = `{"bundle_id":"mp","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// mpFreeze (v2) blocks everything.
const mpFreeze = `{"bundle_id":"mp","version":"v2","mode":"ENFORCEMENT","rules":[],"default":{"outcome":"BLOCK","reason_codes":["FROZEN"]}}`

// mpOrg creates, through A, an org named name with an agent key and the
// ENFORCEMENT bundle, and returns clients of A and B with its API key.
func mpOrg(t *testing.T, pa, pb *proc, httpc *http.Client, name string) (A, B mpClient, orgID string, agent grant.Key) {
	t.Helper()
	plat := mpClient{name: "A", url: pa.url, key: platformKey(t, pa.dataDir), httpc: httpc}
	org := plat.want(t, "POST", "/v1/platform/orgs", map[string]any{"name": name}, http.StatusCreated)
	orgID, apiKey := str(org.json, "org_id"), str(org.json, "api_key")
	A = mpClient{name: "A", url: pa.url, key: apiKey, httpc: httpc}
	B = mpClient{name: "B", url: pb.url, key: apiKey, httpc: httpc}
	agent, err := grant.NewKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	A.want(t, "POST", "/v1/execution/agent-keys", map[string]any{"kid": agent.KID(), "public_jwk": agent.PublicJWK()}, http.StatusCreated)
	A.want(t, "POST", "/v1/protocol/policies/bundles", mpBundle, http.StatusCreated)
	return A, B, orgID, agent
}

// issuedGrant is a grant token and the intent hash it is bound to.
type issuedGrant struct{ token, hash string }

// mpSignedBinder returns a function that binds a fresh intent (numbered from
// base) through a server and checks which key signed the grant.
func mpSignedBinder(t *testing.T, agent grant.Key, orgID string, base int) func(c mpClient, wantKID string) issuedGrant {
	n := 0
	return func(c mpClient, wantKID string) issuedGrant {
		t.Helper()
		n++
		tok, hash := mpBind(t, c, mpIntent(t, agent, orgID, base+n))
		if got := kidOf(t, tok); got != wantKID {
			t.Fatalf("server %s signed with %s, want %s", c.name, got, wantKID)
		}
		return issuedGrant{tok, hash}
	}
}

// mpIntent signs an execution intent of orgID with agent.
func mpIntent(t *testing.T, agent grant.Key, orgID string, n int) string {
	t.Helper()
	m := map[string]any{
		"intent_id": fmt.Sprintf("mp-intent-%d", n), "org_id": orgID, "actor": map[string]any{"id": "agent-7", "type": "agent"},
		"action":       map[string]any{"type": "refund", "amount": 100, "currency": "EUR", "target": "order-1"},
		"workflow_key": "refunds", "decision_type": "REFUND", "nonce": fmt.Sprintf("mp-nonce-%d", n),
		"concurrency_scope": fmt.Sprintf("mp-scope-%d", n), "escalation": map[string]any{"mode": "NONE"},
		"issued_at": time.Now().UTC().Format(time.RFC3339),
	}
	payload, err := canon.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := grant.SignIntent(agent, payload)
	if err != nil {
		t.Fatal(err)
	}
	return jws
}

// mpBind binds a signed intent through c and requires a grant.
func mpBind(t *testing.T, c mpClient, jws string) (token, hash string) {
	t.Helper()
	r := c.want(t, "POST", "/v1/authority/enforce-and-bind", map[string]any{"signed_intent": jws}, http.StatusOK)
	token, hash = str(r.json, "execution_token"), str(r.json, "intent_hash")
	if str(r.json, "outcome") != "ALLOW" || str(r.json, "mode") != "ENFORCEMENT" || token == "" || hash == "" {
		t.Fatalf("server %s: expected a grant: %s", c.name, r.raw)
	}
	return token, hash
}

// TestMultiProcessOnePostgres runs two `clearance serve` processes on one
// PostgreSQL schema with one shared grant key: a grant bound through one is
// claimed exactly once across both, decisions written through both keep one
// valid ledger, and a claim lease is judged by the database's clock.
func TestMultiProcessOnePostgres(t *testing.T) {
	db := pgtest.Admin(t)
	schema := pgtest.NewSchema(t, "clearance_mp_") // dropped after the servers, registered later, stop
	storeURL := pgtest.SchemaURL(t, schema)

	// One grant signing key for both servers.
	keysDir := t.TempDir()
	gk, _, err := keyfile.LoadOrCreate(keysDir, "grant")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(keysDir, "keys", "grant.json")
	if k, err := keyfile.LoadFile(keyFile); err != nil || k.KID() != gk.KID() {
		t.Fatalf("shared grant key file: %v", err)
	}

	// And one ledger key, or checkpoints signed by one fail at the other.
	if _, _, err := keyfile.LoadOrCreate(keysDir, "ledger"); err != nil {
		t.Fatal(err)
	}
	ledgerKeyFile := filepath.Join(keysDir, "keys", "ledger.json")

	common := []string{"--store", storeURL, "--grant-key-file", keyFile, "--ledger-key-file", ledgerKeyFile,
		"--rate-limit", "-1", "--claim-lease", "2s"}
	dirA, dirB := t.TempDir(), t.TempDir()
	pa := startServer(t, dirA, common...)
	pb := startServer(t, dirB, common...)
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer httpc.CloseIdleConnections()

	// Org, agent key and ENFORCEMENT bundle, all through A.
	A, B, orgID, agent := mpOrg(t, pa, pb, httpc, "MultiProcess")
	servers := []mpClient{A, B}
	ledgerEntries := 5 // org.created, api_key.created, key.registered, policy.published, policy.activated

	// Both servers publish the one shared key.
	for _, s := range servers {
		jwks := s.want(t, "GET", "/.well-known/clearance-execution-grant-jwks.json", nil, http.StatusOK)
		if !json.Valid(jwks.raw) || !containsKID(jwks.raw, gk.KID()) {
			t.Fatalf("server %s JWKS lacks the shared kid %s: %s", s.name, gk.KID(), jwks.raw)
		}
	}

	// A grant bound through B; 64 concurrent claims across A and B.
	token, hash := mpBind(t, B, mpIntent(t, agent, orgID, 1))
	ledgerEntries += 2 // decision.recorded, grant.issued
	const claimers = 64
	type claimOutcome struct {
		server int
		r      *reply
		err    error
	}
	results := make([]claimOutcome, claimers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Go(func() {
			path := "/v1/execution/claim-token"
			if (i/2)%2 == 1 {
				path = "/v1/execution/consume-token"
			}
			<-start
			r, err := servers[i%2].try("POST", path, map[string]any{"execution_token": token, "intent_hash": hash})
			results[i] = claimOutcome{server: i % 2, r: r, err: err}
		})
	}
	close(start)
	wg.Wait()
	winner, claimToken, losses := -1, "", 0
	for i, o := range results {
		switch {
		case o.err != nil:
			t.Fatalf("claim %d on %s: %v", i, servers[o.server].name, o.err)
		case o.r.status == http.StatusOK && o.r.json["should_execute"] == true:
			if winner >= 0 {
				t.Fatalf("two claims won: %d on %s and %d on %s", winner, servers[results[winner].server].name, i, servers[o.server].name)
			}
			winner, claimToken = i, str(o.r.json, "claim_token")
			if claimToken == "" || str(o.r.json, "claim_attestation") == "" {
				t.Fatalf("winning claim without claim_token or attestation: %s", o.r.raw)
			}
		case o.r.status == http.StatusConflict && o.r.json != nil && o.r.json["should_execute"] == false:
			losses++
		default:
			t.Fatalf("claim %d on %s: status %d: %s", i, servers[o.server].name, o.r.status, o.r.raw)
		}
	}
	if winner < 0 || losses != claimers-1 {
		t.Fatalf("claims: winner %d, %d refused, want exactly one winner and %d refused", winner, losses, claimers-1)
	}
	ledgerEntries++ // execution.claimed
	other := servers[1-results[winner].server]
	fin := other.want(t, "POST", "/v1/execution/finalize-token",
		map[string]any{"execution_token": token, "claim_token": claimToken, "outcome": "COMMITTED"}, http.StatusOK)
	if str(fin.json, "outcome") != "COMMITTED" {
		t.Fatalf("finalize through %s: %s", other.name, fin.raw)
	}
	ledgerEntries++ // execution.finalized

	// Decisions written through both servers at once.
	const (
		perServer = 50
		workers   = 8
	)
	jobs := make(chan int)
	var errMu sync.Mutex
	var errs []string
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				s := servers[i%2]
				body := fmt.Sprintf(`{"decision_type":"PAYMENT","workflow_key":"mp","amount":%d,"context":{"i":%d}}`, 100+i, i)
				r, err := s.try("POST", "/v1/protocol/evaluate-decision", body)
				if err == nil && (r.status != http.StatusOK || str(r.json, "dossier_id") == "") {
					err = fmt.Errorf("status %d: %s", r.status, r.raw)
				}
				if err != nil {
					errMu.Lock()
					errs = append(errs, fmt.Sprintf("decision %d on %s: %v", i, s.name, err))
					errMu.Unlock()
				}
			}
		})
	}
	for i := range 2 * perServer {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d decisions failed, first: %s", len(errs), errs[0])
	}
	ledgerEntries += 2 * perServer
	var heads []string
	for _, s := range servers {
		v := s.want(t, "GET", "/v1/protocol/audit/ledger/verify", nil, http.StatusOK)
		if v.json["valid"] != true || v.json["head_seq"] != float64(ledgerEntries) || str(v.json, "head_hash") == "" {
			t.Fatalf("server %s: ledger verify: %s; want valid with head_seq %d", s.name, v.raw, ledgerEntries)
		}
		heads = append(heads, fmt.Sprintf("%v/%s", v.json["head_seq"], str(v.json, "head_hash")))
	}
	if heads[0] != heads[1] {
		t.Fatalf("servers disagree on the ledger head: A %s, B %s", heads[0], heads[1])
	}

	// A claim's lease ends by the database's clock.
	token, hash = mpBind(t, A, mpIntent(t, agent, orgID, 2))
	c := B.want(t, "POST", "/v1/execution/claim-token", map[string]any{"execution_token": token, "intent_hash": hash}, http.StatusOK)
	if c.json["should_execute"] != true {
		t.Fatalf("claim: %s", c.raw)
	}
	leaseEnd, err := time.Parse(time.RFC3339Nano, str(c.json, "claim_lease_expires_at"))
	if err != nil {
		t.Fatalf("claim_lease_expires_at: %v: %s", err, c.raw)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var dbNow time.Time
		if err := db.QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&dbNow); err != nil {
			t.Fatal(err)
		}
		if dbNow.After(leaseEnd) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database clock (%s) did not pass the lease end %s", dbNow, leaseEnd)
		}
		<-time.After(20 * time.Millisecond) // poll interval
	}
	late := A.want(t, "POST", "/v1/execution/finalize-token",
		map[string]any{"execution_token": token, "claim_token": str(c.json, "claim_token"), "outcome": "COMMITTED"}, http.StatusConflict)
	if str(late.json, "outcome") != "INDETERMINATE" || str(late.json, "code") != "CLAIM_LEASE_EXPIRED" {
		t.Fatalf("finalize after the lease: %s; want INDETERMINATE with CLAIM_LEASE_EXPIRED", late.raw)
	}
	for _, s := range servers {
		if v := s.want(t, "GET", "/v1/protocol/audit/ledger/verify", nil, http.StatusOK); v.json["valid"] != true {
			t.Fatalf("server %s: ledger does not verify after the lapsed lease: %s", s.name, v.raw)
		}
	}

	// The active policy version is read from the database on every request:
	// an activation through one server governs the other at once.
	B.want(t, "POST", "/v1/protocol/policies/bundles?activate=false", mpFreeze, http.StatusCreated)
	token, hash = mpBind(t, A, mpIntent(t, agent, orgID, 3)) // v1 is still active
	B.want(t, "POST", "/v1/protocol/policies/bundles/v2/activate", `{"expected_active_version":"v1"}`, http.StatusOK)
	if r := A.want(t, "POST", "/v1/execution/claim-token", map[string]any{"execution_token": token, "intent_hash": hash},
		http.StatusConflict); str(r.json, "code") != "STALE_AUTHORIZATION" || r.json["should_execute"] != false {
		t.Fatalf("claim through A after B activated the freeze: %s", r.raw)
	}
	if r := A.want(t, "POST", "/v1/authority/enforce-and-bind", map[string]any{"signed_intent": mpIntent(t, agent, orgID, 4)},
		http.StatusOK); str(r.json, "outcome") != "BLOCK" || str(r.json, "execution_token") != "" {
		t.Fatalf("bind through A after B activated the freeze: %s", r.raw)
	}
	A.want(t, "POST", "/v1/policies/v1/activate", `{"expected_active_version":"v2"}`, http.StatusOK)
	mpBind(t, B, mpIntent(t, agent, orgID, 5)) // rolled back through A: B grants again

	// Both stop cleanly on SIGTERM.
	httpc.CloseIdleConnections()
	for _, p := range []*proc{pa, pb} {
		if code := p.signal(syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d (%v), stderr %s", code, p.waitErr, p.stderr.String())
		}
	}
}

// containsKID reports whether a JWKS document lists kid.
func containsKID(raw []byte, kid string) bool {
	var set struct {
		Keys []struct {
			KID string `json:"kid"`
		} `json:"keys"`
	}
	if json.Unmarshal(raw, &set) != nil {
		return false
	}
	for _, k := range set.Keys {
		if k.KID == kid {
			return true
		}
	}
	return false
}

// TestMultiProcessKeyRotationAndRevocation runs two `clearance serve`
// processes on one PostgreSQL schema sharing key files made by `clearance
// keys init`. A rotation and then revocations through `clearance keys` on
// the shared file reach both running servers without a restart: both sign
// with the new key, and both refuse every grant of a revoked key.
func TestMultiProcessKeyRotationAndRevocation(t *testing.T) {
	pgtest.Admin(t)
	schema := pgtest.NewSchema(t, "clearance_mpkeys_")
	storeURL := pgtest.SchemaURL(t, schema)
	keysDir := t.TempDir()
	grantFile, ledgerFile := filepath.Join(keysDir, "grant.json"), filepath.Join(keysDir, "ledger.json")
	if code, _, stderr := runCLI(t, nil, "keys", "init", "--grant-key-file", grantFile, "--ledger-key-file", ledgerFile); code != 0 {
		t.Fatalf("keys init: exit %d: %s", code, stderr)
	}
	first, err := keyfile.ReadRing(grantFile)
	if err != nil {
		t.Fatal(err)
	}
	k1 := first.Active().KID()

	common := []string{"--store", storeURL, "--grant-key-file", grantFile, "--ledger-key-file", ledgerFile, "--rate-limit", "-1"}
	dirA, dirB := t.TempDir(), t.TempDir()
	pa := startServer(t, dirA, common...)
	pb := startServer(t, dirB, common...)
	httpc := &http.Client{Timeout: 30 * time.Second}
	defer httpc.CloseIdleConnections()
	A, B, orgID, agent := mpOrg(t, pa, pb, httpc, "MultiProcessKeys")
	awaitJWKS(t, []string{k1}, A, B)

	bind := mpSignedBinder(t, agent, orgID, 100)
	accepted := func(g issuedGrant, servers ...mpClient) {
		t.Helper()
		for _, s := range servers {
			s.want(t, "POST", "/v1/execution/verify-token", map[string]any{"execution_token": g.token, "intent_hash": g.hash}, http.StatusOK)
		}
	}
	refused := func(g issuedGrant, servers ...mpClient) {
		t.Helper()
		for _, s := range servers {
			r := s.want(t, "POST", "/v1/execution/verify-token", map[string]any{"execution_token": g.token, "intent_hash": g.hash}, http.StatusConflict)
			c := s.want(t, "POST", "/v1/execution/claim-token", map[string]any{"execution_token": g.token, "intent_hash": g.hash}, http.StatusConflict)
			if str(r.json, "code") != "GRANT_INVALID" || str(c.json, "code") != "GRANT_INVALID" || c.json["should_execute"] != false {
				t.Fatalf("server %s: a grant of a revoked key: verify %s, claim %s", s.name, r.raw, c.raw)
			}
		}
	}
	byK1a, byK1b := bind(A, k1), bind(B, k1)

	// Rotation: both sign with K2 and still accept K1 while it drains.
	code, out, stderr := runCLI(t, nil, "keys", "rotate", "--grant-key-file", grantFile)
	if code != 0 {
		t.Fatalf("keys rotate: exit %d: %s", code, stderr)
	}
	var rot keysOutput
	if err := json.Unmarshal([]byte(out), &rot); err != nil {
		t.Fatalf("keys rotate output: %v: %s", err, out)
	}
	k2 := rot.Active
	awaitJWKS(t, []string{k2, k1}, A, B)
	byK2a, byK2b := bind(A, k2), bind(B, k2)
	accepted(byK1a, A, B)
	accepted(byK2b, A, B)

	// K1 leaked: revoked on both at once, drain or not.
	if code, _, stderr := runCLI(t, nil, "keys", "revoke", "--grant-key-file", grantFile, "--kid", k1); code != 0 {
		t.Fatalf("keys revoke: exit %d: %s", code, stderr)
	}
	awaitJWKS(t, []string{k2}, A, B)
	refused(byK1a, A, B)
	refused(byK1b, A, B)
	accepted(byK2a, A, B)

	// K2, the active key, leaked: a fresh key signs on both, K2 is refused.
	if code, out, stderr = runCLI(t, nil, "keys", "revoke", "--grant-key-file", grantFile, "--kid", k2); code != 0 {
		t.Fatalf("keys revoke of the active key: exit %d: %s", code, stderr)
	}
	var leaked keysOutput
	if err := json.Unmarshal([]byte(out), &leaked); err != nil {
		t.Fatalf("keys revoke output: %v: %s", err, out)
	}
	k3 := leaked.Active
	awaitJWKS(t, []string{k3}, A, B)
	for _, s := range []mpClient{A, B} {
		if got := healthKeys(t, s)["grant"]; got != k3 {
			t.Fatalf("server %s health grant kid %v, want %s", s.name, got, k3)
		}
	}
	refused(byK2a, A, B)
	refused(byK2b, A, B)
	fresh := bind(B, k3)
	if c := A.want(t, "POST", "/v1/execution/claim-token", map[string]any{"execution_token": fresh.token, "intent_hash": fresh.hash}, http.StatusOK); c.json["should_execute"] != true {
		t.Fatalf("claim of a grant of the new key through A: %s", c.raw)
	}
	for _, p := range []*proc{pa, pb} {
		if !p.hasLog("grant keys reloaded") {
			t.Fatalf("no reload logged: %v", p.logLines())
		}
	}
	httpc.CloseIdleConnections()
	for _, p := range []*proc{pa, pb} {
		if code := p.signal(syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d (%v), stderr %s", code, p.waitErr, p.stderr.String())
		}
	}
}

// TestMultiProcessStoreRevocationWithOwnKeyFiles runs two `clearance serve`
// processes on one PostgreSQL schema, each with its OWN copy of the grant
// key file (distributed like TLS keys). `clearance keys revoke --store`
// reaches both without a restart, whatever their copies say: a retired key
// revoked in the database only is refused by both; when the active key
// leaks, the server whose copy was rewritten signs with a fresh key, and
// the one whose copy still names the leaked key active refuses its grants
// and signs nothing (503 SIGNING_KEY_REVOKED) until its copy is replaced.
func TestMultiProcessStoreRevocationWithOwnKeyFiles(t *testing.T) {
	pgtest.Admin(t)
	schema := pgtest.NewSchema(t, "clearance_mprevoke_")
	storeURL := pgtest.SchemaURL(t, schema)
	keysDir := t.TempDir()
	master, ledgerFile := filepath.Join(keysDir, "grant.json"), filepath.Join(keysDir, "ledger.json")
	if code, _, stderr := runCLI(t, nil, "keys", "init", "--grant-key-file", master, "--ledger-key-file", ledgerFile); code != 0 {
		t.Fatalf("keys init: exit %d: %s", code, stderr)
	}
	copyA, copyB := filepath.Join(t.TempDir(), "grant.json"), filepath.Join(t.TempDir(), "grant.json")
	distribute := func(from string, to ...string) {
		t.Helper()
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range to {
			replaceFile(t, p, data)
		}
	}
	distribute(master, copyA, copyB)
	first, err := keyfile.ReadRing(master)
	if err != nil {
		t.Fatal(err)
	}
	k1 := first.Active().KID()

	common := []string{"--store", storeURL, "--ledger-key-file", ledgerFile, "--rate-limit", "-1"}
	dirA, dirB := t.TempDir(), t.TempDir()
	pa := startServer(t, dirA, append([]string{"--grant-key-file", copyA}, common...)...)
	pb := startServer(t, dirB, append([]string{"--grant-key-file", copyB}, common...)...)
	httpc := &http.Client{Timeout: 30 * time.Second}
	defer httpc.CloseIdleConnections()
	A, B, orgID, agent := mpOrg(t, pa, pb, httpc, "MultiProcessRevocations")

	bind := mpSignedBinder(t, agent, orgID, 200)
	verify := func(g issuedGrant, status int, servers ...mpClient) {
		t.Helper()
		for _, s := range servers {
			r := s.want(t, "POST", "/v1/execution/verify-token", map[string]any{"execution_token": g.token, "intent_hash": g.hash}, status)
			if status == http.StatusConflict && str(r.json, "code") != "GRANT_INVALID" {
				t.Fatalf("server %s: a grant of a revoked key: %s", s.name, r.raw)
			}
		}
	}
	revoke := func(args ...string) {
		t.Helper()
		if code, _, stderr := runCLI(t, nil, append([]string{"keys", "revoke"}, args...)...); code != 0 {
			t.Fatalf("keys revoke %v: exit %d: %s", args, code, stderr)
		}
	}
	byK1 := bind(B, k1)

	// A rotation, distributed to both copies: K2 signs, K1 drains.
	if code, _, stderr := runCLI(t, nil, "keys", "rotate", "--grant-key-file", master); code != 0 {
		t.Fatalf("keys rotate: exit %d: %s", code, stderr)
	}
	distribute(master, copyA, copyB)
	rotated, err := keyfile.ReadRing(master)
	if err != nil {
		t.Fatal(err)
	}
	k2 := rotated.Active().KID()
	awaitJWKS(t, []string{k2, k1}, A, B)
	verify(byK1, http.StatusOK, A, B)
	byK2 := bind(B, k2)

	// The retired K1 leaked: revoked in the database only. Both copies
	// still list K1; both servers refuse it.
	revoke("--kid", k1, "--store", storeURL)
	awaitJWKS(t, []string{k2}, A, B)
	verify(byK1, http.StatusConflict, A, B)
	verify(byK2, http.StatusOK, A, B)

	// The active K2 leaked: revoked in the database and in A's copy (which
	// gets a fresh active key K3). B's copy still names K2 active.
	revoke("--kid", k2, "--store", storeURL, "--grant-key-file", copyA)
	ringA, err := keyfile.ReadRing(copyA)
	if err != nil {
		t.Fatal(err)
	}
	k3 := ringA.Active().KID()
	if k3 == k2 {
		t.Fatal("revoking the active key left it active in the file")
	}
	awaitJWKS(t, []string{k3}, A)
	awaitJWKS(t, nil, B)
	verify(byK2, http.StatusConflict, A, B)
	if c := B.want(t, "POST", "/v1/execution/claim-token", map[string]any{"execution_token": byK2.token, "intent_hash": byK2.hash}, http.StatusConflict); str(c.json, "code") != "GRANT_INVALID" || c.json["should_execute"] != false {
		t.Fatalf("server B: claim of a grant of the revoked active key: %s", c.raw)
	}
	r := B.want(t, "POST", "/v1/authority/enforce-and-bind", map[string]any{"signed_intent": mpIntent(t, agent, orgID, 299)}, http.StatusServiceUnavailable)
	if str(r.json, "code") != "SIGNING_KEY_REVOKED" || str(r.json, "execution_token") != "" {
		t.Fatalf("server B signed with its revoked active key: %s", r.raw)
	}
	if h := B.want(t, "GET", "/v1/health", nil, http.StatusServiceUnavailable); str(h.json, "grant_key") != "revoked" {
		t.Fatalf("server B health: %s", h.raw)
	}
	fresh := bind(A, k3)
	if c := A.want(t, "POST", "/v1/execution/claim-token", map[string]any{"execution_token": fresh.token, "intent_hash": fresh.hash}, http.StatusOK); c.json["should_execute"] != true {
		t.Fatalf("claim of a grant of the fresh key through A: %s", c.raw)
	}

	// B's copy is replaced: it signs again, with K3.
	distribute(copyA, copyB)
	awaitJWKS(t, []string{k3}, B)
	bind(B, k3)
	B.want(t, "GET", "/v1/health", nil, http.StatusOK)
	if !pb.hasLog("grant keys revoked in the store applied") {
		t.Fatalf("server B logged no revocation: %v", pb.logLines())
	}
	httpc.CloseIdleConnections()
	for _, p := range []*proc{pa, pb} {
		if code := p.signal(syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d (%v), stderr %s", code, p.waitErr, p.stderr.String())
		}
	}
}
