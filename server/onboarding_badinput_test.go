package server_test

import (
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/mail"
	"github.com/clearancehq/clearance/onboarding"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/tenant"
)

// badInputMailbox gives x's engine a mailer that writes every message to a
// mailbox in a temp dir, and returns the mailbox's directory. It is called
// from the setup of newExecEnvWith, before the engine opens.
func badInputMailbox(t testing.TB, x *execEnv) string {
	t.Helper()
	dir := t.TempDir()
	mb, err := clearance.NewMailer("", dir, "clearance@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	prev := x.tune
	x.tune = func(o *clearance.Options) {
		if prev != nil {
			prev(o)
		}
		o.Mailer = mb // the same mailer every time the env reopens
	}
	return filepath.Join(dir, "mailbox")
}

// signUpCode is a sign-up code in a mailed message.
var signUpCode = regexp.MustCompile(`code is ([0-9]{6})\.`)

// onboardingSpecs are the bad-input specs of the sign-up and mapping
// routes. Before the battery it signs up through the public routes (codes
// read back from mailbox):
//
//   - a live onboarding grant of a new org with an open mapping session:
//     the credential and the session of the mapping routes' accepted
//     requests;
//   - a second org whose bundle is issued: its grant is revoked, its
//     session issued, and its bundle's key (org:*) refused a second bundle;
//   - a pending code, taken by the accepted verify; a used one, a burned
//     one; an address sent its five codes of the hour.
//
// Every wrong code the battery sends is for an address whose code cannot
// be tried any more (used, burned, never asked for): a wrong try of a live
// code is counted, which is a change. Each accepted start has an address
// of its own, so the store's limit of five codes an hour never refuses it.
func (s *badSuite) onboardingSpecs(mailbox string) map[string]routeSpec {
	t, x := s.t, s.x
	const (
		pathStart    = "/v1/public/auth/register/start"
		pathVerify   = "/v1/public/auth/register/verify"
		pathSessions = "/v1/public/pilot/signal-mapping/sessions"
	)
	pathBundle := func(id string) string { return pathSessions + "/" + id + "/deployment-bundle" }
	startBody := func(addr string) string {
		return `{"owner_email":` + lit(addr) + `,"owner_name":"Ada Lovelace","org_name":"Analytical Engines"}`
	}
	verifyBody := func(addr, code string) string {
		return `{"owner_email":` + lit(addr) + `,"otp_code":` + lit(code) + `}`
	}
	bundleBody := func(provider, workflow, label string) string {
		return `{"provider_key":` + provider + `,"workflow_key":` + workflow + `,"source_label":` + label + `}`
	}
	const bundle = `{"provider_key":"stripe","workflow_key":"ap.invoice","source_label":"Stripe payouts"}`
	start := func(addr string) {
		t.Helper()
		r := x.req(t, "POST", pathStart, "", startBody(addr), nil).want(t, http.StatusAccepted)
		if r.str("status") != "code_sent" || r.num("expires_in_seconds") != onboarding.DefaultCodeTTL.Seconds() {
			t.Fatalf("register/start: %s", r)
		}
	}
	code := func(addr string) string { // the newest code mailed to addr
		t.Helper()
		msgs, err := mail.ReadMailbox(mailbox)
		if err != nil {
			t.Fatal(err)
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			if m := signUpCode.FindStringSubmatch(msgs[i].Text); msgs[i].To == addr && m != nil {
				return m[1]
			}
		}
		t.Fatalf("no sign-up code mailed to %s", addr)
		return ""
	}
	signUp := func(addr string) (grant, orgID string) {
		t.Helper()
		start(addr)
		r := x.req(t, "POST", pathVerify, "", verifyBody(addr, code(addr)), nil).want(t, http.StatusOK)
		grant, orgID = r.str("onboarding_grant"), r.str("org_id")
		if !strings.HasPrefix(grant, tenant.PrefixOnboarding) || orgID == "" || r.str("workspace.org_id") != orgID {
			t.Fatalf("register/verify: %s", r)
		}
		return grant, orgID
	}
	session := func(key, orgID string) string {
		t.Helper()
		r := x.req(t, "POST", pathSessions, key, `{"org_id":`+lit(orgID)+`}`, nil).want(t, http.StatusCreated)
		if r.str("status") != "open" || r.str("org_id") != orgID {
			t.Fatalf("mapping session: %s", r)
		}
		return r.str("session_id")
	}
	flip, wrong := flipChar, otherCode

	// The mapping routes' org: a live grant and an open session.
	const usedAddr = "badinput-owner@example.com"
	grant, orgID := signUp(usedAddr)
	usedCode := code(usedAddr)
	sess := session(grant, orgID)
	narrow := x.createKey(org{ID: orgID}, string(tenant.ScopeDecisionWrite))
	narrowIntegration := x.createKey(org{ID: orgID}, string(tenant.ScopeIntegrationWrite), string(tenant.ScopePolicyWrite))
	// A second org whose bundle is issued: its grant revoked.
	const issuedAddr = "badinput-issued@example.com"
	revoked, issuedOrg := signUp(issuedAddr)
	issuedSess := session(revoked, issuedOrg)
	issued := x.req(t, "POST", pathBundle(issuedSess), revoked, bundle, nil).want(t, http.StatusCreated)
	bundleKey := issued.str("api_key")
	if !strings.HasPrefix(bundleKey, tenant.PrefixOrg) || issued.str("webhook_url") != x.srv.URL+issued.str("webhook_path") {
		t.Fatalf("deployment bundle: %s", issued)
	}
	x.req(t, "POST", pathSessions, revoked, `{"org_id":`+lit(issuedOrg)+`}`, nil).want(t, http.StatusUnauthorized)
	// A session of org a, opened with its org:* key.
	foreignSess := session(s.a.Key, s.a.ID)
	// A pending code (the accepted verify's), a burned one, and an address
	// at its limit of codes.
	const pendingAddr, burnedAddr, limitedAddr = "badinput-pending@example.com", "badinput-burned@example.com", "badinput-limited@example.com"
	start(pendingAddr)
	pendingCode := code(pendingAddr)
	start(burnedAddr)
	burnedCode := code(burnedAddr)
	for range 5 {
		x.req(t, "POST", pathVerify, "", verifyBody(burnedAddr, wrong(burnedCode)), nil).want(t, http.StatusUnauthorized)
	}
	for range 5 {
		start(limitedAddr)
	}
	r := x.req(t, "POST", pathStart, "", startBody(limitedAddr), nil).wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_CODES")
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 3600 {
		t.Fatalf("TOO_MANY_CODES without a Retry-After of 1 to 3600 seconds: %v", r.Header)
	}
	const startAddr = "badinput-start@example.com" // the accepted start's: never sent a code before

	// register/start.
	startValues := func(q req) []badCase {
		var out []badCase
		add := func(cat, name, body string, status int, want ...string) {
			c := s.variant(q, cat, name, body, want...)
			c.status = status
			out = append(out, c)
		}
		for _, e := range badEmails {
			add(catValue, "owner_email "+shorten(lit(e)), startBody(e), http.StatusBadRequest, "INVALID_REQUEST")
		}
		for _, n := range []string{"", "   ", strings.Repeat("n", 201), strings.Repeat("é", 201), "a\u0007b", "a\u2028b", "a\u2029b", "a\u007fb", "\u0085"} {
			name := shorten(lit(n))
			add(catValue, "owner_name "+name, `{"owner_email":`+lit(startAddr)+`,"owner_name":`+lit(n)+`,"org_name":"Engines"}`,
				http.StatusBadRequest, "INVALID_REQUEST")
			add(catValue, "org_name "+name, `{"owner_email":`+lit(startAddr)+`,"owner_name":"Ada","org_name":`+lit(n)+`}`,
				http.StatusBadRequest, "INVALID_REQUEST")
		}
		for _, b := range []string{`{}`, `{"owner_email":` + lit(startAddr) + `}`, `{"owner_email":` + lit(startAddr) + `,"owner_name":"Ada"}`,
			`{"owner_email":` + lit(startAddr) + `,"org_name":"Engines"}`, `{"owner_name":"Ada","org_name":"Engines"}`,
			`{"owner_email":` + lit(startAddr) + `,"owner_name":"Ada","org_name":"Engines","org_id":` + lit(s.a.ID) + `}`,
			`{"owner_email":` + lit(startAddr) + `,"owner_name":"Ada","org_name":"Engines","otp_code":"123456"}`} {
			add(catValue, shorten(b), b, http.StatusBadRequest)
		}
		// The sixth code of the hour, whatever the address's case: refused
		// before anything is stored or mailed.
		for _, addr := range []string{limitedAddr, strings.ToUpper(limitedAddr)} {
			add(catValue, "a sixth code for "+addr, startBody(addr), http.StatusTooManyRequests, "TOO_MANY_CODES")
		}
		return out
	}
	registerStart := routeSpec{body: startBody(startAddr),
		idents: []string{
			`{"owner_email":@@,"owner_name":"Ada","org_name":"Engines"}`,
			`{"owner_email":` + lit(startAddr) + `,"owner_name":@@,"org_name":"Engines"}`,
			`{"owner_email":` + lit(startAddr) + `,"owner_name":"Ada","org_name":@@}`,
		},
		extra: startValues}

	// register/verify.
	verifyValues := func(q req) []badCase {
		var out []badCase
		add := func(cat, name, body string, status int, want ...string) {
			c := s.variant(q, cat, name, body, want...)
			c.status = status
			out = append(out, c)
		}
		for _, c := range badCodes(pendingCode) {
			add(catValue, "otp_code "+c.name, verifyBody(pendingAddr, c.code), http.StatusBadRequest, "INVALID_REQUEST", "JSON_NUL_CHARACTER")
		}
		for _, e := range []string{"Pending <" + pendingAddr + ">", pendingAddr + ", " + usedAddr, pendingAddr + "\r\n",
			"pendïng@example.com", "pending@example", pendingAddr + " ", ""} {
			add(catValue, "owner_email "+shorten(lit(e)), verifyBody(e, pendingCode), http.StatusBadRequest, "INVALID_REQUEST")
		}
		for _, b := range []string{`{}`, `{"otp_code":` + lit(pendingCode) + `}`, `{"owner_email":` + lit(pendingAddr) + `}`,
			`{"owner_email":` + lit(pendingAddr) + `,"otp_code":` + pendingCode + `}`} {
			add(catValue, shorten(b), b, http.StatusBadRequest)
		}
		// Codes that do not verify, and whose tries count for nothing: the
		// one answer, 401 OTP_INVALID.
		for _, c := range []struct{ name, addr, code string }{
			{"an address that never asked for a code", "badinput-nobody@example.com", pendingCode},
			{"the accepted start's address, before it asks", startAddr, pendingCode},
			{"a used code", usedAddr, usedCode},
			{"a used code, address in upper case", strings.ToUpper(usedAddr), usedCode},
			{"a used code, wrong", usedAddr, wrong(usedCode)},
			{"the code of an org whose bundle is issued", issuedAddr, code(issuedAddr)},
			{"a burned code", burnedAddr, burnedCode},
			{"a burned code, wrong", burnedAddr, wrong(burnedCode)},
			{"the pending code with a used address", usedAddr, pendingCode},
		} {
			add(catValue, c.name, verifyBody(c.addr, c.code), http.StatusUnauthorized, "OTP_INVALID")
		}
		return out
	}
	registerVerify := routeSpec{body: verifyBody(pendingAddr, pendingCode),
		idents: []string{`{"owner_email":@@,"otp_code":"123456"}`, `{"owner_email":` + lit(pendingAddr) + `,"otp_code":@@}`},
		extra:  verifyValues}

	// The mapping routes: credentials other than the org's grant or org:*
	// key.
	refused := func(q req, cat, name, key string, status int, code string) badCase {
		c := s.variant(q, cat, name, q.body, code)
		c.key, c.status = key, status
		return c
	}
	mapCredentials := func(q req) []badCase {
		out := []badCase{
			refused(q, catPlatform, "the platform key", x.platform, http.StatusForbidden, "INSUFFICIENT_SCOPE"),
			refused(q, catScope, "an org key with decision:write", narrow, http.StatusForbidden, "INSUFFICIENT_SCOPE"),
			refused(q, catScope, "an org key with integration:write and policy:write", narrowIntegration, http.StatusForbidden, "INSUFFICIENT_SCOPE"),
			refused(q, catNoCred, "a revoked onboarding grant", revoked, http.StatusUnauthorized, "UNAUTHENTICATED"),
			refused(q, catNoCred, "the grant with its last character changed", grant[:len(grant)-1]+flip(grant[len(grant)-1]),
				http.StatusUnauthorized, "UNAUTHENTICATED"),
			refused(q, catNoCred, "the grant with an org key's prefix", tenant.PrefixOrg+strings.TrimPrefix(grant, tenant.PrefixOnboarding),
				http.StatusUnauthorized, "UNAUTHENTICATED"),
		}
		scopes := slices.Sorted(maps.Keys(s.scoped)) // org a's keys without org:*
		for _, sc := range scopes {
			out = append(out, refused(q, catScope, "another org's key with only "+sc, s.scoped[sc], http.StatusForbidden, "INSUFFICIENT_SCOPE"))
		}
		return out
	}

	// Mapping sessions.
	sessionValues := func(q req) []badCase {
		out := mapCredentials(q)
		add := func(cat, name, key, body string, status int, want ...string) {
			c := s.variant(q, cat, name, body, want...)
			c.key, c.status = key, status
			out = append(out, c)
		}
		for _, v := range []string{"not-a-uuid", strings.ToUpper(orgID), "{" + orgID + "}", strings.ReplaceAll(orgID, "-", ""),
			"urn:uuid:" + orgID, orgID + " ", " " + orgID, orgID + "\n", orgID[:35], orgID + "0", strings.Repeat("a", 4096)} {
			add(catValue, "org_id "+shorten(lit(v)), grant, `{"org_id":`+lit(v)+`}`, http.StatusBadRequest, "INVALID_REQUEST")
		}
		for _, b := range []string{`{}`, `{"org_id":""}`} {
			add(catValue, b, grant, b, http.StatusBadRequest, "MISSING_FIELD")
		}
		add(catUnknown, "a bundle member", grant, `{"org_id":`+lit(orgID)+`,"provider_key":"stripe"}`, http.StatusBadRequest, "UNKNOWN_MEMBER")
		for _, o := range []struct{ name, id string }{{"org a", s.a.ID}, {"org b", s.b.ID}, {"another signed-up org", issuedOrg},
			{"a UUID of no org", unknownID}} {
			add(catOrg, "the grant naming "+o.name, grant, `{"org_id":`+lit(o.id)+`}`, http.StatusForbidden, "ORG_MISMATCH")
		}
		add(catForeign, "org a's org:* key naming this org", s.a.Key, q.body, http.StatusForbidden, "ORG_MISMATCH")
		add(catForeign, "another signed-up org's org:* key naming this org", bundleKey, q.body, http.StatusForbidden, "ORG_MISMATCH")
		return out
	}
	sessions := routeSpec{key: grant, body: `{"org_id":` + lit(orgID) + `}`, foreign: true,
		idents: []string{`{"org_id":@@}`}, extra: sessionValues}

	// Deployment bundles.
	bundleValues := func(q req) []badCase {
		out := mapCredentials(q)
		add := func(cat, name, key, path, body string, status int, want ...string) {
			c := s.variant(q, cat, name, body, want...)
			c.key, c.path, c.status = key, path, status
			out = append(out, c)
		}
		self := q.url()
		for _, v := range []string{"", "stripe payouts", "stripe/payouts", "strípe", "stripe\u200b", "stripe;drop", "*", "stripe\n",
			"\u202estripe", "stripe\u00a0", strings.Repeat("p", 129)} {
			add(catValue, "provider_key "+shorten(lit(v)), grant, self, bundleBody(lit(v), `"ap.invoice"`, `"Stripe payouts"`),
				http.StatusBadRequest, "INVALID_REQUEST")
			if v == "stripe/payouts" {
				continue // a workflow key may hold '/': the decision routes' grammar
			}
			add(catValue, "workflow_key "+shorten(lit(v)), grant, self, bundleBody(`"stripe"`, lit(v), `"Stripe payouts"`),
				http.StatusBadRequest, "INVALID_REQUEST")
		}
		for _, v := range []string{"-ap", ".ap", "/ap", "_ap"} { // the first byte is alphanumeric
			add(catValue, "workflow_key "+lit(v), grant, self, bundleBody(`"stripe"`, lit(v), `"Stripe payouts"`),
				http.StatusBadRequest, "INVALID_REQUEST")
		}
		for _, v := range []string{"", "   ", strings.Repeat("s", 121), strings.Repeat("é", 121), strings.Repeat("s", 201), "a\u0007b",
			"a\u2028b", "a\u007fb"} {
			add(catValue, "source_label "+shorten(lit(v)), grant, self, bundleBody(`"stripe"`, `"ap.invoice"`, lit(v)),
				http.StatusBadRequest, "INVALID_REQUEST")
		}
		for _, b := range []string{`{}`, `{"provider_key":"stripe","workflow_key":"ap.invoice"}`, `{"provider_key":"stripe","source_label":"s"}`,
			`{"workflow_key":"ap.invoice","source_label":"s"}`} {
			add(catValue, b, grant, self, b, http.StatusBadRequest, "INVALID_REQUEST")
		}
		add(catUnknown, "org_id", grant, self, `{"org_id":`+lit(orgID)+`,`+bundle[1:], http.StatusBadRequest, "UNKNOWN_MEMBER")
		add(catUnknown, "api_key", grant, self, `{"api_key":"clr_org_x",`+bundle[1:], http.StatusBadRequest, "UNKNOWN_MEMBER")
		// Sessions the credential's org does not have, or whose bundle is
		// issued.
		add(catForeign, "org a's session", grant, pathBundle(foreignSess), bundle, http.StatusNotFound, "MAPPING_SESSION_NOT_FOUND")
		add(catForeign, "another signed-up org's session", grant, pathBundle(issuedSess), bundle, http.StatusNotFound, "MAPPING_SESSION_NOT_FOUND")
		add(catForeign, "org a's org:* key on this org's session", s.a.Key, self, bundle, http.StatusNotFound, "MAPPING_SESSION_NOT_FOUND")
		add(catForeign, "another signed-up org's org:* key on this org's session", bundleKey, self, bundle, http.StatusNotFound,
			"MAPPING_SESSION_NOT_FOUND")
		add(catValue, "a second bundle, with the bundle's own key", bundleKey, pathBundle(issuedSess), bundle, http.StatusConflict,
			"BUNDLE_ALREADY_ISSUED")
		add(catNoCred, "a second bundle, with the revoked grant", revoked, pathBundle(issuedSess), bundle, http.StatusUnauthorized,
			"UNAUTHENTICATED")
		add(catPath, "the org's id as a session id", grant, pathBundle(orgID), bundle, http.StatusNotFound, "MAPPING_SESSION_NOT_FOUND")
		add(catPath, "a connector's id as a session id", grant, pathBundle(issued.str("connector_id")), bundle, http.StatusNotFound,
			"MAPPING_SESSION_NOT_FOUND")
		return out
	}
	deployment := routeSpec{key: grant, params: map[string]string{"sessionId": sess}, paramCodes: []string{"MAPPING_SESSION_NOT_FOUND"},
		body:   bundle,
		idents: []string{bundleBody("@@", `"w"`, `"s"`), bundleBody(`"p"`, "@@", `"s"`), bundleBody(`"p"`, `"w"`, "@@")},
		// Its accepted request revokes the grant that the accepted
		// session request uses.
		phase: phaseRevokes,
		extra: bundleValues}

	out := map[string]routeSpec{
		"POST /v1/public/auth/register/start":                                         registerStart,
		"POST /v1/public/auth/register/verify":                                        registerVerify,
		"POST /v1/public/pilot/signal-mapping/sessions":                               sessions,
		"POST /v1/public/pilot/signal-mapping/sessions/{sessionId}/deployment-bundle": deployment,
	}
	// Sign-in: no address above is mailed a code from here on (the cases
	// built later read the newest code of issuedAddr).
	signIn := s.signInSpecs(signInArgs{code: code, signUp: signUp, signUpAddr: pendingAddr, signUpCode: pendingCode,
		otherOrgs: []struct{ name, id string }{{"the mapping routes' org, of another account", orgID},
			{"an org whose bundle is issued, of another account", issuedOrg}}})
	for pattern, spec := range signIn {
		out[pattern] = spec
	}
	// The automation connector: its owners sign up and in with addresses
	// of their own.
	for pattern, spec := range s.automationSpecs(automationArgs{code: code, signUp: signUp}) {
		out[pattern] = spec
	}
	return out
}

// badEmails are never one bare e-mail address.
var badEmails = []string{
	"Ada Lovelace <ada@example.com>", "<ada@example.com>", `"Ada" <ada@example.com>`, "ada@example.com (Ada)",
	"ada@example.com, grace@example.com", "ada@example.com,grace@example.com", "ada@example.com;grace@example.com",
	"adä@example.com", "ada@exämple.com", "ada\u200b@example.com", "ada＠example.com", "ada@example.com\u00a0",
	"ada@localhost", "ada@example", "ada@example.com\r\nBcc: eve@example.com", "ada@example.com\n", "ada@exa\rmple.com",
	" ada@example.com", "ada@example.com ", "ada @example.com", "ada\t@example.com", `"ada"@example.com`, `"ada lovelace"@example.com`,
	"ada", "@example.com", "ada@", "ada@@example.com", "ada@.example.com", "ada@example..com", "ada@example.com.", ".ada@example.com",
	"a..da@example.com", "ada@[IPv6:::1]", "", strings.Repeat("a", 243) + "@example.com",
}

// badCodes are forms of the code c that are not six ASCII digits.
func badCodes(c string) []struct{ name, code string } {
	digits := func(zero rune) string { // c in another script's digits
		return strings.Map(func(r rune) rune { return zero + r - '0' }, c)
	}
	return []struct{ name, code string }{
		{"fullwidth digits", digits('０')}, {"Arabic-Indic digits", digits('٠')},
		{"extended Arabic-Indic digits", digits('۰')}, {"Devanagari digits", digits('०')},
		{"7 digits", c + "0"}, {"5 digits", c[:5]}, {"empty", ""},
		{"a space inside", c[:3] + " " + c[3:]}, {"a leading space", " " + c[:5]},
		{"a trailing space", c[:5] + " "}, {"spaces around", " " + c + " "}, {"a trailing newline", c + "\n"},
		{"plus sign", "+" + c[:5]}, {"minus sign", "-" + c[:5]}, {"hex", "0x1234"}, {"exponent", "1e+004"},
		{"a letter", c[:5] + "a"}, {"a zero-width space", c + "\u200b"}, {"NUL", c[:5] + "\u0000"},
	}
}

// flipChar is another character than b.
func flipChar(b byte) string {
	if b == 'A' {
		return "B"
	}
	return "A"
}

// otherCode is a well-formed code other than c.
func otherCode(c string) string {
	if c == "000000" {
		return "000001"
	}
	return "000000"
}

// signInArgs are what the sign-in specs take from the sign-up ones.
type signInArgs struct {
	code                   func(addr string) string                // the newest code mailed to addr
	signUp                 func(addr string) (grant, orgID string) // through register/start and register/verify
	signUpAddr, signUpCode string                                  // a pending sign-up code (register/verify's accepted one)
	otherOrgs              []struct{ name, id string }             // signed-up orgs of other accounts
}

// signInSpecs are the bad-input specs of the sign-in and account routes.
// Before the battery it signs up and signs in through the public routes
// (codes read back from the mailbox):
//
//   - an account with a workspace of its own, signed in three times: a
//     live session (the accepted read and revocation, and most cases), one
//     signed out, and one that the accepted sign-out ends;
//   - another account with a workspace and a live session;
//   - a pending sign-in code (the accepted verify's), a used one, a burned
//     one, and an address sent its five sign-in codes of the hour.
//
// The accepted sign-out and revocation destroy what they act on, so they
// go last (phaseRevokes) and act on a session and a workspace no other
// accepted request uses. As for sign-up, every wrong sign-in code sent is
// for an address whose code cannot be tried any more.
func (s *badSuite) signInSpecs(a signInArgs) map[string]routeSpec {
	t, x := s.t, s.x
	const (
		pathStart   = "/v1/public/auth/login/start"
		pathVerify  = "/v1/public/auth/login/verify"
		pathSession = "/v1/public/auth/session"
	)
	pathRevoke := func(id string) string { return "/v1/public/auth/workspaces/" + id + "/revoke-credentials" }
	startBody := func(addr string) string { return `{"email":` + lit(addr) + `}` }
	verifyBody := func(addr, code string) string { return `{"email":` + lit(addr) + `,"otp_code":` + lit(code) + `}` }
	cookie := func(v string) string { return server.CookieSession + "=" + v }
	// account is the headers of a signed-in request: the session cookie,
	// and the CSRF header when it changes something.
	account := func(secret string, change bool) map[string]string {
		h := map[string]string{"Cookie": cookie(secret)}
		if change {
			h[server.HeaderCSRF] = "1"
		}
		return h
	}
	start := func(addr string) {
		t.Helper()
		r := x.req(t, "POST", pathStart, "", startBody(addr), nil).want(t, http.StatusAccepted)
		if r.str("status") != "code_sent" || r.num("expires_in_seconds") != onboarding.DefaultCodeTTL.Seconds() {
			t.Fatalf("login/start: %s", r)
		}
	}
	// signIn signs addr in and returns the session's secret, checking the
	// cookie it comes in and that the body does not carry it.
	signIn := func(addr string) (secret string, view *result) {
		t.Helper()
		start(addr)
		r := x.req(t, "POST", pathVerify, "", verifyBody(addr, a.code(addr)), nil).want(t, http.StatusOK)
		var ck *http.Cookie
		for _, c := range (&http.Response{Header: r.Header}).Cookies() {
			if c.Name == server.CookieSession {
				ck = c
			}
		}
		if ck == nil || !strings.HasPrefix(ck.Value, onboarding.PrefixSession) || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode ||
			ck.Path != "/" || ck.Secure || strings.Contains(string(r.Raw), ck.Value) {
			t.Fatalf("login/verify: session cookie %v: %s", ck, r)
		}
		if r.str("email") != addr || r.str("account_id") == "" || r.str("session_expires_at") == "" || lookup(r.JSON, "workspaces") == nil {
			t.Fatalf("login/verify: %s", r)
		}
		return ck.Value, r
	}
	workspaces := func(r *result) []string {
		var ids []string
		ws, _ := lookup(r.JSON, "workspaces").([]any)
		for _, w := range ws {
			if m, ok := w.(map[string]any); ok {
				ids = append(ids, fmt.Sprint(m["org_id"]))
			}
		}
		return ids
	}

	// The account: a workspace whose credentials the accepted revocation
	// revokes (its onboarding grant, and an org key made for it), and
	// three sessions.
	const ownerAddr = "badinput-account@example.com"
	wsGrant, wsOrg := a.signUp(ownerAddr)
	wsKey := x.createKey(org{ID: wsOrg}, string(tenant.ScopeOrgAll))
	live, view := signIn(ownerAddr)
	if ws := workspaces(view); !slices.Equal(ws, []string{wsOrg}) {
		t.Fatalf("login/verify: workspaces %v, want [%s]", ws, wsOrg)
	}
	ended, _ := signIn(ownerAddr)
	r := x.req(t, "DELETE", pathSession, "", nil, account(ended, true)).want(t, http.StatusNoContent)
	if cs := (&http.Response{Header: r.Header}).Cookies(); len(cs) != 1 || cs[0].Name != server.CookieSession || cs[0].Value != "" ||
		cs[0].MaxAge >= 0 {
		t.Fatalf("sign-out does not clear the cookie: %v", r.Header)
	}
	x.req(t, "GET", pathSession, "", nil, account(ended, false)).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	signOut, _ := signIn(ownerAddr) // the accepted sign-out's
	usedSignIn := a.code(ownerAddr)
	if got := x.req(t, "GET", pathSession, "", nil, account(live, false)).want(t, http.StatusOK); !slices.Equal(workspaces(got), []string{wsOrg}) {
		t.Fatalf("session: %s", got)
	}
	// Another account, with a workspace and a live session.
	const otherAddr = "badinput-other-account@example.com"
	_, otherOrg := a.signUp(otherAddr)
	otherLive, _ := signIn(otherAddr)
	// A pending sign-in code (the accepted verify's, of an address without
	// an account), a burned one, and an address at its limit of codes.
	const pendingAddr, burnedAddr, limitedAddr = "badinput-login-pending@example.com", "badinput-login-burned@example.com",
		"badinput-login-limited@example.com"
	start(pendingAddr)
	pendingCode := a.code(pendingAddr)
	start(burnedAddr)
	burnedCode := a.code(burnedAddr)
	for range 5 {
		x.req(t, "POST", pathVerify, "", verifyBody(burnedAddr, otherCode(burnedCode)), nil).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID")
	}
	for range 5 {
		start(limitedAddr)
	}
	r = x.req(t, "POST", pathStart, "", startBody(limitedAddr), nil).wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_CODES")
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 3600 {
		t.Fatalf("TOO_MANY_CODES without a Retry-After of 1 to 3600 seconds: %v", r.Header)
	}
	const startAddr = "badinput-login-start@example.com" // the accepted start's: never sent a sign-in code before

	// login/start.
	startValues := func(q req) []badCase {
		var out []badCase
		add := func(name, body string, status int, want ...string) {
			c := s.variant(q, catValue, name, body, want...)
			c.status = status
			out = append(out, c)
		}
		for _, e := range badEmails {
			add("email "+shorten(lit(e)), startBody(e), http.StatusBadRequest, "INVALID_REQUEST")
		}
		add(`{}`, `{}`, http.StatusBadRequest, "INVALID_REQUEST")
		add("email null", `{"email":null}`, http.StatusBadRequest, "INVALID_REQUEST")
		for _, b := range []string{`{"owner_email":` + lit(startAddr) + `}`,
			`{"email":` + lit(startAddr) + `,"owner_name":"Ada","org_name":"Engines"}`,
			`{"email":` + lit(startAddr) + `,"otp_code":"123456"}`, `{"email":` + lit(startAddr) + `,"org_id":` + lit(s.a.ID) + `}`} {
			add(shorten(b), b, http.StatusBadRequest, "UNKNOWN_MEMBER")
		}
		// The sixth sign-in code of the hour, whatever the address's case:
		// refused before anything is stored or mailed.
		for _, addr := range []string{limitedAddr, strings.ToUpper(limitedAddr)} {
			add("a sixth code for "+addr, startBody(addr), http.StatusTooManyRequests, "TOO_MANY_CODES")
		}
		return out
	}
	loginStart := routeSpec{body: startBody(startAddr), idents: []string{`{"email":@@}`}, extra: startValues}

	// login/verify.
	verifyValues := func(q req) []badCase {
		var out []badCase
		add := func(name, body string, status int, want ...string) {
			c := s.variant(q, catValue, name, body, want...)
			c.status = status
			out = append(out, c)
		}
		for _, c := range badCodes(pendingCode) {
			add("otp_code "+c.name, verifyBody(pendingAddr, c.code), http.StatusBadRequest, "INVALID_REQUEST", "JSON_NUL_CHARACTER")
		}
		for _, e := range []string{"Pending <" + pendingAddr + ">", pendingAddr + ", " + ownerAddr, pendingAddr + "\r\n",
			"pendïng@example.com", "pending@example", pendingAddr + " ", ""} {
			add("email "+shorten(lit(e)), verifyBody(e, pendingCode), http.StatusBadRequest, "INVALID_REQUEST")
		}
		for _, b := range []string{`{}`, `{"otp_code":` + lit(pendingCode) + `}`, `{"email":` + lit(pendingAddr) + `}`,
			`{"email":` + lit(pendingAddr) + `,"otp_code":null}`} {
			add(shorten(b), b, http.StatusBadRequest, "INVALID_REQUEST")
		}
		// A JSON number (a code with a leading zero is not one: 1 in front).
		add("otp_code a number", `{"email":`+lit(pendingAddr)+`,"otp_code":1`+pendingCode+`}`, http.StatusBadRequest, "WRONG_TYPE")
		for _, b := range []string{`{"owner_email":` + lit(pendingAddr) + `,"otp_code":` + lit(pendingCode) + `}`,
			`{"email":` + lit(pendingAddr) + `,"otp_code":` + lit(pendingCode) + `,"org_id":` + lit(a.otherOrgs[0].id) + `}`} {
			add(shorten(b), b, http.StatusBadRequest, "UNKNOWN_MEMBER")
		}
		// Codes that do not verify, and whose tries count for nothing: the
		// one answer, 401 OTP_INVALID.
		for _, c := range []struct{ name, addr, code string }{
			{"an address that never asked for a code", "badinput-nobody@example.com", pendingCode},
			{"the accepted start's address, before it asks", startAddr, pendingCode},
			{"a used code", ownerAddr, usedSignIn},
			{"a used code, address in upper case", strings.ToUpper(ownerAddr), usedSignIn},
			{"a used code, wrong", ownerAddr, otherCode(usedSignIn)},
			{"a burned code", burnedAddr, burnedCode},
			{"a burned code, wrong", burnedAddr, otherCode(burnedCode)},
			{"the pending code with a signed-in address", ownerAddr, pendingCode},
			{"the pending code with another account's address", otherAddr, pendingCode},
			{"a pending sign-up code", a.signUpAddr, a.signUpCode},
		} {
			add(c.name, verifyBody(c.addr, c.code), http.StatusUnauthorized, "OTP_INVALID")
		}
		return out
	}
	loginVerify := routeSpec{body: verifyBody(pendingAddr, pendingCode),
		idents: []string{`{"email":@@,"otp_code":"123456"}`, `{"email":` + lit(pendingAddr) + `,"otp_code":@@}`},
		extra:  verifyValues}

	// The account routes: every request without a live session of its own
	// cookie is 401 SIGN_IN_REQUIRED (a bearer credential is no session),
	// checked before a change's missing CSRF header (403).
	sessionCases := func(q req, secret string) []badCase {
		var out []badCase
		refuse := func(cat, name string, status int, code string, edit func(c badCase) badCase) {
			c := s.variant(q, cat, name, q.body, code)
			c.status = status
			out = append(out, edit(c))
		}
		noSession := func(name string, edit func(c badCase) badCase) {
			refuse(catNoCred, name, http.StatusUnauthorized, "SIGN_IN_REQUIRED", edit)
		}
		withCookie := func(name, header string) {
			noSession(name, func(c badCase) badCase { return c.with("Cookie", header) })
		}
		bearer := func(name, key string) {
			noSession(name, func(c badCase) badCase {
				c.key = key
				return c.with("Cookie", "")
			})
		}
		noSession("no cookie", func(c badCase) badCase { return c.with("Cookie", "") })
		for _, v := range []struct{ name, value string }{
			{"an empty session", ""}, {"garbage", "garbage"}, {"the prefix alone", onboarding.PrefixSession},
			{"an unknown session", onboarding.PrefixSession + strings.Repeat("0", 43)},
			{"the session with its last character changed", secret[:len(secret)-1] + flipChar(secret[len(secret)-1])},
			{"the session with a character more", secret + "x"}, {"the session with a character less", secret[:len(secret)-1]},
			{"the session in upper case", strings.ToUpper(secret)}, {"the session without its prefix", strings.TrimPrefix(secret, onboarding.PrefixSession)},
			{"an overlong session", onboarding.PrefixSession + strings.Repeat("A", 4000)},
			{"a signed-out session", ended}, {"an org key", s.a.Key}, {"an onboarding grant", wsGrant},
		} {
			withCookie("cookie: "+v.name, cookie(v.value))
		}
		withCookie("an unknown session before the live one", cookie(onboarding.PrefixSession+strings.Repeat("0", 43))+"; "+cookie(secret))
		for _, name := range []string{"session", "Clearance_Session", "clearance-session", "clearance_session_id"} {
			withCookie("the session under the cookie name "+name, name+"="+secret)
		}
		bearer("org a's org:* key as a bearer, no cookie", s.a.Key)
		bearer("the workspace's org:* key as a bearer, no cookie", wsKey)
		bearer("the workspace's onboarding grant as a bearer, no cookie", wsGrant)
		bearer("the platform key as a bearer, no cookie", x.platform)
		bearer("the session as a bearer, no cookie", secret)
		noSession("the session in the query, no cookie", func(c badCase) badCase {
			c.path += sep(q.query) + server.CookieSession + "=" + secret
			return c.with("Cookie", "")
		})
		noSession("the session in another header, no cookie", func(c badCase) badCase {
			return c.with("Cookie", "").with("X-Clearance-Session", secret)
		})
		if q.headers[server.HeaderCSRF] == "" { // a read
			return out
		}
		// A change: the CSRF header must be exactly "1".
		csrf := func(name string, edit func(c badCase) badCase) {
			refuse(catCSRF, name, http.StatusForbidden, "CSRF_HEADER_REQUIRED", edit)
		}
		csrf("no "+server.HeaderCSRF, func(c badCase) badCase { return c.with(server.HeaderCSRF, "") })
		for _, v := range []string{"0", "true", "yes", "2", "11", "01", "-1", "1.0", "１", "1\u200b", "on"} {
			csrf(server.HeaderCSRF+" "+strconv.Quote(v), func(c badCase) badCase { return c.with(server.HeaderCSRF, v) })
		}
		for _, vs := range [][]string{{""}, {"0", "1"}} {
			csrf(server.HeaderCSRF+" "+fmt.Sprintf("%q", vs), func(c badCase) badCase {
				c = c.with(server.HeaderCSRF, "")
				c.rawHeaders = http.Header{http.CanonicalHeaderKey(server.HeaderCSRF): vs}
				return c
			})
		}
		for _, h := range []string{"X-CSRF-Token", "X-Requested-With", "X-Clearance-CSRF-Token", "X-Clearance-Csrf-"} {
			csrf("the CSRF value in "+h, func(c badCase) badCase { return c.with(server.HeaderCSRF, "").with(h, "1") })
		}
		csrf("the CSRF value in the query", func(c badCase) badCase {
			c.path += sep(q.query) + server.HeaderCSRF + "=1"
			return c.with(server.HeaderCSRF, "")
		})
		noSession("no cookie and no "+server.HeaderCSRF, func(c badCase) badCase {
			return c.with("Cookie", "").with(server.HeaderCSRF, "")
		})
		noSession("a signed-out session without "+server.HeaderCSRF, func(c badCase) badCase {
			return c.with("Cookie", cookie(ended)).with(server.HeaderCSRF, "")
		})
		return out
	}
	session := routeSpec{headers: account(live, false), extra: func(q req) []badCase { return sessionCases(q, live) }}
	// The accepted sign-out ends a session of its own.
	signOutSpec := routeSpec{headers: account(signOut, true), phase: phaseRevokes,
		extra: func(q req) []badCase { return sessionCases(q, signOut) }}

	// refusedAt is a refused variant of q sent to path (q's when "") with
	// extra headers, answered status and code.
	refusedAt := func(q req, cat, name, path, body string, headers map[string]string, status int, code string) badCase {
		c := s.variant(q, cat, name, body, code)
		c.status = status
		if path != "" {
			c.path = path
		}
		for k, v := range headers {
			c = c.with(k, v)
		}
		return c
	}

	// revoke-credentials: the body is optional ({} or none); a workspace
	// of no account, of another account or of nothing is 404.
	revokeValues := func(q req) []badCase {
		out := sessionCases(q, live)
		add := func(cat, name, path, body string, headers map[string]string, status int, code string) {
			out = append(out, refusedAt(q, cat, name, path, body, headers, status, code))
		}
		for _, v := range []string{`"true"`, `"false"`, `""`, `1`, `0`, `{}`, `[]`, `[true]`} {
			add(catWrongType, "issue_replacement_key "+v, "", `{"issue_replacement_key":`+v+`}`, nil, http.StatusBadRequest, "WRONG_TYPE")
		}
		for _, b := range []string{`{"issue_replacement_key":true,"org_id":` + lit(wsOrg) + `}`, `{"Issue_Replacement_Key":true}`,
			`{"issue_replacement_key ":true}`, `{"replacement":true}`, `{"scopes":["org:*"]}`, `{"revoke":"all"}`} {
			add(catUnknown, shorten(b), "", b, nil, http.StatusBadRequest, "UNKNOWN_MEMBER")
		}
		add(catDuplicate, "issue_replacement_key twice", "", `{"issue_replacement_key":false,"issue_replacement_key":true}`, nil,
			http.StatusBadRequest, "DUPLICATE_MEMBER")
		orgs := append([]struct{ name, id string }{{"org a, of no account", s.a.ID}, {"org b, of no account", s.b.ID},
			{"another account's workspace", otherOrg}}, a.otherOrgs...)
		for _, o := range orgs {
			for _, b := range []string{`{}`, `{"issue_replacement_key":true}`} {
				add(catForeign, o.name+" "+b, pathRevoke(o.id), b, nil, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
			}
		}
		for _, b := range []string{`{}`, `{"issue_replacement_key":true}`} {
			add(catForeign, "another account's session on this workspace "+b, "", b, account(otherLive, true),
				http.StatusNotFound, "WORKSPACE_NOT_FOUND")
		}
		add(catOrg, "an unknown org", pathRevoke(unknownID), `{"issue_replacement_key":true}`, nil, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
		add(catOrg, "not a UUID", pathRevoke("not-a-uuid"), `{}`, nil, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
		add(catOrg, "the account's id", pathRevoke(view.str("account_id")), `{}`, nil, http.StatusNotFound,
			"WORKSPACE_NOT_FOUND")
		return out
	}
	revoke := routeSpec{params: map[string]string{"orgId": wsOrg}, paramCodes: []string{"WORKSPACE_NOT_FOUND"},
		headers: account(live, true), body: `{}`, emptyOK: true,
		// Its accepted request revokes the workspace's credentials: no
		// other accepted request uses them.
		phase: phaseRevokes,
		extra: revokeValues}

	// console-key: the body is none or {}; a workspace of no account, of
	// another account or of nothing is 404, as for revoke-credentials.
	pathConsoleKey := func(id string) string { return "/v1/public/auth/workspaces/" + id + "/console-key" }
	consoleKeyValues := func(q req) []badCase {
		out := sessionCases(q, live)
		add := func(cat, name, path, body string, headers map[string]string, status int, code string) {
			out = append(out, refusedAt(q, cat, name, path, body, headers, status, code))
		}
		for _, b := range []string{`{"scopes":["org:*"]}`, `{"org_id":` + lit(wsOrg) + `}`, `{"ttl_seconds":86400}`, `{"Scopes":[]}`} {
			add(catUnknown, shorten(b), "", b, nil, http.StatusBadRequest, "UNKNOWN_MEMBER")
		}
		orgs := append([]struct{ name, id string }{{"org a, of no account", s.a.ID}, {"org b, of no account", s.b.ID},
			{"another account's workspace", otherOrg}}, a.otherOrgs...)
		for _, o := range orgs {
			add(catForeign, o.name, pathConsoleKey(o.id), `{}`, nil, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
		}
		add(catForeign, "another account's session on this workspace", "", `{}`, account(otherLive, true),
			http.StatusNotFound, "WORKSPACE_NOT_FOUND")
		add(catOrg, "an unknown org", pathConsoleKey(unknownID), `{}`, nil, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
		add(catOrg, "not a UUID", pathConsoleKey("not-a-uuid"), `{}`, nil, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
		add(catOrg, "the account's id", pathConsoleKey(view.str("account_id")), `{}`, nil, http.StatusNotFound,
			"WORKSPACE_NOT_FOUND")
		return out
	}
	consoleKey := routeSpec{params: map[string]string{"orgId": wsOrg}, paramCodes: []string{"WORKSPACE_NOT_FOUND"},
		headers: account(live, true), body: `{}`, emptyOK: true, extra: consoleKeyValues}

	return map[string]routeSpec{
		"POST /v1/public/auth/workspaces/{orgId}/console-key":        consoleKey,
		"POST /v1/public/auth/login/start":                           loginStart,
		"POST /v1/public/auth/login/verify":                          loginVerify,
		"GET /v1/public/auth/session":                                session,
		"DELETE /v1/public/auth/session":                             signOutSpec,
		"POST /v1/public/auth/workspaces/{orgId}/revoke-credentials": revoke,
	}
}
