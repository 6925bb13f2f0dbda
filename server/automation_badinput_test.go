package server_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/connector"
	"github.com/clearancehq/clearance/onboarding"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/tenant"
)

// answerKind is what a refusal is when it is not a problem: the automation
// connector answers a browser with pages and redirects, and its token
// endpoint with RFC 6749 error objects (badCase.answer).
type answerKind int

const (
	answerProblem answerKind = iota // application/problem+json, the default
	// answerPage: a text/html page that sends nothing anywhere (no
	// Location), may not be framed and is not cached.
	answerPage
	// answerOAuth: 400 application/json {"error", "error_description"}
	// (RFC 6749 §5.2), error one of badCase.want.
	answerOAuth
	// answerRedirect: 303 back to badCase.redirectTo with error (one of
	// badCase.want), error_description and badCase.state, never a code
	// (RFC 6749 §4.1.2.1).
	answerRedirect
)

// formType is the Content-Type of the connector's form routes.
const formType = "application/x-www-form-urlencoded"

// checkAnswer asserts a refusal that is not a problem (check has asserted
// what every refusal has: no 5xx, no authorization, the request id).
func (s *badSuite) checkAnswer(t *testing.T, c badCase, res *result, what string) {
	t.Helper()
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	loc := res.Header.Get("Location")
	if res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: Cache-Control %q, want no-store: %s", what, res.Header.Get("Cache-Control"), res)
	}
	switch c.answer {
	case answerPage:
		s.byCode["(text/html page)"]++
		if mt != "text/html" || loc != "" || (res.Status != http.StatusBadRequest && res.Status != http.StatusForbidden) ||
			res.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
			!strings.Contains(string(res.Raw), `id="reason"`) {
			t.Errorf("%s: want the error page (400 or 403 text/html, no Location, not framed): %s %v", what, res, res.Header)
		}
	case answerOAuth:
		code := res.str("error")
		s.byCode["(oauth) "+code]++
		if mt != "application/json" || res.Status != http.StatusBadRequest || len(res.JSON) != 2 || res.str("error_description") == "" ||
			!slices.Contains(c.want, code) {
			t.Errorf("%s: want a 400 OAuth error %v: %s", what, c.want, res)
		}
	case answerRedirect:
		u, err := url.Parse(loc)
		if err != nil || res.Status != http.StatusSeeOther {
			t.Errorf("%s: want a 303 back to %s: %s %v", what, c.redirectTo, res, res.Header)
			return
		}
		q := u.Query()
		code := q.Get("error")
		s.byCode["(redirect) "+code]++
		if !slices.Contains(c.want, code) || len(q["error"]) != 1 || q.Get("error_description") == "" || q.Has("code") ||
			q.Get("state") != c.state || (c.state == "" && q.Has("state")) || res.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: want error %v and state %q in the redirect, no code: %s", what, c.want, shorten(c.state), shorten(loc))
		}
		// The registered URI, its own query kept, plus the error.
		for _, k := range []string{"error", "error_description", "state"} {
			q.Del(k)
		}
		u.RawQuery = q.Encode()
		want, _ := url.Parse(c.redirectTo)
		want.RawQuery = want.Query().Encode()
		if u.String() != want.String() {
			t.Errorf("%s: redirected to %s, want the registered %s", what, shorten(loc), c.redirectTo)
		}
	}
}

// redirectsWithCode reports whether an answer sends the browser somewhere
// with an authorization code.
func redirectsWithCode(res *result) bool {
	if res.Status < 300 || res.Status > 399 {
		return false
	}
	u, err := url.Parse(res.Header.Get("Location"))
	return err == nil && u.Query().Has("code")
}

// formCases are the bad bodies every form route refuses before reading
// its fields: other content types (JSON included) and oversize bodies.
func (s *badSuite) formCases(q req) []badCase {
	var out []badCase
	media := func(name, ct, body string) {
		c := s.variant(q, catMedia, name, body, "UNSUPPORTED_MEDIA_TYPE").with("Content-Type", ct) // "": none
		c.status = http.StatusUnsupportedMediaType
		out = append(out, c)
	}
	fields, err := url.ParseQuery(q.body)
	if err != nil {
		s.t.Fatalf("%s: the accepted body is not a form: %v", q.path, err)
	}
	obj := map[string]string{}
	for k := range fields {
		obj[k] = fields.Get(k)
	}
	asJSON, _ := json.Marshal(obj)
	media("no Content-Type", "", q.body)
	media("application/json, the fields as a JSON object", "application/json", string(asJSON))
	media("application/json, the form", "application/json", q.body)
	for _, ct := range []string{"text/plain", "multipart/form-data; boundary=x", "application/x-www-form-urlencodedx",
		"application/x-www-form", "application/x-www-form-urlencoded;;", "application/*", "*/*", "form", "application/problem+json"} {
		media(ct, ct, q.body)
	}
	oversize := func(name string, size int, chunked bool) {
		c := s.variant(q, catOversize, name, q.body+"&zz_pad="+strings.Repeat("a", size-len(q.body)-len("&zz_pad=")), "BODY_TOO_LARGE")
		c.chunked, c.status = chunked, http.StatusRequestEntityTooLarge
		out = append(out, c)
	}
	oversize("1 MiB + 1 byte", server.DefaultMaxBodyBytes+1, false)
	oversize("1 MiB + 1 byte, chunked", server.DefaultMaxBodyBytes+1, true)
	oversize("4 MiB, chunked", 4<<20, true)
	return out
}

// automationArgs are what the connector's specs take from the sign-up ones.
type automationArgs struct {
	code   func(addr string) string                // the newest code mailed to addr
	signUp func(addr string) (grant, orgID string) // through register/start and register/verify
}

// automationSpecs are the bad-input specs of the automation connector.
// Before the battery it builds, through the public routes:
//
//   - two registered clients (the platform key): A with an https redirect
//     URI that has a query of its own and a loopback one, B with another;
//   - an owner (signed up, so with a workspace) signed in twice: a live
//     session (the accepted consent's, and most cases') and one signed
//     out; and another account with a workspace and a live session;
//   - the consent page's csrf tokens of these sessions for one request, of
//     the live session for another request, and for client B;
//   - authorization codes, each from posting the consent form: the
//     accepted exchange's; one exchanged for the credential of the
//     automation routes' accepted requests; one exchanged and replayed
//     (its credential revoked); one issued more than a minute ago
//     (expired); one of client B; and one the token route's late step
//     exchanges and replays, revoking its credential after the battery.
//
// Refusals change nothing, with one exception by design: a code presented
// again revokes the credential it was exchanged for. The battery only
// replays a code whose credential is revoked already (a no-op); the live
// replay runs in the revoking phase, on a code of its own.
func (s *badSuite) automationSpecs(a automationArgs) map[string]routeSpec {
	t, x := s.t, s.x
	const (
		pathClients   = "/v1/platform/automation/clients"
		pathAuthorize = "/v1/public/auth/automation/authorize"
		pathToken     = "/v1/public/auth/automation/token"
		pathMe        = "/v1/automation/me"
		pathBootstrap = "/v1/automation/policy/bootstrap"

		redirect = "https://automation.example/oauth/callback?app=1" // client A's, with a query of its own
		loopback = "http://127.0.0.1:8765/cb"                        // client A's other
		otherURI = "https://other-automation.example/cb"             // client B's
		verifier = "badinput.verifier-0123456789_abcdefghijklmnopqrstuvwxyz~"
		state    = "st-1"
	)
	sum := sha256.Sum256([]byte(verifier))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])
	cookie := func(secret string) string { return server.CookieSession + "=" + secret }
	client := func(body string) string {
		t.Helper()
		r := x.req(t, "POST", pathClients, x.platform, body, nil).want(t, http.StatusCreated)
		if r.str("client_id") == "" || r.str("created_at") == "" {
			t.Fatalf("register client: %s", r)
		}
		return r.str("client_id")
	}
	clientA := client(`{"name":"Flows","redirect_uris":[` + lit(redirect) + `,` + lit(loopback) + `]}`)
	clientB := client(`{"name":"Other Flows","redirect_uris":[` + lit(otherURI) + `]}`)
	// A bad redirect URI is named by its index.
	for _, c := range []struct{ body, field string }{
		{`{"name":"F","redirect_uris":["http://automation.example/cb"]}`, "redirect_uris[0]"},
		{`{"name":"F","redirect_uris":[` + lit(redirect) + `,` + lit(loopback) + `,"https://automation.example/cb#f"]}`, "redirect_uris[2]"},
		{`{"name":"F","redirect_uris":[]}`, "redirect_uris"},
	} {
		r := x.req(t, "POST", pathClients, x.platform, c.body, nil).wantProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
		if f, _ := lookup(r.JSON, "errors").([]any); len(f) != 1 || lookup(f[0].(map[string]any), "field") != c.field {
			t.Fatalf("register client %s: want errors[].field %s: %s", c.body, c.field, r)
		}
	}

	params := func(clientID, redirectURI, st string) url.Values {
		return url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirectURI}, "state": {st},
			"code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	}
	const drop = "\x00"                                   // a value for with: the field is removed
	with := func(v url.Values, kv ...string) url.Values { // a copy with fields set (name, value, …)
		out := url.Values{}
		for k, vs := range v {
			out[k] = slices.Clone(vs)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == drop {
				delete(out, kv[i])
				continue
			}
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	signIn := func(addr string) string {
		t.Helper()
		x.req(t, "POST", "/v1/public/auth/login/start", "", `{"email":`+lit(addr)+`}`, nil).want(t, http.StatusAccepted)
		r := x.req(t, "POST", "/v1/public/auth/login/verify", "", `{"email":`+lit(addr)+`,"otp_code":`+lit(a.code(addr))+`}`, nil).
			want(t, http.StatusOK)
		for _, c := range (&http.Response{Header: r.Header}).Cookies() {
			if c.Name == server.CookieSession && c.Value != "" {
				return c.Value
			}
		}
		t.Fatalf("login/verify sets no session cookie: %s", r)
		return ""
	}
	csrfField := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	consentPage := func(secret string, p url.Values) string { // the page's csrf token
		t.Helper()
		r := x.req(t, "GET", pathAuthorize+"?"+p.Encode(), "", nil, map[string]string{"Cookie": cookie(secret)}).want(t, http.StatusOK)
		m := csrfField.FindStringSubmatch(string(r.Raw))
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "text/html" || m == nil {
			t.Fatalf("consent page: %s", r)
		}
		return m[1]
	}
	formHeaders := func(secret string) map[string]string {
		h := map[string]string{"Content-Type": formType}
		if secret != "" {
			h["Cookie"] = cookie(secret)
		}
		return h
	}
	post := func(path string, body string, headers map[string]string) *result {
		t.Helper()
		return s.send(t, badCase{category: "setup", name: path, method: "POST", path: path, body: body, hasBody: true, headers: headers})
	}
	consentForm := func(p url.Values, csrf, orgID, decision string) url.Values {
		return with(p, "csrf", csrf, "org_id", orgID, "decision", decision)
	}
	// consent allows p for orgID and returns the code of the redirect.
	consent := func(secret string, p url.Values, csrf, orgID string) string {
		t.Helper()
		r := post(pathAuthorize, consentForm(p, csrf, orgID, "allow").Encode(), formHeaders(secret))
		u, err := url.Parse(r.Header.Get("Location"))
		if r.Status != http.StatusSeeOther || err != nil || u.Query().Get("code") == "" || u.Query().Get("state") != p.Get("state") {
			t.Fatalf("consent: %s %v", r, r.Header)
		}
		return u.Query().Get("code")
	}
	tokenForm := func(code string) url.Values {
		return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "client_id": {clientA},
			"code_verifier": {verifier}}
	}
	exchange := func(code, orgID string) string {
		t.Helper()
		r := x.req(t, "POST", pathToken, "", tokenForm(code).Encode(), formHeaders("")).want(t, http.StatusOK)
		tok := r.str("access_token")
		if !strings.HasPrefix(tok, tenant.PrefixOrg) || r.str("token_type") != "Bearer" || r.str("org_id") != orgID ||
			r.str("scope") != "automation decision:write decision:read" || r.Header.Get("Cache-Control") != "no-store" ||
			r.Header.Get("Pragma") != "no-cache" {
			t.Fatalf("token: %s %v", r, r.Header)
		}
		return tok
	}
	replayed := func(code string) {
		t.Helper()
		r := x.req(t, "POST", pathToken, "", tokenForm(code).Encode(), formHeaders("")).want(t, http.StatusBadRequest)
		if r.str("error") != "invalid_grant" {
			t.Fatalf("replayed code: %s", r)
		}
	}

	// The owner and another account, each with a workspace.
	const ownerAddr, otherAddr = "badinput-automation-owner@example.com", "badinput-automation-other@example.com"
	ownerGrant, ws := a.signUp(ownerAddr)
	live := signIn(ownerAddr)
	ended := signIn(ownerAddr)
	_, otherWS := a.signUp(otherAddr)
	otherLive := signIn(otherAddr)

	p := params(clientA, redirect, state)
	csrf := consentPage(live, p)
	csrfOther := consentPage(otherLive, p)                              // another session's, for this request
	csrfAnother := consentPage(live, params(clientA, redirect, "st-2")) // this session's, for another request
	csrfEnded := consentPage(ended, p)
	x.req(t, "DELETE", "/v1/public/auth/session", "", nil, map[string]string{"Cookie": cookie(ended), server.HeaderCSRF: "1"}).
		want(t, http.StatusNoContent)
	pB := params(clientB, otherURI, state)
	codeB := consent(live, pB, consentPage(live, pB), ws)

	// The codes (the first consent, client B's above, installed the starter
	// policy in ws).
	codeAccepted := consent(live, p, csrf, ws)
	token := exchange(consent(live, p, csrf, ws), ws)
	codeUsed := consent(live, p, csrf, ws)
	usedToken := exchange(codeUsed, ws)
	replayed(codeUsed)
	x.req(t, "GET", pathMe, usedToken, nil, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	codeLate := consent(live, p, csrf, ws)
	// A code issued more than a minute ago: the clock goes back for its
	// consent (which writes nothing else: ws has its policy), then forward.
	x.advance(-2 * connector.CodeLifetime)
	codeExpired := consent(live, p, csrf, ws)
	x.advance(2 * connector.CodeLifetime)
	narrow := x.createKey(org{ID: ws}, string(tenant.ScopeDecisionWrite), string(tenant.ScopeDecisionRead))
	if r := x.req(t, "GET", pathMe, token, nil, nil).want(t, http.StatusOK); r.str("org_id") != ws || r.str("workspace.org_id") != ws {
		t.Fatalf("automation/me: %s", r)
	}

	// POST /v1/platform/automation/clients.
	const clientBody = `{"name":"Bad Input Flows","redirect_uris":["https://flows-badinput.example/cb"]}`
	clientValues := func(q req) []badCase {
		var out []badCase
		add := func(name, body string) {
			c := s.variant(q, catValue, name, body, "INVALID_REQUEST")
			c.status = http.StatusBadRequest
			out = append(out, c)
		}
		uris := func(us ...string) string {
			parts := make([]string, len(us))
			for i, u := range us {
				parts[i] = lit(u)
			}
			return `{"name":"Flows","redirect_uris":[` + strings.Join(parts, ",") + `]}`
		}
		long := "https://automation.example/cb?x="
		long += strings.Repeat("a", connector.MaxRedirectURILen+1-len(long))
		for _, u := range []string{
			"http://automation.example/cb", "http://127.0.0.2/cb", "http://127.0.0.1.automation.example/cb",
			"http://localhost.automation.example/cb", "http://[::2]/cb", "http://0.0.0.0/cb", "http://10.0.0.1/cb",
			"javascript:alert(1)", "javascript://automation.example/%0Aalert(1)", "JavaScript:alert(1)", "data:text/html,hi",
			"file:///etc/passwd", "ftp://automation.example/cb", "com.automation.app:/cb", "wss://automation.example/cb",
			"/oauth/callback", "oauth/callback", "automation.example/cb", "//automation.example/cb", "?code=1",
			"https://automation.example/cb#frag", "https://automation.example/cb#", "https://automation.example/#/cb",
			"https://user@automation.example/cb", "https://user:pass@automation.example/cb", "https://automation.example@evil.example/cb",
			"https://automation.example\\@evil.example/cb", "", " ", " https://automation.example/cb", "https://automation.example/cb ",
			"https://automation.example/c b", "https://automation.example/cb\n", "https://automation.example/\tcb", "https://",
			"https:///cb", "https:automation.example/cb", "https://automation.example:x/cb", "https://%zz/cb",
		} {
			add("redirect URI "+shorten(lit(u)), uris(u))
			add("third redirect URI "+shorten(lit(u)), uris(redirect, loopback, u))
		}
		add("513-byte redirect URI", uris(long))
		add("6 redirect URIs", uris("https://a.example/1", "https://a.example/2", "https://a.example/3", "https://a.example/4",
			"https://a.example/5", "https://a.example/6"))
		for _, b := range []string{`{"name":"Flows","redirect_uris":[]}`, `{"name":"Flows","redirect_uris":null}`, `{"name":"Flows"}`,
			`{"redirect_uris":["https://a.example/cb"]}`, `{"name":"","redirect_uris":["https://a.example/cb"]}`,
			`{"name":"   ","redirect_uris":["https://a.example/cb"]}`, `{"name":null,"redirect_uris":["https://a.example/cb"]}`,
			`{"name":` + lit(strings.Repeat("n", 201)) + `,"redirect_uris":["https://a.example/cb"]}`,
			`{"name":"a\u2028b","redirect_uris":["https://a.example/cb"]}`, `{}`} {
			add(shorten(b), b)
		}
		for _, b := range []string{`{"name":"Flows","redirect_uris":["https://a.example/cb"],"client_id":` + lit(clientA) + `}`,
			`{"name":"Flows","redirect_uris":["https://a.example/cb"],"client_secret":"s"}`,
			`{"name":"Flows","redirect_uri":"https://a.example/cb"}`, `{"name":"Flows","Redirect_Uris":["https://a.example/cb"]}`} {
			c := s.variant(q, catUnknown, shorten(b), b, "UNKNOWN_MEMBER")
			c.status = http.StatusBadRequest
			out = append(out, c)
		}
		for _, b := range []string{`{"name":"Flows","redirect_uris":"https://a.example/cb"}`, `{"name":"Flows","redirect_uris":[5]}`,
			`{"name":"Flows","redirect_uris":[null]}`, `{"name":"Flows","redirect_uris":[["https://a.example/cb"]]}`} {
			c := s.variant(q, catWrongType, shorten(b), b, "WRONG_TYPE", "INVALID_REQUEST")
			c.status = http.StatusBadRequest
			out = append(out, c)
		}
		return out
	}
	clients := routeSpec{body: clientBody, extra: clientValues,
		idents: []string{`{"name":@@,"redirect_uris":["https://a.example/cb"]}`, `{"name":"Flows","redirect_uris":[@@]}`}}

	// GET /v1/public/auth/automation/authorize. Two classes of defects:
	// those of the client or its redirect URI are shown (a page, no
	// redirect); the others go back to the registered redirect URI.
	raw := func(v url.Values) string { return v.Encode() }
	// send makes the case of the parameters v (URL-encoded), edited.
	authorizeCases := func(q req, send func(name string, v string, edit func(c badCase) badCase) badCase) []badCase {
		var out []badCase
		page := func(name, v string, edit func(c badCase) badCase) {
			c := send(name, v, edit)
			c.answer, c.status = answerPage, http.StatusBadRequest
			out = append(out, c)
		}
		back := func(name, v, st string, want ...string) {
			c := send(name, v, nil)
			c.answer, c.status, c.redirectTo, c.state, c.want = answerRedirect, http.StatusSeeOther, redirect, st, want
			out = append(out, c)
		}
		noCookie := func(c badCase) badCase { return c.with("Cookie", "") }
		// Not the client, or not its redirect URI: shown, never redirected,
		// whatever else the request has.
		for _, v := range []struct{ name, id string }{{"no client_id", drop}, {"empty client_id", ""}, {"an unknown client_id", unknownID},
			{"client_id not a UUID", "flows"}, {"client_id in upper case", strings.ToUpper(clientA)}, {"client_id with a space", clientA + " "},
			{"client B's id with client A's redirect URI", clientB}, {"a workspace's id as client_id", ws}} {
			page(v.name, raw(with(p, "client_id", v.id)), nil)
			page(v.name+", no session", raw(with(p, "client_id", v.id)), noCookie)
		}
		page("client_id twice", raw(p)+"&client_id="+url.QueryEscape(clientA), nil)
		page("client_id twice, A then B", raw(p)+"&client_id="+url.QueryEscape(clientB), nil)
		page("Client_Id instead of client_id", strings.Replace(raw(p), "client_id=", "Client_Id=", 1), nil)
		page("client-id instead of client_id", strings.Replace(raw(p), "client_id=", "client-id=", 1), nil)
		for _, u := range []struct{ name, uri string }{
			{"no redirect_uri", drop}, {"empty redirect_uri", ""}, {"an unregistered redirect_uri", "https://evil.example/cb"},
			{"a prefix of the registered URI (its query dropped)", "https://automation.example/oauth/callback"},
			{"a shorter prefix", "https://automation.example/oauth/"}, {"the origin", "https://automation.example"},
			{"the registered URI with a query member more", redirect + "&x=1"}, {"the registered URI with a trailing &", redirect + "&"},
			{"the registered URI with a path segment more", "https://automation.example/oauth/callback/x?app=1"},
			{"the registered URI with a trailing slash", "https://automation.example/oauth/callback/?app=1"},
			{"the registered URI with a dot-dot segment", "https://automation.example/oauth/x/../callback?app=1"},
			{"the registered URI, host in upper case", "https://AUTOMATION.example/oauth/callback?app=1"},
			{"the registered URI, scheme in upper case", "HTTPS://automation.example/oauth/callback?app=1"},
			{"the registered URI, path in upper case", "https://automation.example/OAuth/Callback?app=1"},
			{"the registered URI, percent-encoded", "https://automation.example/oauth/%63allback?app=1"},
			{"the registered URI with the default port", "https://automation.example:443/oauth/callback?app=1"},
			{"the registered URI over http", "http://automation.example/oauth/callback?app=1"},
			{"the registered URI with a fragment", redirect + "#f"}, {"the registered URI with user info", "https://user@automation.example/oauth/callback?app=1"},
			{"the registered URI with a trailing space", redirect + " "}, {"the registered URI with a trailing dot host", "https://automation.example./oauth/callback?app=1"},
			{"the loopback URI on another port", "http://127.0.0.1:8766/cb"}, {"the loopback URI without its port", "http://127.0.0.1/cb"},
			{"the loopback URI as localhost", "http://localhost:8765/cb"}, {"the loopback URI as [::1]", "http://[::1]:8765/cb"},
			{"client B's registered URI", otherURI}, {"javascript:", "javascript:alert(1)"}, {"a relative URI", "/oauth/callback?app=1"},
			{"an overlong URI", redirect + "&" + strings.Repeat("a", 600)},
		} {
			page(u.name, raw(with(p, "redirect_uri", u.uri)), nil)
		}
		page("redirect_uri twice", raw(p)+"&redirect_uri="+url.QueryEscape(redirect), nil)
		page("redirect_uri twice, registered then not", raw(p)+"&redirect_uri="+url.QueryEscape("https://evil.example/cb"), nil)
		page("an unregistered redirect_uri, no session", raw(with(p, "redirect_uri", "https://evil.example/cb")), noCookie)
		page("an unregistered redirect_uri and response_type token", raw(with(p, "redirect_uri", "https://evil.example/cb", "response_type", "token")), nil)
		page("an unregistered redirect_uri and no state", raw(with(p, "redirect_uri", "https://evil.example/cb", "state", drop)), nil)
		page("an unknown client and no PKCE", raw(with(p, "client_id", unknownID, "code_challenge", drop)), nil)
		page("no parameters", "", nil)
		page("a malformed query", "client_id=%zz&"+raw(with(p, "client_id", drop)), nil)
		page("semicolon separators", strings.ReplaceAll(raw(p), "&", ";"), nil)

		// Defects the client hears of, at its registered URI.
		const invalid, unsupported = "invalid_request", "unsupported_response_type"
		for _, v := range []string{"token", "code token", "id_token", "CODE", "code ", " code", "Code", "code\u200b", "none"} {
			back("response_type "+lit(v), raw(with(p, "response_type", v)), state, unsupported)
		}
		back("no response_type", raw(with(p, "response_type", drop)), state, unsupported, invalid)
		back("response_type twice", raw(p)+"&response_type=code", state, unsupported, invalid)
		back("response-type instead of response_type", strings.Replace(raw(p), "response_type=", "response-type=", 1), state, unsupported, invalid)
		back("no state", raw(with(p, "state", drop)), "", invalid)
		back("empty state", raw(with(p, "state", "")), "", invalid)
		back("state twice", raw(p)+"&state=st-9", "", invalid)
		back("STATE instead of state", strings.Replace(raw(p), "state=", "STATE=", 1), "", invalid)
		long := strings.Repeat("s", connector.MaxStateLen+1)
		back("a 513-byte state", raw(with(p, "state", long)), long, invalid)
		for _, v := range []string{drop, "", "plain", "s256", "S256 ", "SHA256", "S512", "sha-256"} {
			back("code_challenge_method "+lit(v), raw(with(p, "code_challenge_method", v)), state, invalid)
		}
		back("plain PKCE with the verifier as challenge", raw(with(p, "code_challenge_method", "plain", "code_challenge", verifier)), state, invalid)
		back("code_challenge_method twice", raw(p)+"&code_challenge_method=S256", state, invalid)
		back("Code_Challenge instead of code_challenge", strings.Replace(raw(p), "code_challenge=", "Code_Challenge=", 1), state, invalid)
		notCanonical := challenge[:42] + "B" // nonzero trailing bits: not the encoding of 32 bytes
		if notCanonical == challenge {
			notCanonical = challenge[:42] + "C"
		}
		for _, v := range []struct{ name, ch string }{
			{"none", drop}, {"empty", ""}, {"42 characters", challenge[:42]}, {"44 characters", challenge + "A"},
			{"padded", challenge + "="}, {"standard base64", strings.NewReplacer("-", "+", "_", "/").Replace(challenge[:41]) + "+/"},
			{"with a space", challenge[:42] + " "}, {"hex of SHA-256", strings.Repeat("ab", 32)}, {"non-canonical trailing bits", notCanonical},
			{"128 characters", strings.Repeat("A", 128)}, {"non-ASCII", challenge[:41] + "é"},
		} {
			back("code_challenge "+v.name, raw(with(p, "code_challenge", v.ch)), state, invalid)
		}
		back("code_challenge twice", raw(p)+"&code_challenge="+challenge, state, invalid)
		back("no session and response_type token", raw(with(p, "response_type", "token")), state, unsupported)
		out[len(out)-1] = noCookie(out[len(out)-1])
		back("no session and no PKCE", raw(with(p, "code_challenge", drop)), state, invalid)
		out[len(out)-1] = noCookie(out[len(out)-1])
		return out
	}
	authorize := routeSpec{query: "?" + p.Encode(), headers: map[string]string{"Cookie": cookie(live)},
		extra: func(q req) []badCase {
			return authorizeCases(q, func(name, v string, edit func(c badCase) badCase) badCase {
				r := q
				r.query = "?" + v
				c := s.variant(r, catQuery, name, "")
				if edit != nil {
					c = edit(c)
				}
				return c
			})
		}}

	// POST /v1/public/auth/automation/authorize: the consent form.
	accepted := consentForm(p, csrf, ws, "allow")
	consentCases := func(q req) []badCase {
		// The authorization parameters are checked as GET checks them.
		out := authorizeCases(q, func(name, v string, edit func(c badCase) badCase) badCase {
			body := v
			if v != "" {
				body += "&" + url.Values{"csrf": {csrf}, "org_id": {ws}, "decision": {"allow"}}.Encode()
			}
			c := s.variant(q, catValue, name, body)
			if edit != nil {
				c = edit(c)
			}
			return c
		})
		add := func(cat, name, body string, answer answerKind, status int, edit func(c badCase) badCase) {
			c := s.variant(q, cat, name, body)
			c.answer, c.status = answer, status
			if edit != nil {
				c = edit(c)
			}
			out = append(out, c)
		}
		forged := func(cat, name string, form url.Values, edit func(c badCase) badCase) {
			add(cat, name, form.Encode(), answerPage, http.StatusForbidden, edit)
		}
		shown := func(name string, body string) { add(catValue, name, body, answerPage, http.StatusBadRequest, nil) }
		setCookie := func(v string) func(c badCase) badCase {
			return func(c badCase) badCase { return c.with("Cookie", v) }
		}
		// Not this session's consent page.
		forged(catNoCred, "no session cookie", accepted, setCookie(""))
		forged(catNoCred, "a signed-out session with its own csrf", consentForm(p, csrfEnded, ws, "allow"), setCookie(cookie(ended)))
		forged(catNoCred, "an unknown session", accepted, setCookie(cookie(onboarding.PrefixSession+strings.Repeat("0", 43))))
		forged(catNoCred, "the session in the form, no cookie", with(accepted, server.CookieSession, live), setCookie(""))
		forged(catNoCred, "an org key as the cookie", accepted, setCookie(cookie(s.a.Key)))
		forged(catForeign, "another account's session with this session's csrf", accepted, setCookie(cookie(otherLive)))
		forged(catCSRF, "another session's csrf", consentForm(p, csrfOther, ws, "allow"), nil)
		forged(catCSRF, "a signed-out session's csrf", consentForm(p, csrfEnded, ws, "allow"), nil)
		forged(catCSRF, "the csrf of another request (another state)", consentForm(p, csrfAnother, ws, "allow"), nil)
		forged(catCSRF, "the csrf with the state changed", with(accepted, "state", "st-2"), nil)
		forged(catCSRF, "the csrf with another code_challenge", with(accepted, "code_challenge", base64.RawURLEncoding.EncodeToString(make([]byte, 32))), nil)
		forged(catCSRF, "the csrf with the loopback redirect URI", with(accepted, "redirect_uri", loopback), nil)
		forged(catCSRF, "no csrf", with(accepted, "csrf", drop), nil)
		forged(catCSRF, "empty csrf", with(accepted, "csrf", ""), nil)
		forged(catCSRF, "csrf with its last character changed", with(accepted, "csrf", csrf[:len(csrf)-1]+flipChar(csrf[len(csrf)-1])), nil)
		forged(catCSRF, "csrf with a character more", with(accepted, "csrf", csrf+"A"), nil)
		forged(catCSRF, "csrf padded", with(accepted, "csrf", csrf+"="), nil)
		forged(catCSRF, "csrf in upper case", with(accepted, "csrf", strings.ToUpper(csrf)), nil)
		forged(catCSRF, "the CSRF header instead of the csrf field", with(accepted, "csrf", drop),
			func(c badCase) badCase { return c.with(server.HeaderCSRF, "1") })
		forged(catCSRF, "the csrf in a header", with(accepted, "csrf", drop),
			func(c badCase) badCase { return c.with("X-CSRF-Token", csrf) })
		twice := with(accepted)
		twice["csrf"] = []string{csrf, csrf}
		forged(catDuplicate, "csrf twice", twice, nil)
		twice = with(accepted)
		twice["csrf"] = []string{csrfOther, csrf}
		forged(catDuplicate, "csrf twice, another session's first", twice, nil)
		add(catCSRF, "the csrf in the query string", with(accepted, "csrf", drop).Encode(), answerPage, http.StatusForbidden,
			func(c badCase) badCase { c.path += "?csrf=" + url.QueryEscape(csrf); return c })
		// The decision.
		for _, d := range []string{drop, "", "ALLOW", "Allow", "allow ", "yes", "true", "1", "approve", "allow\u200b"} {
			shown("decision "+lit(d), with(accepted, "decision", d).Encode())
		}
		for _, ds := range [][]string{{"allow", "allow"}, {"allow", "deny"}, {"deny", "allow"}} {
			f := with(accepted)
			f["decision"] = ds
			add(catDuplicate, "decision "+strings.Join(ds, ", "), f.Encode(), answerPage, http.StatusBadRequest, nil)
		}
		// The workspace: one of the account's.
		for _, o := range []struct{ name, id string }{{"no org_id", drop}, {"empty org_id", ""},
			{"another account's workspace", otherWS}, {"org a, of no account", s.a.ID}, {"org b, of no account", s.b.ID},
			{"an unknown org", unknownID}, {"not a UUID", "not-a-uuid"}, {"the workspace in upper case", strings.ToUpper(ws)},
			{"the workspace with a space", ws + " "}, {"the client's id", clientA}} {
			add(catOrg, "org_id: "+o.name, with(accepted, "org_id", o.id).Encode(), answerPage, http.StatusBadRequest, nil)
		}
		for _, ids := range [][]string{{ws, ws}, {ws, otherWS}, {otherWS, ws}} {
			f := with(accepted)
			f["org_id"] = ids
			add(catDuplicate, "org_id twice", f.Encode(), answerPage, http.StatusBadRequest, nil)
		}
		add(catForeign, "this account's csrf for another account's workspace", consentForm(p, csrf, otherWS, "allow").Encode(),
			answerPage, http.StatusBadRequest, nil)
		add(catForeign, "the other account's session and csrf for this account's workspace", consentForm(p, csrfOther, ws, "allow").Encode(),
			answerPage, http.StatusBadRequest, setCookie(cookie(otherLive)))
		// Forms that cannot be read, or whose fields are elsewhere.
		shown("a malformed form", "csrf=%zz&"+with(accepted, "csrf", drop).Encode())
		shown("semicolon separators", strings.ReplaceAll(accepted.Encode(), "&", ";"))
		shown("empty body", "")
		shown("the fields as JSON, sent as a form", func() string {
			b, _ := json.Marshal(map[string]string{"client_id": clientA, "redirect_uri": redirect, "state": state, "csrf": csrf})
			return string(b)
		}())
		add(catQuery, "the authorization parameters in the query string, the rest in the body",
			url.Values{"csrf": {csrf}, "org_id": {ws}, "decision": {"allow"}}.Encode(), answerPage, http.StatusBadRequest,
			func(c badCase) badCase { c.path += "?" + p.Encode(); return c })
		// Denied: back to the client with access_denied, nothing issued.
		for _, f := range []url.Values{with(accepted, "decision", "deny"), with(accepted, "decision", "deny", "org_id", otherWS)} {
			c := s.variant(q, catValue, "decision deny, org_id "+f.Get("org_id"), f.Encode(), "access_denied")
			c.answer, c.status, c.redirectTo, c.state = answerRedirect, http.StatusSeeOther, redirect, state
			out = append(out, c)
		}
		return out
	}
	consentSpec := routeSpec{body: accepted.Encode(), form: true, redirects: true, headers: formHeaders(live), extra: consentCases}

	// POST /v1/public/auth/automation/token.
	acceptedToken := tokenForm(codeAccepted)
	tokenCases := func(q req) []badCase {
		var out []badCase
		oauth := func(cat, name, body string, want string, edit func(c badCase) badCase) {
			c := s.variant(q, cat, name, body, want)
			c.answer, c.status = answerOAuth, http.StatusBadRequest
			if edit != nil {
				c = edit(c)
			}
			out = append(out, c)
		}
		const invalid, grantErr, unsupported = "invalid_request", "invalid_grant", "unsupported_grant_type"
		// grant_type.
		for _, g := range []string{drop, "", "password", "client_credentials", "refresh_token", "implicit", "authorization_code ",
			"Authorization_Code", "authorization-code", "urn:ietf:params:oauth:grant-type:jwt-bearer", "code"} {
			oauth(catValue, "grant_type "+lit(g), with(acceptedToken, "grant_type", g).Encode(), unsupported, nil)
		}
		oauth(catValue, "grant_type password with a user's credentials",
			url.Values{"grant_type": {"password"}, "username": {ownerAddr}, "password": {"secret"}, "client_id": {clientA}}.Encode(), unsupported, nil)
		// The code and the verifier's grammar.
		for _, v := range []struct{ name, code string }{{"no code", drop}, {"empty code", ""}, {"a 129-byte code", strings.Repeat("c", 129)}} {
			oauth(catValue, v.name, with(acceptedToken, "code", v.code).Encode(), invalid, nil)
		}
		for _, v := range []struct{ name, verifier string }{
			{"none", drop}, {"empty", ""}, {"42 characters", verifier[:42]}, {"129 characters", verifier + strings.Repeat("v", 129-len(verifier))},
			{"with a plus", verifier[:42] + "+"}, {"with a slash", verifier[:42] + "/"}, {"padded", verifier + "="}, {"with a space", verifier[:42] + " "},
			{"with a percent", verifier[:42] + "%"}, {"non-ASCII", verifier[:41] + "é"}, {"with NUL", verifier[:42] + "\x00"},
			{"with a newline", verifier + "\n"}, {"with a zero-width space", verifier + "\u200b"}, {"4096 characters", strings.Repeat("v", 4096)},
		} {
			oauth(catValue, "code_verifier "+v.name, with(acceptedToken, "code_verifier", v.verifier).Encode(), invalid, nil)
		}
		// Well-formed but not this code's: one answer, invalid_grant.
		for _, v := range []struct{ name, verifier string }{
			{"another verifier", strings.Repeat("a", 43)}, {"the verifier in upper case", strings.ToUpper(verifier)},
			{"the verifier with a character more", verifier + "a"}, {"the verifier with a character less", verifier[:len(verifier)-1]},
			{"the challenge as verifier", challenge},
		} {
			oauth(catValue, "code_verifier: "+v.name, with(acceptedToken, "code_verifier", v.verifier).Encode(), grantErr, nil)
		}
		for _, v := range []struct{ name, id string }{{"no client_id", drop}, {"empty client_id", ""}, {"client B's id", clientB},
			{"an unknown client_id", unknownID}, {"client_id in upper case", strings.ToUpper(clientA)}, {"the workspace's id", ws}} {
			oauth(catForeign, v.name, with(acceptedToken, "client_id", v.id).Encode(), grantErr, nil)
		}
		for _, v := range []struct{ name, uri string }{{"no redirect_uri", drop}, {"empty redirect_uri", ""},
			{"the client's other redirect URI", loopback}, {"client B's redirect URI", otherURI},
			{"a prefix of the redirect URI", "https://automation.example/oauth/callback"}, {"the redirect URI with a fragment", redirect + "#f"},
			{"the redirect URI, host in upper case", "https://AUTOMATION.example/oauth/callback?app=1"}} {
			oauth(catValue, v.name, with(acceptedToken, "redirect_uri", v.uri).Encode(), grantErr, nil)
		}
		for _, v := range []struct{ name, code string }{
			{"an unknown code", "unknown-code-" + strings.Repeat("0", 30)}, {"the code with its last character changed", codeAccepted[:len(codeAccepted)-1] + flipChar(codeAccepted[len(codeAccepted)-1])},
			{"the code in upper case", strings.ToUpper(codeAccepted)}, {"an expired code", codeExpired},
			{"a used code (its credential revoked already)", codeUsed}, {"client B's code", codeB},
			{"the credential as the code", token}, {"the csrf token as the code", csrf},
		} {
			oauth(catValue, v.name, with(acceptedToken, "code", v.code).Encode(), grantErr, nil)
		}
		oauth(catValue, "client B's code with client B's id and URI but a wrong verifier",
			with(acceptedToken, "code", codeB, "client_id", clientB, "redirect_uri", otherURI, "code_verifier", strings.Repeat("b", 43)).Encode(), grantErr, nil)
		// Repeated fields count as absent.
		for _, f := range []struct{ name, want string }{{"grant_type", unsupported}, {"code", invalid}, {"code_verifier", invalid},
			{"client_id", grantErr}, {"redirect_uri", grantErr}} {
			oauth(catDuplicate, f.name+" twice", acceptedToken.Encode()+"&"+url.Values{f.name: {acceptedToken.Get(f.name)}}.Encode(), f.want, nil)
		}
		oauth(catDuplicate, "code twice, unknown first", "code=unknown&"+acceptedToken.Encode(), invalid, nil)
		// Fields elsewhere, or a body that is not a form.
		oauth(catQuery, "the fields in the query string, none in the body", "", unsupported,
			func(c badCase) badCase { c.path += "?" + acceptedToken.Encode(); return c })
		oauth(catQuery, "the code in the query string", with(acceptedToken, "code", drop).Encode(), invalid,
			func(c badCase) badCase { c.path += "?code=" + url.QueryEscape(codeAccepted); return c })
		oauth(catValue, "the verifier in a header", with(acceptedToken, "code_verifier", drop).Encode(), invalid,
			func(c badCase) badCase { return c.with("Code-Verifier", verifier) })
		oauth(catMalformed, "a malformed form", "code=%zz&"+with(acceptedToken, "code", drop).Encode(), unsupported, nil)
		oauth(catMalformed, "semicolon separators", strings.ReplaceAll(acceptedToken.Encode(), "&", ";"), unsupported, nil)
		oauth(catMalformed, "empty body", "", unsupported, nil)
		oauth(catMalformed, "the fields as JSON, sent as a form", func() string {
			b, _ := json.Marshal(map[string]string{"grant_type": "authorization_code", "code": codeAccepted, "redirect_uri": redirect,
				"client_id": clientA, "code_verifier": verifier})
			return string(b)
		}(), unsupported, nil)
		oauth(catNoCred, "client credentials in Basic instead of client_id", with(acceptedToken, "client_id", drop).Encode(), grantErr,
			func(c badCase) badCase {
				return c.with("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(clientA)+":")))
			})
		return out
	}
	// The late step: a code exchanged, then presented again, which revokes
	// the credential it was exchanged for; a third time changes nothing more.
	tokenRoute := tableRoute{pattern: "POST " + pathToken, method: "POST", path: pathToken}
	late := func(t *testing.T) {
		t.Helper()
		form := tokenForm(codeLate).Encode()
		tok := exchange(codeLate, ws)
		x.req(t, "GET", pathMe, tok, nil, nil).want(t, http.StatusOK)
		replay := badCase{category: catValue, name: "a code exchanged again", method: "POST", path: pathToken, body: form, hasBody: true,
			headers: formHeaders(""), answer: answerOAuth, status: http.StatusBadRequest, want: []string{"invalid_grant"}}
		s.check(t, tokenRoute, replay, s.send(t, replay))
		x.req(t, "GET", pathMe, tok, nil, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
		fp := x.fingerprint(t)
		replay.name = "a code exchanged a third time"
		s.check(t, tokenRoute, replay, s.send(t, replay))
		if x.fingerprint(t) != fp {
			t.Errorf("%s: a code replayed a third time changed the store", tokenRoute.pattern)
		}
		// The other credentials of the workspace stand.
		x.req(t, "GET", pathMe, token, nil, nil).want(t, http.StatusOK)
	}
	tokenSpec := routeSpec{body: acceptedToken.Encode(), form: true, headers: formHeaders(""), extra: tokenCases,
		phase: phaseRevokes, late: late}

	// The automation credential's routes.
	credentialValues := func(q req) []badCase {
		var out []badCase
		add := func(cat, name, key string, status int, code string, edit func(c badCase) badCase) {
			c := s.variant(q, cat, name, q.body, code)
			c.key, c.status = key, status
			if edit != nil {
				c = edit(c)
			}
			out = append(out, c)
		}
		add(catPlatform, "the platform key", x.platform, http.StatusNotFound, "ORG_NOT_FOUND", nil)
		add(catScope, "the workspace's key with decision:write and decision:read", narrow, http.StatusForbidden, "INSUFFICIENT_SCOPE", nil)
		add(catScope, "the workspace's onboarding grant", ownerGrant, http.StatusForbidden, "INSUFFICIENT_SCOPE", nil)
		add(catNoCred, "a credential revoked by a replayed code", usedToken, http.StatusUnauthorized, "UNAUTHENTICATED", nil)
		add(catNoCred, "an authorization code", codeAccepted, http.StatusUnauthorized, "UNAUTHENTICATED", nil)
		add(catNoCred, "the credential with its last character changed", token[:len(token)-1]+flipChar(token[len(token)-1]),
			http.StatusUnauthorized, "UNAUTHENTICATED", nil)
		add(catNoCred, "the session cookie, no key", "", http.StatusUnauthorized, "UNAUTHENTICATED",
			func(c badCase) badCase { return c.with("Cookie", cookie(live)) })
		add(catNoCred, "the credential as access_token in the query", "", http.StatusUnauthorized, "UNAUTHENTICATED",
			func(c badCase) badCase { c.path += "?access_token=" + token; return c })
		add(catNoCred, "the credential as a form field, no key", "", http.StatusUnauthorized, "UNAUTHENTICATED",
			func(c badCase) badCase {
				c.body, c.hasBody = "access_token="+token, q.method == "POST"
				return c.with("Content-Type", formType)
			})
		return out
	}
	me := routeSpec{key: token, extra: credentialValues}
	bootstrap := routeSpec{key: token, body: `{}`, emptyOK: true, extra: credentialValues}

	out := map[string]routeSpec{
		"POST " + pathClients:   clients,
		"GET " + pathAuthorize:  authorize,
		"POST " + pathAuthorize: consentSpec,
		"POST " + pathToken:     tokenSpec,
		"GET " + pathMe:         me,
		"POST " + pathBootstrap: bootstrap,
	}
	// The credential's callback URLs (automation_webhooks_badinput_test.go);
	// the other account connects its own workspace for the foreign credential.
	for pattern, spec := range s.automationWebhookSpecs(automationWebhookArgs{token: token, narrow: narrow, grant: ownerGrant,
		revoked: usedToken, code: codeAccepted, foreign: exchange(consent(otherLive, p, csrfOther, otherWS), otherWS)}) {
		out[pattern] = spec
	}
	return out
}
