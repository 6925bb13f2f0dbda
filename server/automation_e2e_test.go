package server_test

// The automation connector end to end: an automation platform registered by
// the operator sends the owner of a workspace to the authorization endpoint
// (OAuth 2.0 authorization code with PKCE S256), the owner signs in by an
// e-mail code (the real SMTP server of onboarding_e2e_test.go) and consents,
// and the platform trades the code for a credential scoped to automation and
// decisions. The owner's side is a client with a cookie jar that stops at
// every redirect, so each 303 is seen as sent; over Pebble or PostgreSQL (see
// openBackend), on the env's settable clock.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"mime"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Connector routes and settings under test.
const (
	acPathClients   = "/v1/platform/automation/clients"
	acPathAuthorize = "/v1/public/auth/automation/authorize"
	acPathToken     = "/v1/public/auth/automation/token"
	acPathMe        = "/v1/automation/me"
	acPathBootstrap = "/v1/automation/policy/bootstrap"

	acFormType = "application/x-www-form-urlencoded"

	// acClientName is markup, which every page must show as text.
	acClientName = `Flows <b>&</b> "Co"`
	// acRedirect has a query of its own, which the answers must keep.
	acRedirect = "https://automation.example/oauth/callback?app=1"
	acLoopback = "http://127.0.0.1:8765/cb"

	// acScope is the documented scope of an automation credential.
	acScope = "automation decision:write decision:read"
	// acStarter is the version of the starter policy.
	acStarter = "starter-1"
	// acCodeLifetime is the documented lifetime of an authorization code.
	acCodeLifetime = time.Minute

	// acOwnVersion is the version of an org's own policy.
	acOwnVersion = "own-1"
)

// acOwnBundle is a bundle of the org's own, enforced.
var acOwnBundle = bundleJSON(acOwnVersion, "ENFORCEMENT", 1000)

// acEnv is a sign-in env (the wall clock's now, settable) with the
// connector's helpers.
type acEnv struct {
	*signinEnv
}

func newACEnv(t testing.TB) *acEnv {
	t.Helper()
	return &acEnv{newSigninEnv(t)}
}

// register registers an automation platform with the platform key and
// returns its client id.
func (x *acEnv) register(name string, uris ...string) string {
	x.t.Helper()
	r := x.do("POST", acPathClients, x.platform, map[string]any{"name": name, "redirect_uris": uris}, nil).
		want(x.t, http.StatusCreated)
	signinWantMembers(x.t, r, "client_id", "name", "redirect_uris", "created_at")
	if r.str("client_id") == "" || r.str("name") != name || !slices.Equal(r.strs("redirect_uris"), uris) {
		x.t.Fatalf("register client: %s", r)
	}
	if at, err := time.Parse(time.RFC3339Nano, r.str("created_at")); err != nil || !at.Equal(x.clock()) {
		x.t.Fatalf("created_at %q, want %s: %v", r.str("created_at"), x.clock(), err)
	}
	return r.str("client_id")
}

// acBrowser is the owner's user agent: the env's server through a client
// with a cookie jar that follows no redirect.
type acBrowser struct {
	*env
	jar *cookiejar.Jar
}

func (x *acEnv) browser() *acBrowser {
	x.t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		x.t.Fatal(err)
	}
	b := *x.env
	b.client = &http.Client{Transport: x.client.Transport, Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &acBrowser{env: &b, jar: jar}
}

// login signs addr in on b by the code mailed to it; the jar keeps the
// session cookie.
func (x *acEnv) login(b *acBrowser, addr string) {
	x.t.Helper()
	b.do("POST", signinPathStart, "", map[string]string{"email": addr}, nil).want(x.t, http.StatusAccepted)
	b.do("POST", signinPathVerify, "", map[string]string{"email": addr, "otp_code": x.mail.lastCode(x.t, addr)}, nil).
		want(x.t, http.StatusOK)
	u, _ := url.Parse(x.srv.URL)
	if kept := b.jar.Cookies(u); len(kept) != 1 || kept[0].Name != signinCookie {
		x.t.Fatalf("the jar holds %v after signing in", kept)
	}
}

// authorize loads the authorization endpoint with q.
func (b *acBrowser) authorize(q url.Values) *result {
	b.t.Helper()
	return b.do("GET", acPathAuthorize+"?"+q.Encode(), "", nil, nil)
}

// consent posts the consent form as a browser does.
func (b *acBrowser) consent(form url.Values) *result {
	b.t.Helper()
	return b.do("POST", acPathAuthorize, "", form.Encode(), map[string]string{"Content-Type": acFormType})
}

// acPKCE is a client's code verifier and its S256 challenge.
type acPKCE struct {
	verifier, challenge string
}

func newACPKCE(t testing.TB) acPKCE {
	t.Helper()
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	v := base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(v))
	return acPKCE{verifier: v, challenge: base64.RawURLEncoding.EncodeToString(sum[:])}
}

// acQuery is an authorization request's query.
func acQuery(clientID, redirect, state string, p acPKCE) url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect}, "state": {state},
		"code_challenge": {p.challenge}, "code_challenge_method": {"S256"}}
}

// acEdit returns a copy of q changed by edit.
func acEdit(q url.Values, edit func(url.Values)) url.Values {
	c := url.Values{}
	for k, v := range q {
		c[k] = slices.Clone(v)
	}
	edit(c)
	return c
}

// acWantPage fails unless r is one of the connector's pages with status:
// HTML, not cached, under a policy that runs only the page's own nonce'd
// script and style, in no frame, sending no Referer, redirecting nowhere.
func acWantPage(t testing.TB, r *result, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("want a %d page: %s", status, r)
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "text/html" || !strings.EqualFold(params["charset"], "utf-8") {
		t.Fatalf("page Content-Type %q: %s", r.Header.Get("Content-Type"), r)
	}
	if loc := r.Header.Get("Location"); loc != "" {
		t.Fatalf("a page carries Location %q: %s", loc, r)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("page Cache-Control %q, want no-store", cc)
	}
	if xfo := r.Header.Get("X-Frame-Options"); xfo != "DENY" {
		t.Fatalf("page X-Frame-Options %q, want DENY", xfo)
	}
	if rp := r.Header.Get("Referrer-Policy"); rp != "no-referrer" {
		t.Fatalf("page Referrer-Policy %q, want no-referrer", rp)
	}
	csp := map[string]string{}
	for _, d := range strings.Split(r.Header.Get("Content-Security-Policy"), ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		csp[name] = value
	}
	nonce := strings.TrimSuffix(strings.TrimPrefix(csp["script-src"], "'nonce-"), "'")
	if csp["frame-ancestors"] != "'none'" || csp["default-src"] != "'none'" || csp["base-uri"] != "'none'" ||
		csp["connect-src"] != "'self'" || len(nonce) < 16 || csp["script-src"] != "'nonce-"+nonce+"'" ||
		csp["style-src"] != "'nonce-"+nonce+"'" {
		t.Fatalf("page Content-Security-Policy %q", r.Header.Get("Content-Security-Policy"))
	}
	for _, m := range acNonceRE.FindAllStringSubmatch(string(r.Raw), -1) {
		if html.UnescapeString(m[1]) != nonce {
			t.Fatalf("page nonce %q, the policy's %q", m[1], nonce)
		}
	}
	if strings.Contains(string(r.Raw), acClientName) {
		t.Fatalf("page shows the client's name as markup:\n%s", r.Raw)
	}
}

var (
	acNonceRE  = regexp.MustCompile(`nonce="([^"]*)"`)
	acHiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
	acRadioRE  = regexp.MustCompile(`<input type="radio" name="org_id" value="([^"]*)"( checked)?> ([^<]*)</label>`)
)

// acConsent is a consent page as a browser reads it.
type acConsent struct {
	hidden     url.Values
	workspaces []acWorkspace
}

type acWorkspace struct {
	orgID, name string
	checked     bool
}

func acParseConsent(t testing.TB, r *result) acConsent {
	t.Helper()
	acWantPage(t, r, http.StatusOK)
	c := acConsent{hidden: url.Values{}}
	for _, m := range acHiddenRE.FindAllStringSubmatch(string(r.Raw), -1) {
		c.hidden.Add(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
	}
	for _, m := range acRadioRE.FindAllStringSubmatch(string(r.Raw), -1) {
		c.workspaces = append(c.workspaces, acWorkspace{orgID: html.UnescapeString(m[1]), name: html.UnescapeString(m[3]),
			checked: m[2] != ""})
	}
	if len(c.hidden["csrf"]) != 1 || c.hidden.Get("csrf") == "" || !strings.Contains(string(r.Raw), `id="allow"`) ||
		!strings.Contains(string(r.Raw), `id="deny"`) {
		t.Fatalf("not a consent form:\n%s", r.Raw)
	}
	return c
}

// form is the form the browser posts: the hidden fields, the workspace and
// the button.
func (c acConsent) form(orgID, decision string) url.Values {
	f := acEdit(c.hidden, func(url.Values) {})
	f.Set("org_id", orgID)
	f.Set("decision", decision)
	return f
}

// acWantRedirect fails unless r is a 303 to redirect (its own query kept)
// that sends no Referer and is not cached; it returns the parameters added.
func acWantRedirect(t testing.TB, r *result, redirect string) url.Values {
	t.Helper()
	if r.Status != http.StatusSeeOther {
		t.Fatalf("want 303 to %s: %s", redirect, r)
	}
	loc, err := url.Parse(r.Header.Get("Location"))
	if err != nil {
		t.Fatalf("Location %q: %v", r.Header.Get("Location"), err)
	}
	base, _ := url.Parse(redirect)
	if loc.Scheme != base.Scheme || loc.Host != base.Host || loc.Path != base.Path || loc.Fragment != "" || loc.User != nil {
		t.Fatalf("Location %q is not the redirect URI %s", loc, redirect)
	}
	q := loc.Query()
	for k, v := range base.Query() {
		if !slices.Equal(q[k], v) {
			t.Fatalf("Location %q lost the redirect URI's %s=%v", loc, k, v)
		}
		delete(q, k)
	}
	if r.Header.Get("Cache-Control") != "no-store" || r.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("redirect headers Cache-Control %q Referrer-Policy %q", r.Header.Get("Cache-Control"), r.Header.Get("Referrer-Policy"))
	}
	return q
}

// acWantError fails unless the parameters q of an error redirect name code
// and state ("" for none) and carry no code.
func acWantError(t testing.TB, q url.Values, code, state string) {
	t.Helper()
	want := 2 // error, error_description
	if state != "" {
		want++
	}
	if q.Get("error") != code || q.Get("error_description") == "" || q.Get("state") != state || q.Has("code") || len(q) != want {
		t.Fatalf("error redirect %v, want error=%s state=%q", q, code, state)
	}
}

// code takes b, signed in, through the consent of the request (clientID,
// redirect, state, p) for orgID, and returns the authorization code.
func (x *acEnv) code(b *acBrowser, clientID, redirect, state string, p acPKCE, orgID string) string {
	x.t.Helper()
	c := acParseConsent(x.t, b.authorize(acQuery(clientID, redirect, state, p)))
	q := acWantRedirect(x.t, b.consent(c.form(orgID, "allow")), redirect)
	if len(q) != 2 || q.Get("state") != state || len(q.Get("code")) < 20 {
		x.t.Fatalf("allow redirects with %v, want a code and state %q", q, state)
	}
	return q.Get("code")
}

// exchange posts form to the token endpoint.
func (x *acEnv) exchange(form url.Values) *result {
	x.t.Helper()
	return x.do("POST", acPathToken, "", form.Encode(), map[string]string{"Content-Type": acFormType})
}

func acTokenForm(code, redirect, clientID, verifier string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
		"client_id": {clientID}, "code_verifier": {verifier}}
}

// acWantToken fails unless r is an automation credential for orgID, and
// returns its secret and key id.
func acWantToken(t testing.TB, r *result, orgID string) (string, string) {
	t.Helper()
	r.want(t, http.StatusOK)
	signinWantMembers(t, r, "access_token", "token_type", "scope", "org_id", "key_id")
	if !strings.HasPrefix(r.str("access_token"), "clr_org_") || r.str("token_type") != "Bearer" || r.str("scope") != acScope ||
		r.str("org_id") != orgID || r.str("key_id") == "" {
		t.Fatalf("token answer for org %s: %s", orgID, r)
	}
	if r.Header.Get("Cache-Control") != "no-store" || r.Header.Get("Pragma") != "no-cache" {
		t.Fatalf("token answer Cache-Control %q Pragma %q", r.Header.Get("Cache-Control"), r.Header.Get("Pragma"))
	}
	return r.str("access_token"), r.str("key_id")
}

// acWantOAuthError fails unless r is an RFC 6749 §5.2 error with code.
func acWantOAuthError(t testing.TB, r *result, code string) {
	t.Helper()
	if r.Status != http.StatusBadRequest {
		t.Fatalf("want 400 %s: %s", code, r)
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		t.Fatalf("token error Content-Type %q: %s", r.Header.Get("Content-Type"), r)
	}
	signinWantMembers(t, r, "error", "error_description")
	if r.str("error") != code || r.str("error_description") == "" || strings.Contains(string(r.Raw), "clr_") {
		t.Fatalf("want error %s: %s", code, r)
	}
	if r.Header.Get("Cache-Control") != "no-store" || r.Header.Get("Pragma") != "no-cache" {
		t.Fatalf("token error Cache-Control %q Pragma %q", r.Header.Get("Cache-Control"), r.Header.Get("Pragma"))
	}
}

// bundles lists orgID's policy bundles with key.
func (x *acEnv) bundles(key string) *result {
	x.t.Helper()
	return x.do("GET", pathBundles, key, nil, nil).want(x.t, http.StatusOK)
}

// acWantNoBundles fails unless the list is empty.
func acWantNoBundles(t testing.TB, list *result, what string) {
	t.Helper()
	if b, _ := list.JSON["bundles"].([]any); len(b) != 0 || lookup(list.JSON, "active_version") != nil {
		t.Fatalf("%s: want no bundle: %s", what, list)
	}
}

// ---------------------------------------------------------------------------

// The whole connection: a registered platform, the owner signed in on the
// sign-in page's routes, the consent page for two workspaces, the second
// one chosen, the starter policy installed there in SHADOW (and not in the
// other), the code traded for a credential that names the workspace,
// bootstraps nothing more, decides, and opens no other route.
func TestAutomationConnectorFlow(t *testing.T) {
	t.Parallel()
	x := newACEnv(t)
	const owner = "ada@analytical.example"
	const ws2Name = `Difference <Engines> & "Sons"`
	w1 := x.signUpNamed(owner, "Analytical Engines")
	w2 := x.signUpNamed(owner, ws2Name)
	clientID := x.register(acClientName, acRedirect, acLoopback)
	k1, _ := x.platformKey(w1.orgID, "policy:read", "audit:read")
	k2, _ := x.platformKey(w2.orgID, "policy:read", "audit:read")
	acWantNoBundles(t, x.bundles(k2), "a new workspace")

	p := newACPKCE(t)
	const state = `st "<ate>" & more`
	q := acQuery(clientID, acRedirect, state, p)
	b := x.browser()

	// Signed out: the sign-in page, which only posts to the sign-in routes.
	in := b.authorize(q)
	acWantPage(t, in, http.StatusOK)
	for _, want := range []string{`id="email"`, `id="send"`, `id="code"`, `id="verify"`, signinPathStart, signinPathVerify,
		html.EscapeString(acClientName)} {
		if !strings.Contains(string(in.Raw), want) {
			t.Fatalf("sign-in page lacks %q:\n%s", want, in.Raw)
		}
	}
	if strings.Contains(string(in.Raw), `name="csrf"`) || strings.Contains(string(in.Raw), `id="allow"`) {
		t.Fatalf("the signed-out page is a consent form:\n%s", in.Raw)
	}
	// A made-up session cookie is no session either.
	y := x.browser()
	u, _ := url.Parse(x.srv.URL)
	y.jar.SetCookies(u, []*http.Cookie{{Name: signinCookie, Value: signinSecret + strings.Repeat("A", 43)}})
	acWantPage(t, y.authorize(q), http.StatusOK)

	// Signed in: the consent page, for each workspace, the first chosen.
	x.login(b, owner)
	page := b.authorize(q)
	c := acParseConsent(t, page)
	if want := []acWorkspace{{w1.orgID, "Analytical Engines", true}, {w2.orgID, ws2Name, false}}; !slices.Equal(c.workspaces, want) {
		t.Fatalf("consent workspaces %+v, want %+v", c.workspaces, want)
	}
	for name, want := range map[string]string{"client_id": clientID, "redirect_uri": acRedirect, "state": state,
		"code_challenge": p.challenge, "code_challenge_method": "S256", "response_type": "code"} {
		if got := c.hidden[name]; len(got) != 1 || got[0] != want {
			t.Fatalf("consent field %s = %q, want %q", name, got, want)
		}
	}
	if !strings.Contains(string(page.Raw), owner) || !strings.Contains(string(page.Raw), html.EscapeString(acClientName)) {
		t.Fatalf("consent page names neither the owner nor the client:\n%s", page.Raw)
	}
	if strings.Contains(string(page.Raw), signinSecret) || len(page.Header.Values("Set-Cookie")) != 0 {
		t.Fatalf("consent page carries a session secret")
	}
	// Each page has its own nonce; the same request, the same form token.
	again := acParseConsent(t, b.authorize(q))
	if again.hidden.Get("csrf") != c.hidden.Get("csrf") {
		t.Fatalf("the consent token changed between two loads of one request")
	}
	if again := b.authorize(q); again.Header.Get("Content-Security-Policy") == page.Header.Get("Content-Security-Policy") {
		t.Fatalf("two pages share a nonce: %q", page.Header.Get("Content-Security-Policy"))
	}

	// Allow, for the second workspace.
	allowed := acWantRedirect(t, b.consent(c.form(w2.orgID, "allow")), acRedirect)
	code := allowed.Get("code")
	if len(allowed) != 2 || allowed.Get("state") != state || len(code) < 20 {
		t.Fatalf("allow redirects with %v", allowed)
	}

	// The chosen workspace has the starter policy, active, in SHADOW;
	// the other has none.
	list := x.bundles(k2)
	if list.str("org_id") != w2.orgID || list.str("active_version") != acStarter || list.str("bundles.0.version") != acStarter ||
		list.str("bundles.0.bundle_id") != "starter" || list.str("bundles.0.mode") != "SHADOW" ||
		lookup(list.JSON, "bundles.0.active") != true || lookup(list.JSON, "bundles.1") != nil {
		t.Fatalf("bundles after consent: %s", list)
	}
	acWantNoBundles(t, x.bundles(k1), "the workspace not chosen")
	entries := x.ledgerOf(k2, w2.orgID)
	if signinCountKind(entries, "policy.published") != 1 || signinCountKind(entries, "policy.activated") != 1 {
		t.Fatalf("ledger after consent: %v", entries)
	}

	// The code, with its verifier, for a credential of the workspace.
	tok, keyID := acWantToken(t, x.exchange(acTokenForm(code, acRedirect, clientID, p.verifier)), w2.orgID)
	entries = x.ledgerOf(k2, w2.orgID)
	if last := entries[len(entries)-1]; last["kind"] != "api_key.created" || last["subject_id"] != keyID {
		t.Fatalf("ledger after the exchange ends %v, want api_key.created %s", last, keyID)
	}

	me := x.do("GET", acPathMe, tok, nil, nil).want(t, http.StatusOK)
	signinWantMembers(t, me, "org_id", "key_id", "workspace")
	if me.str("org_id") != w2.orgID || me.str("key_id") != keyID || me.str("workspace.org_id") != w2.orgID ||
		me.str("workspace.name") != ws2Name {
		t.Fatalf("me: %s", me)
	}
	boot := x.do("POST", acPathBootstrap, tok, nil, nil).want(t, http.StatusOK)
	signinWantMembers(t, boot, "installed", "policy_version")
	if lookup(boot.JSON, "installed") != false || boot.str("policy_version") != acStarter {
		t.Fatalf("bootstrap after consent: %s", boot)
	}
	if l := x.bundles(k2); string(l.Raw) != string(list.Raw) {
		t.Fatalf("bootstrap changed the bundles:\n%s\n%s", list, l)
	}
	d := x.decide(tok, signinDecision)
	if d.str("policy_snapshot.policy_version") != acStarter || d.str("mode") != "SHADOW" {
		t.Fatalf("decision with the credential: %s", d)
	}

	// Nothing else: not the policies, the signal connectors, the ledger,
	// the platform.
	for _, rt := range []struct{ method, path, body string }{
		{"POST", pathBundles, bundleJSON("mine", "ENFORCEMENT", 1)},
		{"POST", pathBundles + "/" + acStarter + "/activate", "{}"},
		{"GET", pathBundles, ""},
		{"GET", pathSignalConnectors, ""},
		{"POST", pathSignalConnectors, `{"provider":"stripe"}`},
	} {
		var body any
		if rt.body != "" {
			body = rt.body
		}
		x.do(rt.method, rt.path, tok, body, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	}
	x.do("POST", "/v1/platform/orgs", tok, map[string]string{"name": "Mine"}, nil).wantProblem(t, http.StatusForbidden, "PLATFORM_KEY_REQUIRED")
	// And the connector's routes need the automation scope.
	x.do("GET", acPathMe, k2, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.do("POST", acPathBootstrap, k2, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.do("GET", acPathMe, "", nil, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	x.decide(tok, signinDecision)
}

// A code works once: a second exchange is refused and revokes the
// credential of the first, at once; two exchanges at once leave no
// credential that works.
func TestAutomationCodeReplayRevokes(t *testing.T) {
	t.Parallel()
	x := newACEnv(t)
	const owner = "replay@example.com"
	w := x.signUpNamed(owner, "Replayed")
	audit, _ := x.platformKey(w.orgID, "audit:read")
	clientID := x.register("Flows", acRedirect)
	b := x.browser()
	x.login(b, owner)

	p := newACPKCE(t)
	form := acTokenForm(x.code(b, clientID, acRedirect, "s1", p, w.orgID), acRedirect, clientID, p.verifier)
	tok, keyID := acWantToken(t, x.exchange(form), w.orgID)
	x.do("GET", acPathMe, tok, nil, nil).want(t, http.StatusOK) // used once: cached by the server
	x.decide(tok, signinDecision)

	acWantOAuthError(t, x.exchange(form), "invalid_grant")
	x.do("GET", acPathMe, tok, nil, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	x.do("POST", pathEvaluate, tok, signinDecision, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	entries := x.ledgerOf(audit, w.orgID)
	payload, err := json.Marshal(map[string]any{"at": x.clock().Format(time.RFC3339Nano), "by": "oauth_code_replayed",
		"revoked_key_ids": []string{keyID}})
	if err != nil {
		t.Fatal(err)
	}
	if last := entries[len(entries)-1]; last["kind"] != "credentials.revoked" || last["subject_id"] != w.orgID ||
		last["payload_digest"] != sha256Digest(payload) || signinCountKind(entries, "credentials.revoked") != 1 {
		t.Fatalf("ledger after the replay ends %v, want credentials.revoked of %s", last, payload)
	}
	// A third time: refused, nothing more to revoke.
	acWantOAuthError(t, x.exchange(form), "invalid_grant")
	if n := signinCountKind(x.ledgerOf(audit, w.orgID), "credentials.revoked"); n != 1 {
		t.Fatalf("%d revocations after a third presentation, want 1", n)
	}

	// Two exchanges of one code at once: one credential.
	p2 := newACPKCE(t)
	form2 := acTokenForm(x.code(b, clientID, acRedirect, "s2", p2, w.orgID), acRedirect, clientID, p2.verifier)
	var wg sync.WaitGroup
	results := make([]*result, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = x.send("POST", acPathToken, "", form2.Encode(), map[string]string{"Content-Type": acFormType})
		})
	}
	wg.Wait()
	var won string
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if r.Status == http.StatusOK {
			if won != "" {
				t.Fatalf("two credentials for one code: %s", r)
			}
			won, _ = acWantToken(t, r, w.orgID)
			continue
		}
		acWantOAuthError(t, r, "invalid_grant")
	}
	// A code presented twice issues nothing that lasts (RFC 6749 §4.1.2):
	// the exchange that lost revoked what the other issued, or the other
	// found the code replayed and revoked its own before answering.
	if won != "" {
		x.do("GET", acPathMe, won, nil, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	}
	acWantOAuthError(t, x.exchange(form2), "invalid_grant")
}

// PKCE: the authorization request needs an S256 challenge (anything else is
// sent back to the client as invalid_request, with its state); the token
// request the verifier of it. A refused exchange does not spend the code:
// it still works with the right verifier, client and redirect URI.
func TestAutomationPKCE(t *testing.T) {
	t.Parallel()
	x := newACEnv(t)
	const owner = "pkce@example.com"
	w := x.signUpNamed(owner, "Proofed")
	clientID := x.register("Flows", acRedirect, acLoopback)
	p := newACPKCE(t)
	q := acQuery(clientID, acRedirect, "pk", p)

	b := x.browser()
	for _, signedIn := range []bool{false, true} {
		if signedIn {
			x.login(b, owner)
		}
		for _, tc := range []struct {
			name        string
			edit        func(url.Values)
			code, state string
			redirect    string
		}{
			{"plain method", func(q url.Values) { q.Set("code_challenge_method", "plain"); q.Set("code_challenge", p.verifier) }, "invalid_request", "pk", acRedirect},
			{"plain method, S256 challenge", func(q url.Values) { q.Set("code_challenge_method", "plain") }, "invalid_request", "pk", acRedirect},
			{"no method", func(q url.Values) { q.Del("code_challenge_method") }, "invalid_request", "pk", acRedirect},
			{"lower-case method", func(q url.Values) { q.Set("code_challenge_method", "s256") }, "invalid_request", "pk", acRedirect},
			{"no challenge", func(q url.Values) { q.Del("code_challenge") }, "invalid_request", "pk", acRedirect},
			{"short challenge", func(q url.Values) { q.Set("code_challenge", p.challenge[:42]) }, "invalid_request", "pk", acRedirect},
			{"padded challenge", func(q url.Values) { q.Set("code_challenge", p.challenge+"=") }, "invalid_request", "pk", acRedirect},
			{"hex challenge", func(q url.Values) { q.Set("code_challenge", strings.Repeat("ab", 32)) }, "invalid_request", "pk", acRedirect},
			{"two challenges", func(q url.Values) { q.Add("code_challenge", p.challenge) }, "invalid_request", "pk", acRedirect},
			{"implicit grant", func(q url.Values) { q.Set("response_type", "token") }, "unsupported_response_type", "pk", acRedirect},
			{"no response_type", func(q url.Values) { q.Del("response_type") }, "invalid_request", "pk", acRedirect},
			{"no state", func(q url.Values) { q.Del("state") }, "invalid_request", "", acRedirect},
			{"state too long", func(q url.Values) { q.Set("state", strings.Repeat("s", 513)) }, "invalid_request", strings.Repeat("s", 513), acRedirect},
			{"the other redirect", func(q url.Values) { q.Set("redirect_uri", acLoopback); q.Del("code_challenge") }, "invalid_request", "pk", acLoopback},
		} {
			r := b.authorize(acEdit(q, tc.edit))
			if r.Status != http.StatusSeeOther {
				t.Fatalf("%s (signed in %v): %s", tc.name, signedIn, r)
			}
			acWantError(t, acWantRedirect(t, r, tc.redirect), tc.code, tc.state)
		}
	}
	acWantNoBundles(t, x.do("GET", pathBundles+"?org_id="+w.orgID, x.platform, nil, nil).want(t, http.StatusOK), "refused requests")

	code := x.code(b, clientID, acRedirect, "pk", p, w.orgID)
	good := acTokenForm(code, acRedirect, clientID, p.verifier)
	other := newACPKCE(t)
	for name, tc := range map[string]struct {
		edit func(url.Values)
		want string
	}{
		"another verifier":         {func(f url.Values) { f.Set("code_verifier", other.verifier) }, "invalid_grant"},
		"the challenge as plain":   {func(f url.Values) { f.Set("code_verifier", p.challenge) }, "invalid_grant"},
		"verifier, one more char":  {func(f url.Values) { f.Set("code_verifier", p.verifier+"A") }, "invalid_grant"},
		"verifier, case changed":   {func(f url.Values) { f.Set("code_verifier", strings.ToUpper(p.verifier)) }, "invalid_grant"},
		"no verifier":              {func(f url.Values) { f.Del("code_verifier") }, "invalid_request"},
		"short verifier":           {func(f url.Values) { f.Set("code_verifier", p.verifier[:42]) }, "invalid_request"},
		"verifier, bad characters": {func(f url.Values) { f.Set("code_verifier", p.verifier[:42]+"+") }, "invalid_request"},
		"verifier too long":        {func(f url.Values) { f.Set("code_verifier", strings.Repeat("a", 129)) }, "invalid_request"},
		"two verifiers":            {func(f url.Values) { f.Add("code_verifier", p.verifier) }, "invalid_request"},
		"another client":           {func(f url.Values) { f.Set("client_id", x.register("Other", acRedirect)) }, "invalid_grant"},
		"no client":                {func(f url.Values) { f.Del("client_id") }, "invalid_grant"},
		"the other redirect":       {func(f url.Values) { f.Set("redirect_uri", acLoopback) }, "invalid_grant"},
		"no redirect":              {func(f url.Values) { f.Del("redirect_uri") }, "invalid_grant"},
		"an unknown code":          {func(f url.Values) { f.Set("code", code[:len(code)-1]+"x") }, "invalid_grant"},
		"no code":                  {func(f url.Values) { f.Del("code") }, "invalid_request"},
		"two codes":                {func(f url.Values) { f.Add("code", code) }, "invalid_request"},
		"refresh grant":            {func(f url.Values) { f.Set("grant_type", "refresh_token") }, "unsupported_grant_type"},
		"no grant type":            {func(f url.Values) { f.Del("grant_type") }, "unsupported_grant_type"},
	} {
		r := x.exchange(acEdit(good, tc.edit))
		if r.Status != http.StatusBadRequest {
			t.Fatalf("%s: %s", name, r)
		}
		acWantOAuthError(t, r, tc.want)
	}
	// Not a form: refused as any API refuses a body it does not take.
	x.do("POST", acPathToken, "", `{"grant_type":"authorization_code"}`, nil).wantProblem(t, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE")

	// The code is still good.
	acWantToken(t, x.exchange(good), w.orgID)

	// A client that sends its verifier as the challenge (plain PKCE under
	// the S256 name): the request looks like any other, and the verifier
	// does not redeem the code.
	plain := acPKCE{verifier: p.verifier, challenge: p.verifier}
	pc := x.code(b, clientID, acRedirect, "plain", plain, w.orgID)
	acWantOAuthError(t, x.exchange(acTokenForm(pc, acRedirect, clientID, p.verifier)), "invalid_grant")
	acWantOAuthError(t, x.exchange(acTokenForm(pc, acRedirect, clientID, p.verifier)), "invalid_grant")
}

// The redirect URI is one the client registered, exactly: anything else,
// and an unknown client, is a 400 page that sends the browser nowhere and
// does not show the URI; a consent form for another request is refused.
func TestAutomationRedirectURIIsExact(t *testing.T) {
	t.Parallel()
	x := newACEnv(t)
	const owner = "exact@example.com"
	w := x.signUpNamed(owner, "Exacting")
	clientID := x.register("Flows", acRedirect, acLoopback)
	p := newACPKCE(t)
	q := acQuery(clientID, acRedirect, "ex", p)

	evil := []string{
		"https://automation.example/oauth/callback",            // prefix: the query dropped
		"https://automation.example/oauth/callback?app=1&x=2",  // suffix
		"https://automation.example/oauth/callback?app=12",     // suffix in the value
		"https://automation.example/oauth/callback/?app=1",     // trailing slash
		"https://automation.example/oauth/callbackx?app=1",     // longer path
		"https://automation.example/oauth/?app=1",              // shorter path
		"https://automation.example/OAuth/callback?app=1",      // path case
		"https://Automation.example/oauth/callback?app=1",      // host case
		"HTTPS://automation.example/oauth/callback?app=1",      // scheme case
		"http://automation.example/oauth/callback?app=1",       // scheme
		"https://automation.example:443/oauth/callback?app=1",  // explicit port
		"https://automation.example/oauth/callback?app=1#frag", // fragment
		"https://automation.example/oauth/callback?APP=1",      // query case
		"https://automation.example/oauth/callback?app=1&",     // trailing separator
		"https://automation.example.evil.example/oauth/callback?app=1",
		"https://evil.example/?https://automation.example/oauth/callback?app=1",
		"https://evil.example@automation.example/oauth/callback?app=1",
		"https://automation.example/oauth/callback%3Fapp=1",
		"https://automation.example/oauth/../oauth/callback?app=1",
		" https://automation.example/oauth/callback?app=1",
		"https://automation.example/oauth/callback?app=1 ",
		"http://127.0.0.1:8765/cb/",
		"http://127.0.0.1:8765/CB",
		"http://localhost:8765/cb",
		"http://[::1]:8765/cb",
		"http://127.0.0.1:8766/cb",
		"http://127.0.0.1/cb",
		"http://127.0.0.1:8765/cb?",
		"",
	}
	refused := func(b *acBrowser, qq url.Values, what string) *result {
		t.Helper()
		r := b.authorize(qq)
		acWantPage(t, r, http.StatusBadRequest)
		if !strings.Contains(string(r.Raw), `id="reason"`) || strings.Contains(string(r.Raw), "evil") ||
			strings.Contains(string(r.Raw), `name="csrf"`) {
			t.Fatalf("%s: the refusal page:\n%s", what, r.Raw)
		}
		return r
	}
	b := x.browser()
	for _, signedIn := range []bool{false, true} {
		if signedIn {
			x.login(b, owner)
		}
		for _, e := range evil {
			refused(b, acEdit(q, func(q url.Values) { q.Set("redirect_uri", e) }), "redirect "+e)
			// The defects that would otherwise go back to the client do not
			// make an unregistered URI one.
			refused(b, acEdit(q, func(q url.Values) { q.Set("redirect_uri", e); q.Set("response_type", "token") }), "redirect+token "+e)
		}
		refused(b, acEdit(q, func(q url.Values) { q.Del("redirect_uri") }), "no redirect")
		refused(b, acEdit(q, func(q url.Values) { q.Add("redirect_uri", acRedirect) }), "two redirects")
		refused(b, acEdit(q, func(q url.Values) { q.Set("client_id", signinNoOrg) }), "unknown client")
		refused(b, acEdit(q, func(q url.Values) { q.Set("client_id", "not-an-id") }), "malformed client")
		refused(b, acEdit(q, func(q url.Values) { q.Del("client_id") }), "no client")
		refused(b, acEdit(q, func(q url.Values) { q.Set("client_id", signinNoOrg); q.Del("code_challenge") }), "unknown client, no PKCE")
	}
	// Another client's redirect URI is not this one's.
	otherID := x.register("Other", "https://other.example/cb")
	refused(b, acEdit(q, func(q url.Values) { q.Set("redirect_uri", "https://other.example/cb") }), "another client's redirect")
	refused(b, acEdit(q, func(q url.Values) { q.Set("client_id", otherID) }), "this client's redirect for another")

	// The consent form is checked again: a registered redirect it was not
	// issued for is refused (its token is bound to the request), an
	// unregistered one is a 400 page.
	c := acParseConsent(t, b.authorize(q))
	swapped := c.form(w.orgID, "allow")
	swapped.Set("redirect_uri", acLoopback)
	acWantPage(t, b.consent(swapped), http.StatusForbidden)
	for _, e := range evil {
		f := c.form(w.orgID, "allow")
		f.Set("redirect_uri", e)
		acWantPage(t, b.consent(f), http.StatusBadRequest)
	}
	f := c.form(w.orgID, "allow")
	f.Set("client_id", otherID)
	acWantPage(t, b.consent(f), http.StatusBadRequest)
	acWantNoBundles(t, x.do("GET", pathBundles+"?org_id="+w.orgID, x.platform, nil, nil).want(t, http.StatusOK), "refused forms")

	// Both registered URIs work, each for its own code.
	for _, redirect := range []string{acRedirect, acLoopback} {
		pp := newACPKCE(t)
		code := x.code(b, clientID, redirect, "ok", pp, w.orgID)
		acWantToken(t, x.exchange(acTokenForm(code, redirect, clientID, pp.verifier)), w.orgID)
	}
}

// A code lives one minute, by the engine's clock.
func TestAutomationCodeExpires(t *testing.T) {
	t.Parallel()
	x := newACEnv(t)
	const owner = "late@example.com"
	w := x.signUpNamed(owner, "Tardy")
	clientID := x.register("Flows", acRedirect)
	b := x.browser()
	x.login(b, owner)
	pa, pb := newACPKCE(t), newACPKCE(t)
	a := acTokenForm(x.code(b, clientID, acRedirect, "a", pa, w.orgID), acRedirect, clientID, pa.verifier)
	bb := acTokenForm(x.code(b, clientID, acRedirect, "b", pb, w.orgID), acRedirect, clientID, pb.verifier)

	x.advance(acCodeLifetime - time.Millisecond)
	tok, _ := acWantToken(t, x.exchange(bb), w.orgID)
	x.advance(time.Millisecond)
	acWantOAuthError(t, x.exchange(a), "invalid_grant")
	x.advance(time.Hour)
	acWantOAuthError(t, x.exchange(a), "invalid_grant")
	// The expired code revoked nothing.
	x.do("GET", acPathMe, tok, nil, nil).want(t, http.StatusOK)
	// The used one presented long after its lifetime (found in a log, a
	// history) is refused and revokes nothing; within the replay window,
	// by its client, it revokes.
	acWantOAuthError(t, x.exchange(bb), "invalid_grant")
	x.do("GET", acPathMe, tok, nil, nil).want(t, http.StatusOK)
	pc := newACPKCE(t)
	cc := acTokenForm(x.code(b, clientID, acRedirect, "c", pc, w.orgID), acRedirect, clientID, pc.verifier)
	tok2, _ := acWantToken(t, x.exchange(cc), w.orgID)
	other := url.Values{}
	for k, v := range cc {
		other[k] = v
	}
	other.Set("client_id", "01a2117b-0000-7000-8000-000000000000")
	acWantOAuthError(t, x.exchange(other), "invalid_grant") // another client's replay revokes nothing
	x.do("GET", acPathMe, tok2, nil, nil).want(t, http.StatusOK)
	x.advance(acCodeLifetime + 9*time.Minute)
	acWantOAuthError(t, x.exchange(cc), "invalid_grant")
	x.do("GET", acPathMe, tok2, nil, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
}

// The consent form belongs to one signed-in session and one request:
// another session's token, none, a signed-out or missing cookie, another
// request's token are 403 pages; a workspace of another account is a 400
// page; none issues a code or installs anything. Deny goes back with
// access_denied.
func TestAutomationConsentForgery(t *testing.T) {
	t.Parallel()
	x := newACEnv(t)
	const owner, mallory = "owner@example.com", "mallory@example.com"
	w := x.signUpNamed(owner, "Owned")
	m := x.signUpNamed(mallory, "Mallory's")
	clientID := x.register("Flows", acRedirect)
	p := newACPKCE(t)
	q := acQuery(clientID, acRedirect, "cs", p)

	a := x.browser()
	x.login(a, owner)
	ca := acParseConsent(t, a.authorize(q))
	mb := x.browser()
	x.login(mb, mallory)
	cm := acParseConsent(t, mb.authorize(q))
	a2 := x.browser() // the owner's second session
	x.login(a2, owner)
	ca2 := acParseConsent(t, a2.authorize(q))
	other := acParseConsent(t, a.authorize(acEdit(q, func(q url.Values) { q.Set("state", "other") })))
	for _, tok := range []string{cm.hidden.Get("csrf"), ca2.hidden.Get("csrf"), other.hidden.Get("csrf")} {
		if tok == ca.hidden.Get("csrf") {
			t.Fatalf("two sessions or requests share a consent token")
		}
	}

	forged := func(what string, b *acBrowser, f url.Values) {
		t.Helper()
		r := b.consent(f)
		acWantPage(t, r, http.StatusForbidden)
		if strings.Contains(string(r.Raw), "code=") {
			t.Fatalf("%s: %s", what, r)
		}
	}
	withCSRF := func(csrf ...string) url.Values {
		f := ca.form(w.orgID, "allow")
		f["csrf"] = csrf
		return f
	}
	for _, decision := range []string{"allow", "deny"} {
		f := func(csrf ...string) url.Values { g := withCSRF(csrf...); g.Set("decision", decision); return g }
		forged("mallory's token", a, f(cm.hidden.Get("csrf")))
		forged("the owner's other session's token", a, f(ca2.hidden.Get("csrf")))
		forged("another request's token", a, f(other.hidden.Get("csrf")))
		forged("no token", a, f())
		forged("an empty token", a, f(""))
		forged("two tokens", a, f(ca.hidden.Get("csrf"), ca.hidden.Get("csrf")))
		forged("a token changed", a, f(ca.hidden.Get("csrf")[1:]+"A"))
		forged("mallory posting the owner's form", mb, f(ca.hidden.Get("csrf")))
		forged("no cookie", x.browser(), f(ca.hidden.Get("csrf")))
	}
	// A token for the request with another challenge: refused.
	swapped := ca.form(w.orgID, "allow")
	swapped.Set("code_challenge", newACPKCE(t).challenge)
	forged("another challenge", a, swapped)

	// The owner's own token for a workspace of mallory's: 400, nothing
	// there; and no workspace, or a made-up one.
	for _, org := range []string{m.orgID, signinNoOrg, "", "not-an-org"} {
		r := a.consent(ca.form(org, "allow"))
		acWantPage(t, r, http.StatusBadRequest)
	}
	// Mallory's own token for the owner's workspace: the same.
	acWantPage(t, mb.consent(cm.form(w.orgID, "allow")), http.StatusBadRequest)
	// Neither allow nor deny.
	for _, d := range []string{"", "ALLOW", "maybe"} {
		acWantPage(t, a.consent(ca.form(w.orgID, d)), http.StatusBadRequest)
	}
	// No starter policy anywhere: nothing was approved.
	for _, org := range []string{w.orgID, m.orgID} {
		acWantNoBundles(t, x.do("GET", pathBundles+"?org_id="+org, x.platform, nil, nil).want(t, http.StatusOK), "forged forms")
	}

	// Deny: back to the client with access_denied and the state; nothing
	// installed.
	acWantError(t, acWantRedirect(t, a.consent(ca.form(w.orgID, "deny")), acRedirect), "access_denied", "cs")
	acWantNoBundles(t, x.do("GET", pathBundles+"?org_id="+w.orgID, x.platform, nil, nil).want(t, http.StatusOK), "deny")

	// The genuine form is good, for the owner's own session.
	allowed := acWantRedirect(t, a.consent(ca.form(w.orgID, "allow")), acRedirect)
	acWantToken(t, x.exchange(acTokenForm(allowed.Get("code"), acRedirect, clientID, p.verifier)), w.orgID)
	// A signed-out session's form is not.
	in := x.signinEnv.signIn(owner)
	stale := x.browser()
	u, _ := url.Parse(x.srv.URL)
	stale.jar.SetCookies(u, []*http.Cookie{{Name: signinCookie, Value: in.secret}})
	cs := acParseConsent(t, stale.authorize(q))
	x.as(in.secret, true, "DELETE", signinPathSession, nil).want(t, http.StatusNoContent)
	forged("a signed-out session", stale, cs.form(w.orgID, "allow"))
}

// The connector never replaces an org's own policy: an active one stays
// active through the consent and the bootstrap, an inactive one stays
// inactive with no starter beside it, and a policy published after the
// starter stays active through a bootstrap.
func TestAutomationBootstrapKeepsOwnPolicy(t *testing.T) {
	t.Parallel()
	x := newACEnv(t)
	const owner = "own@example.com"
	active := x.signUpNamed(owner, "Own Active")
	staged := x.signUpNamed(owner, "Own Staged")
	later := x.signUpNamed(owner, "Own Later")
	clientID := x.register("Flows", acRedirect)
	keyOf := map[string]string{}
	for _, w := range []signinSignUp{active, staged, later} {
		keyOf[w.orgID], _ = x.platformKey(w.orgID, "policy:write", "audit:read")
	}
	x.do("POST", pathBundles, keyOf[active.orgID], acOwnBundle, nil).want(t, http.StatusCreated)
	x.do("POST", pathBundles+"?activate=false", keyOf[staged.orgID], acOwnBundle, nil).want(t, http.StatusCreated)
	b := x.browser()
	x.login(b, owner)

	connect := func(orgID string) string {
		t.Helper()
		p := newACPKCE(t)
		code := x.code(b, clientID, acRedirect, "own", p, orgID)
		tok, _ := acWantToken(t, x.exchange(acTokenForm(code, acRedirect, clientID, p.verifier)), orgID)
		return tok
	}
	published := func(orgID string) int {
		t.Helper()
		return signinCountKind(x.ledgerOf(keyOf[orgID], orgID), "policy.published")
	}

	// Active: consent and bootstrap keep it, decisions use it.
	before := x.bundles(keyOf[active.orgID])
	if before.str("active_version") != acOwnVersion {
		t.Fatalf("own bundle: %s", before)
	}
	tok := connect(active.orgID)
	for range 2 {
		boot := x.do("POST", acPathBootstrap, tok, nil, nil).want(t, http.StatusOK)
		if lookup(boot.JSON, "installed") != false || boot.str("policy_version") != acOwnVersion {
			t.Fatalf("bootstrap of an org with its own policy: %s", boot)
		}
	}
	if after := x.bundles(keyOf[active.orgID]); string(after.Raw) != string(before.Raw) {
		t.Fatalf("the connector changed the org's bundles:\n%s\n%s", before, after)
	}
	if n := published(active.orgID); n != 1 {
		t.Fatalf("%d policies published in the org, want its own only", n)
	}
	if d := x.decide(tok, signinDecision); d.str("policy_snapshot.policy_version") != acOwnVersion || d.str("mode") != "ENFORCEMENT" {
		t.Fatalf("decision with the credential: %s", d)
	}

	// Staged, not active: no starter published beside it.
	before = x.bundles(keyOf[staged.orgID])
	tok = connect(staged.orgID)
	boot := x.do("POST", acPathBootstrap, tok, nil, nil).want(t, http.StatusOK)
	d := x.decide(tok, signinDecision)
	if lookup(boot.JSON, "installed") != false || boot.str("policy_version") != d.str("policy_snapshot.policy_version") {
		t.Fatalf("bootstrap of an org with a staged policy: %s (decision %s)", boot, d)
	}
	if after := x.bundles(keyOf[staged.orgID]); string(after.Raw) != string(before.Raw) || published(staged.orgID) != 1 {
		t.Fatalf("the connector changed the org's bundles:\n%s\n%s", before, after)
	}

	// Later: the starter by consent, then the org's own; a bootstrap keeps
	// the own one active.
	tok = connect(later.orgID)
	x.do("POST", pathBundles, keyOf[later.orgID], acOwnBundle, nil).want(t, http.StatusCreated)
	before = x.bundles(keyOf[later.orgID])
	boot = x.do("POST", acPathBootstrap, tok, nil, nil).want(t, http.StatusOK)
	if lookup(boot.JSON, "installed") != false || boot.str("policy_version") != acOwnVersion ||
		before.str("active_version") != acOwnVersion {
		t.Fatalf("bootstrap after the org published its own: %s (bundles %s)", boot, before)
	}
	if after := x.bundles(keyOf[later.orgID]); string(after.Raw) != string(before.Raw) || published(later.orgID) != 2 {
		t.Fatalf("bootstrap changed the org's bundles:\n%s\n%s", before, after)
	}
}
