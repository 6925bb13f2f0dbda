package server_test

// Account sign-in end to end: an owner signs in by an e-mail code (mailed
// through the real SMTP server of onboarding_e2e_test.go), holds a session
// cookie, lists its workspaces and revokes every credential of one of them
// at once; over Pebble or PostgreSQL (see openBackend).

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/server"
)

// Sign-in routes, names and settings under test.
const (
	signinPathStart   = "/v1/public/auth/login/start"
	signinPathVerify  = "/v1/public/auth/login/verify"
	signinPathSession = "/v1/public/auth/session"
	signinPathLedger  = "/v1/protocol/audit/ledger"
	signinPathDecide  = "/v1/protocol/evaluate-decision"

	signinCookie = "clearance_session"
	signinCSRF   = "X-Clearance-CSRF"
	signinSecret = "clr_ses_"

	// signinSessionTTL is the documented lifetime of an account session.
	signinSessionTTL = 12 * time.Hour

	signinDecision = `{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":250}`
	// signinNoOrg is a well-formed org id no test creates.
	signinNoOrg = "01900000-0000-7000-8000-00000000beef"
)

func signinRevokePath(orgID string) string {
	return "/v1/public/auth/workspaces/" + orgID + "/revoke-credentials"
}

// signinEnv is a sign-up env whose clock starts at the wall clock's now: a
// cookie jar keeps a cookie by the wall clock, and the server derives the
// cookie's Max-Age from it too, while the session's end is the engine's.
type signinEnv struct {
	*signUpEnv
}

func newSigninEnv(t testing.TB) *signinEnv {
	t.Helper()
	x := newSignUpEnv(t)
	x.now.Store(time.Now().UTC().Truncate(time.Microsecond).UnixNano())
	return &signinEnv{x}
}

// signinSession is a signed-in browser: the cookie's secret and the
// answer of login/verify.
type signinSession struct {
	secret string
	view   *result
}

// signinSignUp is a verified sign-up with its grant's id too.
type signinSignUp struct {
	signedUp
	grantID string
}

// signUpNamed signs addr up for a workspace named orgName.
func (x *signinEnv) signUpNamed(addr, orgName string) signinSignUp {
	x.t.Helper()
	x.do("POST", pathRegisterStart, "", map[string]string{
		"owner_email": addr, "owner_name": "Ada Lovelace", "org_name": orgName}, nil).want(x.t, http.StatusAccepted)
	r := x.verify(addr, x.mail.lastCode(x.t, addr)).want(x.t, http.StatusOK)
	s := signinSignUp{signedUp{orgID: r.str("org_id"), grant: r.str("onboarding_grant"), accountID: r.str("account_id")}, r.str("grant_id")}
	if !strings.HasPrefix(s.grant, "clr_onb_") || s.orgID == "" || s.accountID == "" || s.grantID == "" {
		x.t.Fatalf("verify: %s", r)
	}
	return s
}

func (x *signinEnv) loginStart(addr string) *result {
	x.t.Helper()
	return x.do("POST", signinPathStart, "", map[string]string{"email": addr}, nil)
}

func (x *signinEnv) loginVerify(addr, code string) *result {
	x.t.Helper()
	return x.do("POST", signinPathVerify, "", map[string]string{"email": addr, "otp_code": code}, nil)
}

// signIn takes addr through login/start and login/verify.
func (x *signinEnv) signIn(addr string) signinSession {
	x.t.Helper()
	x.loginStart(addr).want(x.t, http.StatusAccepted)
	v := x.loginVerify(addr, x.mail.lastCode(x.t, addr)).want(x.t, http.StatusOK)
	ck := signinCookieOf(x.t, v)
	if !strings.HasPrefix(ck.Value, signinSecret) || len(ck.Value) < len(signinSecret)+20 {
		x.t.Fatalf("session cookie value %q", ck.Value)
	}
	if bytes.Contains(v.Raw, []byte(signinSecret)) {
		x.t.Fatalf("login/verify answers a session secret in its body: %s", v)
	}
	return signinSession{secret: ck.Value, view: v}
}

// as sends a request with the session secret as its cookie (none when
// secret is ""), with the CSRF header when csrf is set.
func (x *signinEnv) as(secret string, csrf bool, method, path string, body any) *result {
	x.t.Helper()
	h := map[string]string{}
	if secret != "" {
		h["Cookie"] = signinCookie + "=" + secret
	}
	if csrf {
		h[signinCSRF] = "1"
	}
	return x.do(method, path, "", body, h)
}

// platformKey issues an org key for orgID through the platform route and
// returns its secret and id.
func (x *signinEnv) platformKey(orgID string, scopes ...string) (string, string) {
	x.t.Helper()
	r := x.do("POST", "/v1/platform/orgs/"+orgID+"/api-keys", x.platform, map[string]any{"scopes": scopes}, nil).
		want(x.t, http.StatusCreated)
	if !strings.HasPrefix(r.str("api_key"), "clr_org_") || r.str("key_id") == "" || r.str("org_id") != orgID {
		x.t.Fatalf("platform key: %s", r)
	}
	return r.str("api_key"), r.str("key_id")
}

// ledgerOf returns every ledger entry of orgID, read with key (the
// platform key names the org by org_id).
func (x *signinEnv) ledgerOf(key, orgID string) []map[string]any {
	x.t.Helper()
	path := signinPathLedger + "?limit=1000"
	if key == x.platform {
		path += "&org_id=" + orgID
	}
	r := x.do("GET", path, key, nil, nil).want(x.t, http.StatusOK)
	if r.num("next_after_seq") > 0 {
		x.t.Fatalf("ledger of %s is longer than a page: %s", orgID, r)
	}
	list, _ := r.JSON["entries"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, v := range list {
		en := v.(map[string]any)
		if en["org_id"] != orgID {
			x.t.Fatalf("ledger of %s holds an entry of %v", orgID, en["org_id"])
		}
		out = append(out, en)
	}
	return out
}

// signinCountKind counts the entries of kind.
func signinCountKind(entries []map[string]any, kind string) int {
	n := 0
	for _, en := range entries {
		if en["kind"] == kind {
			n++
		}
	}
	return n
}

// signinCookieOf returns the one session cookie r sets.
func signinCookieOf(t testing.TB, r *result) *http.Cookie {
	t.Helper()
	var found []*http.Cookie
	for _, line := range r.Header.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		if err != nil {
			t.Fatalf("Set-Cookie %q: %v", line, err)
		}
		if c.Name == signinCookie || c.Name == server.CookieSessionSecure {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s cookies set, want 1: %v", len(found), signinCookie, r.Header.Values("Set-Cookie"))
	}
	return found[0]
}

// signinCookieAttrs returns the attributes of a Set-Cookie line, lower-cased
// names mapped to their values.
func signinCookieAttrs(line string) map[string]string {
	out := map[string]string{}
	parts := strings.Split(line, ";")
	for _, p := range parts[1:] {
		name, value, _ := strings.Cut(strings.TrimSpace(p), "=")
		out[strings.ToLower(name)] = value
	}
	return out
}

// signinWorkspaceIDs returns the org ids of an AccountView's workspaces, in order.
func signinWorkspaceIDs(t testing.TB, r *result) []string {
	t.Helper()
	list, ok := r.JSON["workspaces"].([]any)
	if !ok {
		t.Fatalf("no workspaces list: %s", r)
	}
	ids := make([]string, 0, len(list))
	for i := range list {
		ids = append(ids, r.str("workspaces."+strconv.Itoa(i)+".org_id"))
	}
	return ids
}

// signinWantMembers fails unless r's JSON object has exactly the members names.
func signinWantMembers(t testing.TB, r *result, names ...string) {
	t.Helper()
	if r.JSON == nil || len(r.JSON) != len(names) {
		t.Fatalf("want members %v: %s", names, r)
	}
	for _, n := range names {
		if _, ok := r.JSON[n]; !ok {
			t.Fatalf("want members %v: %s", names, r)
		}
	}
}

// ---------------------------------------------------------------------------

// An owner who signed up signs in by code: the secret travels only in an
// HttpOnly, SameSite=Lax cookie of twelve hours, which a cookie jar keeps
// and sends back, and the session lists every workspace of the address.
func TestSignInSessionCookie(t *testing.T) {
	t.Parallel()
	x := newSigninEnv(t)
	const owner = "ada@analytical.example"
	first := x.signUpNamed(owner, "Analytical Engines")
	second := x.signUpNamed(owner, "Difference Engines")
	if second.accountID != first.accountID || second.orgID == first.orgID {
		t.Fatalf("two sign-ups of one address: %+v %+v", first, second)
	}

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := *x.env // a browser: the env's server, a client with a cookie jar
	b.client = &http.Client{Transport: x.client.Transport, Jar: jar}

	b.do("POST", signinPathStart, "", map[string]string{"email": owner}, nil).want(t, http.StatusAccepted)
	msgs := x.mail.to(t, owner)
	if len(msgs) != 3 || !strings.Contains(strings.ToLower(msgs[2].subject), "sign-in") {
		t.Fatalf("%d messages to the owner, the last %q: want 3, the last a sign-in code", len(msgs), msgs[len(msgs)-1].subject)
	}
	issued := x.clock()
	v := b.do("POST", signinPathVerify, "", map[string]string{"email": owner, "otp_code": x.mail.lastCode(t, owner)}, nil).
		want(t, http.StatusOK)

	// The cookie.
	lines := v.Header.Values("Set-Cookie")
	if len(lines) != 1 {
		t.Fatalf("Set-Cookie %q, want one cookie", lines)
	}
	ck := signinCookieOf(t, v)
	attrs := signinCookieAttrs(lines[0])
	if !strings.HasPrefix(ck.Value, signinSecret) || len(ck.Value) < len(signinSecret)+20 {
		t.Fatalf("cookie value %q is not a session secret", ck.Value)
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Secure || ck.Domain != "" ||
		attrs["samesite"] != "Lax" || attrs["path"] != "/" {
		t.Fatalf("cookie attributes of %q: want HttpOnly; SameSite=Lax; Path=/, not Secure, no Domain", lines[0])
	}
	if _, ok := attrs["secure"]; ok {
		t.Fatalf("cookie %q is Secure over plain HTTP", lines[0])
	}
	ends := issued.Add(signinSessionTTL)
	if max := int(signinSessionTTL / time.Second); ck.MaxAge > max || ck.MaxAge < max-60 {
		t.Fatalf("cookie Max-Age %d, want about %d (12 h)", ck.MaxAge, max)
	}
	if !ck.Expires.Equal(ends.Truncate(time.Second)) {
		t.Fatalf("cookie Expires %s, want %s", ck.Expires, ends.Truncate(time.Second))
	}
	if at, err := time.Parse(time.RFC3339Nano, v.str("session_expires_at")); err != nil || !at.Equal(ends) {
		t.Fatalf("session_expires_at %q, want %s: %v", v.str("session_expires_at"), ends, err)
	}
	if cc := v.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("login/verify Cache-Control %q, want no-store", cc)
	}
	// The secret is in the cookie only: not in the body, no other header.
	if bytes.Contains(v.Raw, []byte(signinSecret)) || bytes.Contains(v.Raw, []byte(ck.Value[len(signinSecret):])) {
		t.Fatalf("login/verify body holds the session secret: %s", v)
	}
	for name, vals := range v.Header {
		if name != "Set-Cookie" && strings.Contains(strings.Join(vals, " "), signinSecret) {
			t.Fatalf("header %s holds the session secret: %q", name, vals)
		}
	}

	// The account and its two workspaces.
	signinWantMembers(t, v, "account_id", "email", "name", "workspaces", "session_expires_at")
	if v.str("account_id") != first.accountID || v.str("email") != owner || v.str("name") != "Ada Lovelace" {
		t.Fatalf("login/verify account: %s", v)
	}
	if ids := signinWorkspaceIDs(t, v); !slices.Equal(ids, []string{first.orgID, second.orgID}) {
		t.Fatalf("workspaces %v, want [%s %s]", ids, first.orgID, second.orgID)
	}
	for i, want := range []string{"Analytical Engines", "Difference Engines"} {
		p := "workspaces." + strconv.Itoa(i)
		if v.str(p+".name") != want || v.str(p+".paths.evaluate_decision") != signinPathDecide ||
			v.str(p+".paths.webhook_integration") != "/v1/orgs/"+v.str(p+".org_id")+"/integrations/WEBHOOK/connect" {
			t.Fatalf("workspace %d: %s", i, v)
		}
	}

	// The jar kept it, for this server, and sends it back.
	u, _ := url.Parse(x.srv.URL)
	if kept := jar.Cookies(u); len(kept) != 1 || kept[0].Name != signinCookie || kept[0].Value != ck.Value {
		t.Fatalf("the cookie jar holds %v", kept)
	}
	s := b.do("GET", signinPathSession, "", nil, nil).want(t, http.StatusOK)
	if bytes.Contains(s.Raw, []byte(signinSecret)) || len(s.Header.Values("Set-Cookie")) != 0 {
		t.Fatalf("session answer carries a secret: %s %v", s, s.Header.Values("Set-Cookie"))
	}
	if !bytes.Equal(s.Raw, v.Raw) {
		t.Fatalf("session answers another account than login/verify:\n%s\n%s", s, v)
	}
	// Without the cookie, nobody is signed in.
	x.do("GET", signinPathSession, "", nil, nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")

	// A workspace signed up for later shows in the live session.
	third := x.signUpNamed(owner, "Tabulating Machines")
	s = b.do("GET", signinPathSession, "", nil, nil).want(t, http.StatusOK)
	if ids := signinWorkspaceIDs(t, s); !slices.Equal(ids, []string{first.orgID, second.orgID, third.orgID}) ||
		s.str("workspaces.2.name") != "Tabulating Machines" {
		t.Fatalf("session after a third sign-up: %s", s)
	}

	// Behind an HTTPS public URL the same cookie is Secure.
	tls := httptest.NewServer(server.New(x.engine, server.Options{PublicURL: "https://clearance.example.com"}))
	t.Cleanup(tls.Close)
	h := *x.env
	h.srv, h.client = tls, tls.Client()
	h.do("POST", signinPathStart, "", map[string]string{"email": owner}, nil).want(t, http.StatusAccepted)
	hv := h.do("POST", signinPathVerify, "", map[string]string{"email": owner, "otp_code": x.mail.lastCode(t, owner)}, nil).
		want(t, http.StatusOK)
	if hc := signinCookieOf(t, hv); hc.Name != server.CookieSessionSecure || !hc.Secure || !hc.HttpOnly || hc.SameSite != http.SameSiteLaxMode || hc.Path != "/" ||
		hc.Value == ck.Value {
		t.Fatalf("cookie behind an HTTPS public URL: %v", hv.Header.Values("Set-Cookie"))
	}
}

// The owner revokes every credential of a workspace at once: the org keys
// (the bundle's and one from the platform route) and a live onboarding
// grant stop working at once, even where they were cached; the replacement
// works; the ledger records it; other orgs, and the owner's other
// workspace, are untouched. On PostgreSQL a second server on the same
// database refuses the revoked keys too.
func TestSignInRevokeOrgCredentials(t *testing.T) {
	t.Parallel()
	x := newSigninEnv(t)
	const owner = "grace@example.com"

	// Workspace 1: a live onboarding grant and an org key of the platform
	// route.
	w1 := x.signUpNamed(owner, "Compilers")
	x.advance(time.Second)
	k1, k1ID := x.platformKey(w1.orgID, "decision:write", "audit:read")
	// Workspace 2: the bundle's org key (the bundle revoked its grant) and
	// an org key of the platform route.
	w2 := x.signUpNamed(owner, "Navy Computation")
	x.advance(time.Second)
	b := x.do("POST", bundlePath(x.session(w2.grant, w2.orgID)), w2.grant, bundleBody, nil).want(t, http.StatusCreated)
	bKey, bKeyID := b.str("api_key"), b.str("key_id")
	if !strings.HasPrefix(bKey, "clr_org_") || bKeyID == "" {
		t.Fatalf("bundle: %s", b)
	}
	x.advance(time.Second)
	k2, k2ID := x.platformKey(w2.orgID, "org:*")
	// Another org of another owner.
	other := x.createOrg("Bystanders")

	// On PostgreSQL: a second server on the same database, which has seen
	// none of the credentials to be revoked.
	var peer *env
	if onPostgres(t) {
		st := openBackend(t, x.dbDir, x.clock)
		eng, err := clearance.Open(st, x.engineOpts)
		if err != nil {
			st.Close()
			t.Fatalf("open a second engine: %v", err)
		}
		p := *x.env
		p.store, p.engine, p.server = st, eng, server.New(eng, server.Options{})
		p.srv = httptest.NewServer(p.server)
		p.client = p.srv.Client()
		t.Cleanup(p.stop)
		peer = &p
		peer.decide(other.Key, signinDecision)
	}

	in := x.signIn(owner)
	x.advance(time.Second)
	// Every credential works first, just before: the org keys are in this
	// server's cache (for KeyCacheTTL) when they are revoked.
	x.session(w1.grant, w1.orgID)
	for _, k := range []string{k1, bKey, k2, other.Key} {
		x.decide(k, signinDecision)
	}
	at := x.clock()
	r := x.as(in.secret, true, "POST", signinRevokePath(w2.orgID), map[string]bool{"issue_replacement_key": true}).
		want(t, http.StatusOK)
	signinWantMembers(t, r, "org_id", "revoked_key_ids", "revoked_at", "replacement")
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("an answer with a key's secret has Cache-Control %q, want no-store", cc)
	}
	repl, replID := r.str("replacement.api_key"), r.str("replacement.key_id")
	if r.str("org_id") != w2.orgID || !slices.Equal(r.strs("revoked_key_ids"), []string{bKeyID, k2ID}) ||
		!strings.HasPrefix(repl, "clr_org_") || replID == "" || replID == bKeyID || replID == k2ID ||
		r.str("replacement.org_id") != w2.orgID || !slices.Equal(r.strs("replacement.scopes"), []string{"org:*"}) {
		t.Fatalf("revoke with a replacement: %s (want revoked [%s %s])", r, bKeyID, k2ID)
	}
	if got, err := time.Parse(time.RFC3339Nano, r.str("revoked_at")); err != nil || !got.Equal(at) {
		t.Fatalf("revoked_at %q, want %s: %v", r.str("revoked_at"), at, err)
	}

	// At once on this server, though cached: the old keys are dead ...
	for _, k := range []string{bKey, k2} {
		x.do("POST", signinPathDecide, k, signinDecision, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
		x.do("POST", pathMappingSessions, k, map[string]string{"org_id": w2.orgID}, nil).
			wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	}
	// ... the replacement reads the org's ledger, which ends with the
	// revocation (after the replacement's issue, in the same transaction),
	// and decides.
	entries := x.ledgerOf(repl, w2.orgID)
	n := len(entries)
	payload, err := json.Marshal(map[string]any{"at": r.str("revoked_at"), "by": w2.accountID,
		"replacement_key_id": replID, "revoked_key_ids": []string{bKeyID, k2ID}})
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 || signinCountKind(entries, "credentials.revoked") != 1 || entries[n-1]["kind"] != "credentials.revoked" ||
		entries[n-1]["subject_id"] != w2.orgID || entries[n-1]["payload_digest"] != sha256Digest(payload) ||
		entries[n-2]["kind"] != "api_key.created" || entries[n-2]["subject_id"] != replID {
		t.Fatalf("ledger of the revoked org ends %v, want api_key.created %s then credentials.revoked %s (digest %s)",
			entries[max(0, n-2):], replID, payload, sha256Digest(payload))
	}
	x.decide(repl, signinDecision)
	if v := x.env.verify(repl); lookup(v.JSON, "valid") != true {
		t.Fatalf("ledger of the revoked org does not verify: %s", v)
	}
	// Another org, and the owner's other workspace, are untouched.
	x.decide(other.Key, signinDecision)
	x.decide(k1, signinDecision)
	x.session(w1.grant, w1.orgID)

	// Workspace 1, without a body: the live grant and the key, no
	// replacement.
	x.advance(time.Second)
	x.decide(k1, signinDecision)
	r1 := x.as(in.secret, true, "POST", signinRevokePath(w1.orgID), nil).want(t, http.StatusOK)
	signinWantMembers(t, r1, "org_id", "revoked_key_ids", "revoked_at")
	if r1.str("org_id") != w1.orgID || !slices.Equal(r1.strs("revoked_key_ids"), []string{w1.grantID, k1ID}) {
		t.Fatalf("revoke without a replacement: %s (want revoked [%s %s])", r1, w1.grantID, k1ID)
	}
	x.do("POST", pathMappingSessions, w1.grant, map[string]string{"org_id": w1.orgID}, nil).
		wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	x.do("POST", signinPathDecide, k1, signinDecision, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	e1 := x.ledgerOf(x.platform, w1.orgID)
	payload1, _ := json.Marshal(map[string]any{"at": r1.str("revoked_at"), "by": w1.accountID,
		"revoked_key_ids": []string{w1.grantID, k1ID}})
	if last := e1[len(e1)-1]; signinCountKind(e1, "credentials.revoked") != 1 || last["kind"] != "credentials.revoked" ||
		last["payload_digest"] != sha256Digest(payload1) {
		t.Fatalf("ledger of workspace 1 ends %v, want credentials.revoked of %s", last, payload1)
	}
	// Again: no credential is left to revoke, but the revocation is
	// ledgered all the same (it closes what was opened before it: mapping
	// sessions, approved codes).
	again := x.as(in.secret, true, "POST", signinRevokePath(w1.orgID), []byte("{}")).want(t, http.StatusOK)
	if len(again.strs("revoked_key_ids")) != 0 || again.JSON["revoked_key_ids"] == nil || again.JSON["replacement"] != nil {
		t.Fatalf("a second revocation: %s", again)
	}
	if e := x.ledgerOf(x.platform, w1.orgID); len(e) != len(e1)+1 || e[len(e)-1]["kind"] != "credentials.revoked" {
		t.Fatalf("a second revocation: the ledger went from %d to %d entries, want one credentials.revoked more", len(e1), len(e))
	}
	x.decide(other.Key, signinDecision)

	if peer == nil {
		return
	}
	// The second server has never seen the revoked credentials: it refuses
	// them at once, and takes the replacement and the bystander's key.
	for _, k := range []string{bKey, k2, k1} {
		peer.do("POST", signinPathDecide, k, signinDecision, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	}
	peer.do("POST", pathMappingSessions, w1.grant, map[string]string{"org_id": w1.orgID}, nil).
		wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	peer.decide(repl, signinDecision)
	peer.decide(other.Key, signinDecision)
	// And the owner's session, opened on the first server, works there.
	if s := peer.do("GET", signinPathSession, "", nil, map[string]string{"Cookie": signinCookie + "=" + in.secret}).
		want(t, http.StatusOK); !slices.Equal(signinWorkspaceIDs(t, s), []string{w1.orgID, w2.orgID}) {
		t.Fatalf("session on the second server: %s", s)
	}
}

// A signed-in change needs the CSRF header, and only a session opens the
// account routes; a session ends when signed out or after twelve hours.
func TestSignInCSRFAndSessionEnd(t *testing.T) {
	t.Parallel()
	x := newSigninEnv(t)
	const owner = "csrf@example.com"
	w := x.signUpNamed(owner, "Guarded")
	key, _ := x.platformKey(w.orgID, "org:*")
	x.decide(key, signinDecision)
	in := x.signIn(owner)
	before := x.ledgerOf(key, w.orgID)

	// Without the header, or with another value: refused, before anything.
	for _, h := range []string{"", "0", "true", "11", "yes"} {
		hs := map[string]string{"Cookie": signinCookie + "=" + in.secret, signinCSRF: h}
		x.do("DELETE", signinPathSession, "", nil, hs).wantProblem(t, http.StatusForbidden, "CSRF_HEADER_REQUIRED")
		x.do("POST", signinRevokePath(w.orgID), "", map[string]bool{"issue_replacement_key": true}, hs).
			wantProblem(t, http.StatusForbidden, "CSRF_HEADER_REQUIRED")
		x.do("POST", signinRevokePath(w.orgID), "", nil, hs).wantProblem(t, http.StatusForbidden, "CSRF_HEADER_REQUIRED")
	}
	// Nothing changed: no entry, the session and the credentials work.
	if after := x.ledgerOf(key, w.orgID); len(after) != len(before) ||
		after[len(after)-1]["entry_hash"] != before[len(before)-1]["entry_hash"] {
		t.Fatalf("refused requests grew the ledger from %d to %d entries", len(before), len(after))
	}
	if s := x.as(in.secret, false, "GET", signinPathSession, nil).want(t, http.StatusOK); s.str("account_id") != w.accountID {
		t.Fatalf("session after refused changes: %s", s)
	}
	x.decide(key, signinDecision)
	x.session(w.grant, w.orgID)

	// A bearer key is no session, with the header or without.
	for _, k := range []string{key, w.grant, x.platform} {
		for _, csrf := range []string{"1", ""} {
			hs := map[string]string{signinCSRF: csrf}
			x.do("GET", signinPathSession, k, nil, hs).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
			x.do("DELETE", signinPathSession, k, nil, hs).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
			x.do("POST", signinRevokePath(w.orgID), k, nil, hs).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
		}
	}
	// Nor is a key, or a made-up secret, in the cookie.
	for _, v := range []string{key, signinSecret + strings.Repeat("A", 43), signinSecret, ""} {
		x.as(v, true, "GET", signinPathSession, nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
		x.as(v, true, "POST", signinRevokePath(w.orgID), nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	}
	x.decide(key, signinDecision)

	// Signing out ends this session (and clears the cookie), not another
	// of the same account, and revokes nothing.
	other := x.signIn(owner)
	out := x.as(in.secret, true, "DELETE", signinPathSession, nil).want(t, http.StatusNoContent)
	if len(out.Raw) != 0 {
		t.Fatalf("sign-out answers a body: %s", out)
	}
	cleared := signinCookieOf(t, out)
	if cleared.Value != "" || cleared.MaxAge >= 0 || cleared.Path != "/" || !cleared.HttpOnly ||
		cleared.SameSite != http.SameSiteLaxMode {
		t.Fatalf("sign-out does not clear the cookie: %v", out.Header.Values("Set-Cookie"))
	}
	x.as(in.secret, false, "GET", signinPathSession, nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	x.as(in.secret, true, "DELETE", signinPathSession, nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	x.as(in.secret, true, "POST", signinRevokePath(w.orgID), nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	x.as(other.secret, false, "GET", signinPathSession, nil).want(t, http.StatusOK)
	x.decide(key, signinDecision)

	// Twelve hours: good a second before, not at the end.
	x.advance(signinSessionTTL - time.Second)
	x.as(other.secret, false, "GET", signinPathSession, nil).want(t, http.StatusOK)
	x.advance(time.Second)
	x.as(other.secret, false, "GET", signinPathSession, nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	x.as(other.secret, true, "POST", signinRevokePath(w.orgID), nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	x.as(other.secret, true, "DELETE", signinPathSession, nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	x.decide(key, signinDecision) // the refusals revoked nothing
	// A fresh sign-in works again.
	x.as(x.signIn(owner).secret, false, "GET", signinPathSession, nil).want(t, http.StatusOK)
}

// A session acts on its own account's workspaces only; an address that
// never signed up signs in to an account without any.
func TestSignInWorkspaceOwnership(t *testing.T) {
	t.Parallel()
	x := newSigninEnv(t)
	a := x.signUpNamed("a@example.com", "Workspace A")
	bOrg := x.signUpNamed("b@example.com", "Workspace B")
	bKey, _ := x.platformKey(bOrg.orgID, "org:*")
	x.decide(bKey, signinDecision)
	before := x.ledgerOf(bKey, bOrg.orgID)

	sa := x.signIn("a@example.com")
	if ids := signinWorkspaceIDs(t, sa.view); !slices.Equal(ids, []string{a.orgID}) {
		t.Fatalf("A's workspaces %v, want [%s]", ids, a.orgID)
	}
	// B's org is no workspace of A's: the answer of an org that does not
	// exist, with a body or without.
	r := x.as(sa.secret, true, "POST", signinRevokePath(bOrg.orgID), map[string]bool{"issue_replacement_key": true}).
		wantProblem(t, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
	x.as(sa.secret, true, "POST", signinRevokePath(bOrg.orgID), nil).wantProblem(t, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
	sameBut(t, "another account's org and no org", r,
		x.as(sa.secret, true, "POST", signinRevokePath(signinNoOrg), map[string]bool{"issue_replacement_key": true}).
			wantProblem(t, http.StatusNotFound, "WORKSPACE_NOT_FOUND"))
	// B's credentials work, and B's ledger did not move.
	x.decide(bKey, signinDecision)
	x.session(bOrg.grant, bOrg.orgID)
	after := x.ledgerOf(bKey, bOrg.orgID)
	if signinCountKind(after, "credentials.revoked") != 0 || signinCountKind(after, "api_key.created") != signinCountKind(before, "api_key.created") {
		t.Fatalf("A's refused revocation left entries in B's ledger: %v", after[len(before):])
	}
	// A's own workspace it may revoke.
	own := x.as(sa.secret, true, "POST", signinRevokePath(a.orgID), nil).want(t, http.StatusOK)
	if !slices.Equal(own.strs("revoked_key_ids"), []string{a.grantID}) {
		t.Fatalf("A revoking its own workspace: %s", own)
	}
	x.decide(bKey, signinDecision)

	// An address that never signed up: an account with no workspace, which
	// owns nothing.
	const fresh = "newcomer@example.com"
	sn := x.signIn(fresh)
	signinWantMembers(t, sn.view, "account_id", "email", "workspaces", "session_expires_at")
	if id := sn.view.str("account_id"); id == "" || id == a.accountID || id == bOrg.accountID ||
		sn.view.str("email") != fresh || !bytes.Contains(sn.view.Raw, []byte(`"workspaces":[]`)) {
		t.Fatalf("sign-in of a new address: %s", sn.view)
	}
	s := x.as(sn.secret, false, "GET", signinPathSession, nil).want(t, http.StatusOK)
	if !bytes.Equal(s.Raw, sn.view.Raw) {
		t.Fatalf("session of the new address:\n%s\nwant\n%s", s, sn.view)
	}
	x.as(sn.secret, true, "POST", signinRevokePath(bOrg.orgID), nil).wantProblem(t, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
	x.as(sn.secret, true, "POST", signinRevokePath(a.orgID), nil).wantProblem(t, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
	x.decide(bKey, signinDecision)
	// Its sign-up later lands on the same account, in the live session.
	c := x.signUpNamed(fresh, "Late Start")
	s = x.as(sn.secret, false, "GET", signinPathSession, nil).want(t, http.StatusOK)
	if c.accountID != sn.view.str("account_id") || !slices.Equal(signinWorkspaceIDs(t, s), []string{c.orgID}) ||
		s.str("name") != "Ada Lovelace" {
		t.Fatalf("session after the new address signed up (account %s): %s", c.accountID, s)
	}
	x.as(sn.secret, true, "POST", signinRevokePath(c.orgID), nil).want(t, http.StatusOK)
}

// login/start answers the same bytes for an address with an account and
// one without, and mails a code to either; a sign-in code is no sign-up
// code, nor the reverse.
func TestSignInStartSameForKnownAndUnknown(t *testing.T) {
	t.Parallel()
	x := newSigninEnv(t)
	const known, unknown = "known@example.com", "unknown@example.com"
	first := x.signUpNamed(known, "Known Works")

	k := x.loginStart(known)
	u := x.loginStart(unknown)
	if k.Status != http.StatusAccepted || u.Status != k.Status || !bytes.Equal(k.Raw, u.Raw) ||
		k.Header.Get("Content-Type") != u.Header.Get("Content-Type") ||
		k.Header.Get("Cache-Control") != u.Header.Get("Cache-Control") ||
		len(k.Header.Values("Set-Cookie"))+len(u.Header.Values("Set-Cookie")) != 0 {
		t.Fatalf("login/start answers differ:\nknown:   %s %v\nunknown: %s %v", k, k.Header, u, u.Header)
	}
	signinWantMembers(t, k, "status", "expires_in_seconds")
	if k.str("status") != "code_sent" || k.num("expires_in_seconds") != signUpCodeTTL.Seconds() {
		t.Fatalf("login/start: %s", k)
	}
	mk, mu := x.mail.to(t, known), x.mail.to(t, unknown)
	if len(mk) != 2 || len(mu) != 1 {
		t.Fatalf("messages: %d to the known address (want 2), %d to the unknown (want 1)", len(mk), len(mu))
	}
	codeK, codeU := x.mail.lastCode(t, known), x.mail.lastCode(t, unknown)
	if mk[1].subject != mu[0].subject || strings.ReplaceAll(mk[1].text, codeK, "") != strings.ReplaceAll(mu[0].text, codeU, "") {
		t.Fatalf("sign-in messages differ by address:\n%q %q\n%q %q", mk[1].subject, mk[1].text, mu[0].subject, mu[0].text)
	}

	// A wrong code: one answer, known address or not.
	wrong := x.loginVerify(known, wrongCode(t, codeK, 0)).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID")
	sameBut(t, "a wrong sign-in code of a known and of an unknown address", wrong,
		x.loginVerify(unknown, wrongCode(t, codeU, 0)).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID"))
	sameBut(t, "a wrong sign-in code and one for an address that asked none", wrong,
		x.loginVerify("nobody@example.com", codeK).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID"))

	// A sign-up code of the known address, pending with its sign-in code:
	// neither opens the other's route.
	x.start(known).want(t, http.StatusAccepted)
	codeR := x.mail.lastCode(t, known)
	for tries := 0; codeR == codeK; tries++ { // one chance in a million
		if tries == 3 {
			t.Fatal("the same code three times over")
		}
		x.start(known).want(t, http.StatusAccepted)
		codeR = x.mail.lastCode(t, known)
	}
	sameBut(t, "a wrong sign-in code and a sign-up code", wrong,
		x.loginVerify(known, codeR).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID"))
	x.verify(known, codeK).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID")

	// Each code works on its own route, once.
	vk := x.loginVerify(known, codeK).want(t, http.StatusOK)
	if vk.str("account_id") != first.accountID || !slices.Equal(signinWorkspaceIDs(t, vk), []string{first.orgID}) {
		t.Fatalf("known address signed in: %s", vk)
	}
	sameBut(t, "a wrong sign-in code and a used one", wrong,
		x.loginVerify(known, codeK).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID"))
	vu := x.loginVerify(unknown, codeU).want(t, http.StatusOK)
	if vu.str("account_id") == "" || vu.str("account_id") == first.accountID || len(signinWorkspaceIDs(t, vu)) != 0 {
		t.Fatalf("unknown address signed in: %s", vu)
	}
	if v := x.verify(known, codeR).want(t, http.StatusOK); v.str("account_id") != first.accountID {
		t.Fatalf("sign-up code after the sign-in: %s", v)
	}
}
