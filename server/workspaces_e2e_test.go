package server_test

// The zero-human lane end to end: an agent starts a provisional workspace
// with no credential, decides in SHADOW with a key that can do nothing
// else, and an owner who signs in by an e-mail code (mailed through the
// real SMTP server of onboarding_e2e_test.go) claims it with its code for
// the org's org:* key; over Pebble or PostgreSQL (see openBackend).

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/server"
)

// Zero-human lane routes, names and settings under test.
const (
	wsPathProvision = "/v1/public/workspaces/provisional"
	wsPathClaim     = "/v1/public/auth/workspaces/claim"
	wsClaimPrefix   = "clr_clm_"

	// The documented settings the tests assert against.
	wsTTL            = 72 * time.Hour // the provisional key's and the claim code's
	wsWindow         = time.Hour      // of the provisioning budgets
	wsMaxPerSource   = 3
	wsMaxAllSources  = 100
	wsDefaultName    = "Provisional workspace"
	wsKindProvision  = "onboarding.workspace_provisioned"
	wsKindClaimed    = "onboarding.workspace_claimed"
	wsKindKeyCreated = "api_key.created"
)

// wsProvisional is a provisional workspace as the route answered it.
type wsProvisional struct {
	orgID, key, keyID, code, version string
	r                                *result
}

// provision starts a provisional workspace with body (nil: none) and
// checks the whole answer; at is the moment it was asked at.
func (x *signinEnv) provision(body any, name string) wsProvisional {
	x.t.Helper()
	at := x.clock()
	r := x.do("POST", wsPathProvision, "", body, nil).want(x.t, http.StatusCreated)
	wsCheckProvisional(x.t, r, at, name)
	return wsProvisional{orgID: r.str("org_id"), key: r.str("api_key"), keyID: r.str("key_id"), code: r.str("claim_code"),
		version: r.str("policy_version"), r: r}
}

// wsCheckProvisional checks a 201 of the provisioning route asked at at.
func wsCheckProvisional(t testing.TB, r *result, at time.Time, name string) {
	t.Helper()
	signinWantMembers(t, r, "org_id", "api_key", "key_id", "scopes", "key_expires_at", "claim_code", "claim_expires_at",
		"mode", "policy_version", "workspace")
	orgID := r.str("org_id")
	if !clearance.ValidID(orgID) || !strings.HasPrefix(r.str("api_key"), "clr_org_") || r.str("key_id") == "" ||
		!slices.Equal(r.strs("scopes"), []string{"decision:write", "decision:read"}) || r.str("mode") != "SHADOW" ||
		r.str("policy_version") == "" {
		t.Fatalf("provisional workspace: %s", r)
	}
	code := r.str("claim_code")
	if !strings.HasPrefix(code, wsClaimPrefix) || len(code) != len(wsClaimPrefix)+43 || strings.Contains(code, r.str("api_key")) {
		t.Fatalf("claim code %q: want clr_clm_ and 32 random bytes in base64url", code)
	}
	for _, m := range []string{"key_expires_at", "claim_expires_at"} {
		if got, err := time.Parse(time.RFC3339Nano, r.str(m)); err != nil || !got.Equal(at.Add(wsTTL)) {
			t.Fatalf("%s %q, want %s (72 hours on): %v", m, r.str(m), at.Add(wsTTL), err)
		}
	}
	if r.str("workspace.org_id") != orgID || r.str("workspace.name") != name ||
		r.str("workspace.paths.evaluate_decision") != signinPathDecide ||
		r.str("workspace.paths.webhook_integration") != "/v1/orgs/"+orgID+"/integrations/WEBHOOK/connect" {
		t.Fatalf("provisional workspace's workspace: %s", r)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("an answer with a key's secret has Cache-Control %q, want no-store", cc)
	}
}

// claim claims code with the session secret and the CSRF header.
func (x *signinEnv) claim(secret, code string) *result {
	x.t.Helper()
	return x.as(secret, true, "POST", wsPathClaim, map[string]string{"claim_code": code})
}

// wsDecide decides signinDecision with key and checks its mode.
func (x *signinEnv) wsDecide(key, mode, version string) *result {
	x.t.Helper()
	d := x.decide(key, signinDecision)
	if d.str("mode") != mode || d.str("policy_snapshot.policy_version") != version || d.str("dossier_id") == "" {
		x.t.Fatalf("want a %s decision on policy %s: %s", mode, version, d)
	}
	return d
}

// wsDigest is the payload digest of a ledgered record: its canonical JSON
// (members sorted, as json.Marshal orders a map's).
func wsDigest(t testing.TB, v map[string]any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return sha256Digest(b)
}

// wsEntry returns the one entry of kind, failing unless there is exactly one.
func wsEntry(t testing.TB, entries []map[string]any, kind string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, en := range entries {
		if en["kind"] == kind {
			found = append(found, en)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s entries, want 1: %v", len(found), kind, entries)
	}
	return found[0]
}

// ---------------------------------------------------------------------------

// From nothing to an enforced decision without a human first: the agent
// provisions with no credential and decides in SHADOW with a key that is
// refused everywhere else; an address signed in by code claims the
// workspace and its org:* key publishes an ENFORCEMENT policy; the claim
// is once, the code the claimer's; the ledger holds both steps.
func TestWorkspaceProvisionAndClaim(t *testing.T) {
	t.Parallel()
	x := newSigninEnv(t)
	const owner, stranger = "owner@agents.example", "stranger@agents.example"

	// The agent: no credential.
	at := x.clock()
	p := x.provision(map[string]string{"name": "  Invoice agent  "}, "Invoice agent")
	d := x.wsDecide(p.key, "SHADOW", p.version)
	// It reads its own decisions.
	x.do("GET", pathDossiers+d.str("dossier_id"), p.key, nil, nil).want(t, http.StatusOK)

	// Nothing but deciding and reading decisions: no policy, no keys, no
	// integrations, no audit.
	for _, c := range []struct {
		method, path string
		body         any
		code         string
	}{
		{"POST", pathBundles, bundleJSON("agent-1", "ENFORCEMENT", 1000000), "INSUFFICIENT_SCOPE"},
		{"POST", pathPolicies, bundleJSON("agent-1", "ENFORCEMENT", 1000000), "INSUFFICIENT_SCOPE"},
		{"POST", pathBundles + "/" + p.version + "/activate", nil, "INSUFFICIENT_SCOPE"},
		{"GET", pathBundles, nil, "INSUFFICIENT_SCOPE"},
		{"POST", pathKeys(p.orgID), map[string]any{"scopes": []string{"org:*"}}, "PLATFORM_KEY_REQUIRED"},
		{"POST", pathAgentKeys, map[string]any{"kid": "agent-1", "public_jwk": bareJWK(mustKey(t, 90))}, "INSUFFICIENT_SCOPE"},
		{"POST", "/v1/orgs/" + p.orgID + "/integrations/WEBHOOK/connect", map[string]any{"url": "https://hooks.example/c"}, "INSUFFICIENT_SCOPE"},
		{"POST", pathSignalConnectors, map[string]any{"name": "feed"}, "INSUFFICIENT_SCOPE"},
		{"POST", pathMappingSessions, map[string]string{"org_id": p.orgID}, "INSUFFICIENT_SCOPE"},
		{"GET", signinPathLedger, nil, "INSUFFICIENT_SCOPE"},
		{"POST", pathSeal, map[string]any{}, "INSUFFICIENT_SCOPE"},
	} {
		x.do(c.method, c.path, p.key, c.body, nil).wantProblem(t, http.StatusForbidden, c.code)
	}
	// Nor does its key, or anything else but a session, claim.
	x.do("POST", wsPathClaim, p.key, map[string]string{"claim_code": p.code}, map[string]string{signinCSRF: "1"}).
		wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	x.do("POST", wsPathClaim, x.platform, map[string]string{"claim_code": p.code}, map[string]string{signinCSRF: "1"}).
		wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")

	// The owner: a new address, signed in by code, has no workspace yet.
	in := x.signIn(owner)
	if ids := signinWorkspaceIDs(t, in.view); len(ids) != 0 {
		t.Fatalf("a new address's workspaces: %v", ids)
	}
	before := x.ledgerOf(x.platform, p.orgID)
	// Without the CSRF header: refused, and nothing spent.
	x.as(in.secret, false, "POST", wsPathClaim, map[string]string{"claim_code": p.code}).
		wantProblem(t, http.StatusForbidden, "CSRF_HEADER_REQUIRED")
	x.as(in.secret, true, "POST", wsPathClaim, map[string]string{"claim_code": p.code + "x"}).
		wantProblem(t, http.StatusNotFound, "CLAIM_CODE_INVALID")
	if after := x.ledgerOf(x.platform, p.orgID); len(after) != len(before) {
		t.Fatalf("refused claims grew the ledger from %d to %d entries", len(before), len(after))
	}

	x.advance(time.Second)
	claimedAt := x.clock()
	c := x.claim(in.secret, p.code).want(t, http.StatusOK)
	signinWantMembers(t, c, "org_id", "api_key", "key_id", "scopes", "workspace")
	ownerKey := c.str("api_key")
	if c.str("org_id") != p.orgID || !strings.HasPrefix(ownerKey, "clr_org_") || ownerKey == p.key ||
		c.str("key_id") == "" || c.str("key_id") == p.keyID || !slices.Equal(c.strs("scopes"), []string{"org:*"}) ||
		c.str("workspace.org_id") != p.orgID || c.str("workspace.name") != "Invoice agent" {
		t.Fatalf("claim: %s", c)
	}
	if cc := c.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("an answer with a key's secret has Cache-Control %q, want no-store", cc)
	}
	if strings.Contains(string(c.Raw), p.code) || strings.Contains(string(c.Raw), p.key) {
		t.Fatalf("the claim answers the claim code or the agent's key: %s", c)
	}
	// The workspace is the owner's now.
	s := x.as(in.secret, false, "GET", signinPathSession, nil).want(t, http.StatusOK)
	if ids := signinWorkspaceIDs(t, s); !slices.Equal(ids, []string{p.orgID}) || s.str("workspaces.0.name") != "Invoice agent" {
		t.Fatalf("the owner's workspaces after the claim: %s", s)
	}

	// The owner's key publishes an ENFORCEMENT policy: decisions are
	// enforced, the agent's too (its key is kept, still decision-only).
	const own = "own-1"
	pub := x.publish(ownerKey, bundleJSON(own, "ENFORCEMENT", 1000)).want(t, http.StatusCreated)
	if pub.str("mode") != "ENFORCEMENT" || lookup(pub.JSON, "active") != true {
		t.Fatalf("publish with the owner's key: %s", pub)
	}
	if e := x.wsDecide(ownerKey, "ENFORCEMENT", own); e.str("outcome") != "ALLOW" {
		t.Fatalf("an enforced decision: %s", e)
	}
	x.wsDecide(p.key, "ENFORCEMENT", own)
	x.publish(p.key, bundleJSON("agent-2", "SHADOW", 1)).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")

	// Once: the same owner again mints nothing; another account's claim of
	// the spent code is the answer of an unknown code.
	entries := x.ledgerOf(ownerKey, p.orgID)
	again := x.claim(in.secret, p.code).wantProblem(t, http.StatusConflict, "WORKSPACE_ALREADY_CLAIMED")
	if hasMember(again.JSON, "api_key") {
		t.Fatalf("a second claim answers a key: %s", again)
	}
	other := x.signIn(stranger)
	spent := x.claim(other.secret, p.code).wantProblem(t, http.StatusNotFound, "CLAIM_CODE_INVALID")
	sameBut(t, "a code spent by another account and an unknown code", spent,
		x.claim(other.secret, wsClaimPrefix+strings.Repeat("A", 43)).wantProblem(t, http.StatusNotFound, "CLAIM_CODE_INVALID"))
	if ids := signinWorkspaceIDs(t, x.as(other.secret, false, "GET", signinPathSession, nil).want(t, http.StatusOK)); len(ids) != 0 {
		t.Fatalf("the stranger's workspaces after a refused claim: %v", ids)
	}
	x.as(other.secret, true, "POST", signinRevokePath(p.orgID), nil).wantProblem(t, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
	if after := x.ledgerOf(ownerKey, p.orgID); len(after) != len(entries) {
		t.Fatalf("refused claims grew the ledger from %d to %d entries: %v", len(entries), len(after), after[len(entries):])
	}

	// The ledger: provisioned (with the agent's key), claimed (with the
	// owner's key, issued in the same transaction), and it verifies.
	entries = x.ledgerOf(ownerKey, p.orgID)
	prov := wsEntry(t, entries, wsKindProvision)
	exp := at.Add(wsTTL).Format(time.RFC3339Nano)
	if prov["subject_id"] != p.orgID || prov["payload_digest"] != wsDigest(t, map[string]any{"key_id": p.keyID,
		"scopes": []string{"decision:write", "decision:read"}, "key_expires_at": exp, "claim_expires_at": exp,
		"at": at.Format(time.RFC3339Nano)}) {
		t.Fatalf("the provisioned entry %v does not record the agent's key %s", prov, p.keyID)
	}
	claimed := wsEntry(t, entries, wsKindClaimed)
	if claimed["subject_id"] != p.orgID || claimed["payload_digest"] != wsDigest(t, map[string]any{
		"account_id": in.view.str("account_id"), "key_id": c.str("key_id"), "at": claimedAt.Format(time.RFC3339Nano)}) {
		t.Fatalf("the claimed entry %v does not record account %s and key %s", claimed, in.view.str("account_id"), c.str("key_id"))
	}
	keys := 0
	for i, en := range entries {
		if en["kind"] == wsKindKeyCreated && en["subject_id"] == c.str("key_id") {
			keys++
			if i+1 >= len(entries) || entries[i+1]["kind"] != wsKindClaimed {
				t.Fatalf("the owner's key is not ledgered right before the claim: %v", entries)
			}
		}
	}
	if keys != 1 || signinCountKind(entries, wsKindKeyCreated) != 2 { // the agent's key and the owner's
		t.Fatalf("want the agent's and the owner's key created, once each: %v", entries)
	}
	if v := x.env.verify(ownerKey); lookup(v.JSON, "valid") != true {
		t.Fatalf("the claimed org's ledger does not verify: %s", v)
	}

	// The owner revokes the agent's key when they want, with the org-wide
	// revocation; the replacement decides.
	rv := x.as(in.secret, true, "POST", signinRevokePath(p.orgID), map[string]bool{"issue_replacement_key": true}).
		want(t, http.StatusOK)
	if !slices.Contains(rv.strs("revoked_key_ids"), p.keyID) || !slices.Contains(rv.strs("revoked_key_ids"), c.str("key_id")) {
		t.Fatalf("revocation after the claim: %s", rv)
	}
	x.do("POST", signinPathDecide, p.key, signinDecision, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	x.wsDecide(rv.str("replacement.api_key"), "ENFORCEMENT", own)

	// An empty or null name is the default one (the source's two other
	// starts of the hour).
	x.provision([]byte(`{"name":""}`), wsDefaultName)
	x.provision([]byte(`{"name":null}`), wsDefaultName)
}

// A provisional key is its own org's: it cannot read another workspace's
// dossier, decide for it or claim it; neither can the claimed owner's key.
func TestWorkspaceTenantIsolation(t *testing.T) {
	t.Parallel()
	x := newSigninEnv(t)
	a := x.provision(nil, wsDefaultName)
	b := x.provision([]byte(`{"name":"Workspace B"}`), "Workspace B")
	long := strings.Repeat("é", 200) // the longest name, in characters
	x.provision(map[string]string{"name": long}, long)
	if a.orgID == b.orgID || a.key == b.key || a.code == b.code {
		t.Fatalf("two provisional workspaces share something:\n%s\n%s", a.r, b.r)
	}
	da := x.wsDecide(a.key, "SHADOW", a.version)
	db := x.wsDecide(b.key, "SHADOW", b.version)
	headB := x.head(x.createKey(org{ID: b.orgID}, "audit:read"))

	for _, c := range []struct{ key, own, foreign string }{
		{a.key, da.str("dossier_id"), db.str("dossier_id")},
		{b.key, db.str("dossier_id"), da.str("dossier_id")},
	} {
		x.do("GET", pathDossiers+c.own, c.key, nil, nil).want(t, http.StatusOK)
		x.do("GET", pathDossiers+c.foreign, c.key, nil, nil).wantProblem(t, http.StatusNotFound, "DOSSIER_NOT_FOUND")
	}
	x.do("GET", pathDossierDec+db.str("decision_id"), a.key, nil, nil).wantProblem(t, http.StatusNotFound, "DOSSIER_NOT_FOUND")
	// A decision naming B's org with A's key.
	x.do("POST", signinPathDecide, a.key, `{"org_id":`+strconv.Quote(b.orgID)+`,"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":250}`, nil).
		wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")

	// A's owner gets A, and only A, with A's code.
	in := x.signIn("owner-a@agents.example")
	c := x.claim(in.secret, a.code).want(t, http.StatusOK)
	if c.str("org_id") != a.orgID {
		t.Fatalf("claim of A's code: %s", c)
	}
	x.do("GET", pathDossiers+db.str("dossier_id"), c.str("api_key"), nil, nil).wantProblem(t, http.StatusNotFound, "DOSSIER_NOT_FOUND")
	x.do("GET", signinPathLedger+"?org_id="+b.orgID, c.str("api_key"), nil, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	x.as(in.secret, true, "POST", signinRevokePath(b.orgID), nil).wantProblem(t, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
	if ids := signinWorkspaceIDs(t, x.as(in.secret, false, "GET", signinPathSession, nil).want(t, http.StatusOK)); !slices.Equal(ids, []string{a.orgID}) {
		t.Fatalf("A's owner's workspaces: %v", ids)
	}
	// B is untouched: its ledger did not move, its key decides in SHADOW,
	// its code still claims it.
	if h := x.head(x.createKey(org{ID: b.orgID}, "audit:read")); h != headB+1 { // the key just issued
		t.Fatalf("B's ledger moved from %d to %d", headB, h)
	}
	x.wsDecide(b.key, "SHADOW", b.version)
	if cb := x.claim(x.signIn("owner-b@agents.example").secret, b.code).want(t, http.StatusOK); cb.str("org_id") != b.orgID {
		t.Fatalf("claim of B's code: %s", cb)
	}
}

// A source starts 3 workspaces an hour: the fourth is 429
// TOO_MANY_WORKSPACES with Retry-After, and makes nothing; the window
// slides. Other sources have budgets of their own, and all sources
// together start 100 an hour.
func TestWorkspaceProvisionBudget(t *testing.T) {
	t.Parallel()
	x := newSigninEnv(t)
	start := x.clock()
	var made []wsProvisional
	for i := range wsMaxPerSource {
		made = append(made, x.provision(nil, wsDefaultName))
		if i < wsMaxPerSource-1 {
			x.advance(10 * time.Second)
		}
	}
	x.advance(5 * time.Second) // 25 s after the first
	r := x.do("POST", wsPathProvision, "", map[string]string{"name": "Fourth"}, nil).
		wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_WORKSPACES")
	if ra := r.Header.Get("Retry-After"); ra != strconv.Itoa(int((wsWindow-25*time.Second)/time.Second)) {
		t.Fatalf("Retry-After %q, want %d (until the first start leaves the hour)", ra, int((wsWindow-25*time.Second)/time.Second))
	}
	if hasMember(r.JSON, "api_key") || hasMember(r.JSON, "claim_code") || hasMember(r.JSON, "org_id") {
		t.Fatalf("a refused provisioning answers a workspace: %s", r)
	}
	// With no body, or a body: the same refusal; bad input is still 400
	// first.
	x.do("POST", wsPathProvision, "", nil, nil).wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_WORKSPACES")
	x.do("POST", wsPathProvision, "", `{"name":5}`, nil).wantProblem(t, http.StatusBadRequest, "WRONG_TYPE")
	// The three made still work.
	for _, p := range made {
		x.wsDecide(p.key, "SHADOW", p.version)
	}

	// Another source (a loopback address of its own) has its budget.
	other := x.from(t, "127.0.0.2")
	if other == nil {
		t.Log("127.0.0.2 is not usable here: the other sources' budgets are not checked")
	} else {
		for range wsMaxPerSource {
			wsCheckProvisional(t, other.do("POST", wsPathProvision, "", nil, nil).want(t, http.StatusCreated), x.clock(), wsDefaultName)
		}
		other.do("POST", wsPathProvision, "", nil, nil).wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_WORKSPACES")
	}

	// A second before the first start leaves the window: still refused;
	// then one start has room again, and only one.
	x.advance(start.Add(wsWindow).Sub(x.clock()) - time.Second)
	if r := x.do("POST", wsPathProvision, "", nil, nil).wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_WORKSPACES"); r.Header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q a second before the window has room, want 1", r.Header.Get("Retry-After"))
	}
	x.advance(time.Second)
	x.provision(nil, wsDefaultName)
	x.do("POST", wsPathProvision, "", nil, nil).wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_WORKSPACES")

	if other == nil {
		return
	}
	// All sources together: 100 an hour. The hour starts afresh; 33
	// sources start 3 each, a 34th its first, and then every source,
	// however fresh, is refused until the window slides.
	x.advance(wsWindow)
	n := 0
	for i := 0; n < wsMaxAllSources; i++ {
		src := x.from(t, "127.0.1."+strconv.Itoa(i+1))
		if src == nil {
			t.Fatalf("127.0.1.%d is not usable, though 127.0.0.2 is", i+1)
		}
		for j := 0; j < wsMaxPerSource && n < wsMaxAllSources; j++ {
			src.do("POST", wsPathProvision, "", nil, nil).want(t, http.StatusCreated)
			n++
		}
	}
	fresh := x.from(t, "127.0.2.1")
	r = fresh.do("POST", wsPathProvision, "", nil, nil).wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_WORKSPACES")
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > int(wsWindow/time.Second) {
		t.Fatalf("Retry-After %q of the global budget", r.Header.Get("Retry-After"))
	}
	x.do("POST", wsPathProvision, "", nil, nil).wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_WORKSPACES")
	x.advance(wsWindow)
	fresh.do("POST", wsPathProvision, "", nil, nil).want(t, http.StatusCreated)
}

// from is the env's server seen from the loopback address ip (a client
// whose connections start there), or nil when ip cannot be bound here.
func (x *signinEnv) from(t testing.TB, ip string) *env {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	probe, err := d.DialContext(context.Background(), "tcp", x.srv.Listener.Addr().String())
	if err != nil {
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			return nil
		}
		t.Fatalf("dial from %s: %v", ip, err)
	}
	probe.Close()
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	e := *x.env
	e.client = &http.Client{Transport: tr}
	return &e
}

// The key and the code are good for 72 hours: a second before, the key
// decides and the code claims; at 72 hours the key is 401 and the code is
// the answer of an unknown one. The owner's key does not expire.
func TestWorkspaceClaimWindow(t *testing.T) {
	t.Parallel()
	x := newSigninEnv(t)
	early := x.provision(nil, wsDefaultName)
	late := x.provision(nil, wsDefaultName)

	x.advance(wsTTL - time.Second)
	x.wsDecide(early.key, "SHADOW", early.version)
	x.wsDecide(late.key, "SHADOW", late.version)
	in := x.signIn("night-owl@agents.example")
	c := x.claim(in.secret, early.code).want(t, http.StatusOK)

	x.advance(time.Second)
	for _, p := range []wsProvisional{early, late} {
		x.do("POST", signinPathDecide, p.key, signinDecision, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	}
	expired := x.claim(in.secret, late.code).wantProblem(t, http.StatusNotFound, "CLAIM_CODE_INVALID")
	sameBut(t, "an expired code and an unknown one", expired,
		x.claim(in.secret, wsClaimPrefix+strings.Repeat("B", 43)).wantProblem(t, http.StatusNotFound, "CLAIM_CODE_INVALID"))
	// The claimed workspace's owner key works on; the claimed code, now
	// expired too, is no longer "already claimed" but unknown.
	x.wsDecide(c.str("api_key"), "SHADOW", early.version)
	x.claim(in.secret, early.code).wantProblem(t, http.StatusNotFound, "CLAIM_CODE_INVALID")
	if ids := signinWorkspaceIDs(t, x.as(in.secret, false, "GET", signinPathSession, nil).want(t, http.StatusOK)); !slices.Equal(ids, []string{early.orgID}) {
		t.Fatalf("workspaces after an expired claim: %v", ids)
	}
}

// Without a secrets key no claim code can be kept: 503
// SECRETS_NOT_CONFIGURED, and nothing is made; bad input is 400 first.
func TestWorkspaceProvisionWithoutSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	e.do("POST", wsPathProvision, "", nil, nil).wantProblem(t, http.StatusServiceUnavailable, "SECRETS_NOT_CONFIGURED")
	e.do("POST", wsPathProvision, "", `{"name":"Agent"}`, nil).wantProblem(t, http.StatusServiceUnavailable, "SECRETS_NOT_CONFIGURED")
	e.do("POST", wsPathProvision, "", `{"nom":"Agent"}`, nil).wantProblem(t, http.StatusBadRequest, "UNKNOWN_MEMBER")
	e.do("POST", wsPathClaim, "", `{"claim_code":"clr_clm_x"}`, map[string]string{signinCSRF: "1"}).
		wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
}
