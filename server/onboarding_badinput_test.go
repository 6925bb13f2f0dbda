package server_test

import (
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
	flip := func(b byte) string { // another character than b
		if b == 'A' {
			return "B"
		}
		return "A"
	}
	// wrong is a well-formed code other than c.
	wrong := func(c string) string {
		if c == "000000" {
			return "000001"
		}
		return "000000"
	}

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
	emails := []string{
		"Ada Lovelace <ada@example.com>", "<ada@example.com>", `"Ada" <ada@example.com>`, "ada@example.com (Ada)",
		"ada@example.com, grace@example.com", "ada@example.com,grace@example.com", "ada@example.com;grace@example.com",
		"adä@example.com", "ada@exämple.com", "ada\u200b@example.com", "ada＠example.com", "ada@example.com\u00a0",
		"ada@localhost", "ada@example", "ada@example.com\r\nBcc: eve@example.com", "ada@example.com\n", "ada@exa\rmple.com",
		" ada@example.com", "ada@example.com ", "ada @example.com", "ada\t@example.com", `"ada"@example.com`, `"ada lovelace"@example.com`,
		"ada", "@example.com", "ada@", "ada@@example.com", "ada@.example.com", "ada@example..com", "ada@example.com.", ".ada@example.com",
		"a..da@example.com", "ada@[IPv6:::1]", "", strings.Repeat("a", 243) + "@example.com",
	}
	startValues := func(q req) []badCase {
		var out []badCase
		add := func(cat, name, body string, status int, want ...string) {
			c := s.variant(q, cat, name, body, want...)
			c.status = status
			out = append(out, c)
		}
		for _, e := range emails {
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
	digits := func(c string, zero rune) string { // c in another script's digits
		return strings.Map(func(r rune) rune { return zero + r - '0' }, c)
	}
	verifyValues := func(q req) []badCase {
		var out []badCase
		add := func(cat, name, body string, status int, want ...string) {
			c := s.variant(q, cat, name, body, want...)
			c.status = status
			out = append(out, c)
		}
		for _, c := range []struct{ name, code string }{
			{"fullwidth digits", digits(pendingCode, '０')}, {"Arabic-Indic digits", digits(pendingCode, '٠')},
			{"extended Arabic-Indic digits", digits(pendingCode, '۰')}, {"Devanagari digits", digits(pendingCode, '०')},
			{"7 digits", pendingCode + "0"}, {"5 digits", pendingCode[:5]}, {"empty", ""},
			{"a space inside", pendingCode[:3] + " " + pendingCode[3:]}, {"a leading space", " " + pendingCode[:5]},
			{"a trailing space", pendingCode[:5] + " "}, {"spaces around", " " + pendingCode + " "}, {"a trailing newline", pendingCode + "\n"},
			{"plus sign", "+" + pendingCode[:5]}, {"minus sign", "-" + pendingCode[:5]}, {"hex", "0x1234"}, {"exponent", "1e+004"},
			{"a letter", pendingCode[:5] + "a"}, {"a zero-width space", pendingCode + "\u200b"}, {"NUL", pendingCode[:5] + "\u0000"},
		} {
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

	return map[string]routeSpec{
		"POST /v1/public/auth/register/start":                                         registerStart,
		"POST /v1/public/auth/register/verify":                                        registerVerify,
		"POST /v1/public/pilot/signal-mapping/sessions":                               sessions,
		"POST /v1/public/pilot/signal-mapping/sessions/{sessionId}/deployment-bundle": deployment,
	}
}
