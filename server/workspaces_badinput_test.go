package server_test

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clearancehq/clearance/internal/mail"
	"github.com/clearancehq/clearance/onboarding"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/tenant"
)

// workspaceSpecs are the bad-input specs of the zero-human lane: the
// public provisioning route and the signed-in claim. Before the battery it
// signs in through the public routes (codes read back from mailbox) and
// provisions through the public route:
//
//   - an account signed in twice: a live session (the accepted claim's,
//     and most cases) and one signed out;
//   - another account with a live session;
//   - a provisional workspace whose code the accepted claim spends, and
//     one the other account claimed already (its code is spent).
//
// Every request comes from one source address, whose budget is 3
// provisional workspaces an hour: the two made here and the accepted
// provisioning request (so a fourth, 429 TOO_MANY_WORKSPACES, is the e2e
// tests' to send). A second claim of a claimed workspace (409
// WORKSPACE_ALREADY_CLAIMED) is sent after the accepted claim (late), not
// in the battery: it mints nothing, but it re-runs and commits the
// accounts' transaction of the claim, which rewrites the code's record
// with the time of the retry (onboarding.Service.Claim), so the store is
// not byte for byte what it was.
//
// TestBadInputOnWorkspaceRoutes runs these specs in an env of their own;
// TestBadInputOnEveryRoute takes them with every other route's.
func (s *badSuite) workspaceSpecs(mailbox string) map[string]routeSpec {
	t, x := s.t, s.x
	const (
		pathProvision = "/v1/public/workspaces/provisional"
		pathClaim     = "/v1/public/auth/workspaces/claim"
		pathLogin     = "/v1/public/auth/login/start"
		pathLoginOK   = "/v1/public/auth/login/verify"
		pathSession   = "/v1/public/auth/session"
	)
	cookie := func(v string) string { return server.CookieSession + "=" + v }
	account := func(secret string) map[string]string {
		return map[string]string{"Cookie": cookie(secret), server.HeaderCSRF: "1"}
	}
	claimBody := func(code string) string { return `{"claim_code":` + lit(code) + `}` }
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
		t.Fatalf("no code mailed to %s", addr)
		return ""
	}
	signIn := func(addr string) string {
		t.Helper()
		x.req(t, "POST", pathLogin, "", `{"email":`+lit(addr)+`}`, nil).want(t, http.StatusAccepted)
		r := x.req(t, "POST", pathLoginOK, "", `{"email":`+lit(addr)+`,"otp_code":`+lit(code(addr))+`}`, nil).want(t, http.StatusOK)
		for _, c := range (&http.Response{Header: r.Header}).Cookies() {
			if c.Name == server.CookieSession && strings.HasPrefix(c.Value, onboarding.PrefixSession) {
				return c.Value
			}
		}
		t.Fatalf("login/verify set no session cookie: %v", r.Header)
		return ""
	}
	provision := func(body string) *result {
		t.Helper()
		r := x.req(t, "POST", pathProvision, "", body, nil).want(t, http.StatusCreated)
		if !strings.HasPrefix(r.str("api_key"), tenant.PrefixOrg) || !strings.HasPrefix(r.str("claim_code"), onboarding.PrefixClaimCode) ||
			r.str("mode") != "SHADOW" {
			t.Fatalf("provision: %s", r)
		}
		return r
	}

	// The accounts.
	const liveAddr, otherAddr = "badinput-claimer@example.com", "badinput-claimer-other@example.com"
	live := signIn(liveAddr)
	ended := signIn(liveAddr)
	x.req(t, "DELETE", pathSession, "", nil, account(ended)).want(t, http.StatusNoContent)
	x.req(t, "GET", pathSession, "", nil, map[string]string{"Cookie": cookie(ended)}).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	other := signIn(otherAddr)
	// The workspaces: w1's code is the accepted claim's; w2 is the other
	// account's already.
	w1 := provision(`{"name":"Bad-input agent"}`)
	w1Code, w1Key, w1Org := w1.str("claim_code"), w1.str("api_key"), w1.str("org_id")
	w2 := provision("")
	w2Code := w2.str("claim_code")
	c2 := x.req(t, "POST", pathClaim, "", claimBody(w2Code), account(other)).want(t, http.StatusOK)
	w2Owner := c2.str("api_key")
	if c2.str("org_id") != w2.str("org_id") || !strings.HasPrefix(w2Owner, tenant.PrefixOrg) {
		t.Fatalf("claim of w2: %s", c2)
	}
	rest := strings.TrimPrefix(w1Code, onboarding.PrefixClaimCode) // the code's random part

	// Provisioning: public, the body optional ({} or none); its one member
	// is the org name of admin.ValidOrgName ("" or null: the default).
	provisionValues := func(q req) []badCase {
		var out []badCase
		add := func(cat, name, body string, status int, want ...string) {
			c := s.variant(q, cat, name, body, want...)
			c.status = status
			out = append(out, c)
		}
		for _, v := range []string{`5`, `1.5`, `true`, `{}`, `[]`, `["Agent"]`, `{"name":"Agent"}`} {
			add(catWrongType, "name "+v, `{"name":`+v+`}`, http.StatusBadRequest, "WRONG_TYPE")
		}
		for _, b := range []string{`{"name":"Agent","org_id":` + lit(s.a.ID) + `}`, `{"Name":"Agent"}`, `{"name ":"Agent"}`,
			`{"org_name":"Agent"}`, `{"scopes":["org:*"]}`, `{"name":"Agent","mode":"ENFORCEMENT"}`, `{"api_key":"clr_org_x"}`,
			`{"claim_code":` + lit(w1Code) + `}`, `{"owner_email":"ada@example.com"}`, `{"name":"Agent","expires_in":3600}`} {
			add(catUnknown, shorten(b), b, http.StatusBadRequest, "UNKNOWN_MEMBER")
		}
		add(catDuplicate, "name twice", `{"name":"Agent","name":"Other"}`, http.StatusBadRequest, "DUPLICATE_MEMBER")
		add(catDuplicate, "name twice, once escaped", `{"name":"Agent","\u006eame":"Other"}`, http.StatusBadRequest, "DUPLICATE_MEMBER")
		for _, n := range []string{" ", "   ", "\t", "\n", "\u3000", strings.Repeat("n", 201), strings.Repeat("é", 201),
			strings.Repeat("名", 201), strings.Repeat("n", 4096), "a\u0007b", "a\u007fb", "\u0085", "a\u0085b", "a\u009bb", "a\nb", "a\r\nb",
			"\u001b[2J", "agent\u0000"} {
			add(catValue, "name "+shorten(lit(n)), `{"name":`+lit(n)+`}`, http.StatusBadRequest, "INVALID_REQUEST", "JSON_NUL_CHARACTER")
		}
		return out
	}
	provisionSpec := routeSpec{body: `{}`, emptyOK: true, idents: []string{`{"name":@@}`}, extra: provisionValues}

	// The claim: every request without a live session of its own cookie
	// is 401 SIGN_IN_REQUIRED (a bearer credential is no session), checked
	// before a missing CSRF header (403), before the body.
	sessionCases := func(q req) []badCase {
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
			{"the session with its last character changed", live[:len(live)-1] + flipChar(live[len(live)-1])},
			{"the session with a character more", live + "x"}, {"the session with a character less", live[:len(live)-1]},
			{"the session in upper case", strings.ToUpper(live)}, {"the session without its prefix", strings.TrimPrefix(live, onboarding.PrefixSession)},
			{"an overlong session", onboarding.PrefixSession + strings.Repeat("A", 4000)},
			{"a signed-out session", ended}, {"org a's key", s.a.Key}, {"the provisional key", w1Key},
			{"the claimed workspace's owner key", w2Owner}, {"the claim code", w1Code},
		} {
			withCookie("cookie: "+v.name, cookie(v.value))
		}
		withCookie("an unknown session before the live one", cookie(onboarding.PrefixSession+strings.Repeat("0", 43))+"; "+cookie(live))
		for _, name := range []string{"session", "Clearance_Session", "clearance-session", "clearance_session_id", server.CookieSessionSecure} {
			withCookie("the session under the cookie name "+name, name+"="+live)
		}
		bearer("org a's org:* key as a bearer, no cookie", s.a.Key)
		bearer("the provisional key as a bearer, no cookie", w1Key)
		bearer("the claimed workspace's owner key as a bearer, no cookie", w2Owner)
		bearer("the platform key as a bearer, no cookie", x.platform)
		bearer("the session as a bearer, no cookie", live)
		bearer("the claim code as a bearer, no cookie", w1Code)
		noSession("the session in the query, no cookie", func(c badCase) badCase {
			c.path += sep(q.query) + server.CookieSession + "=" + live
			return c.with("Cookie", "")
		})
		noSession("the session in another header, no cookie", func(c badCase) badCase {
			return c.with("Cookie", "").with("X-Clearance-Session", live)
		})
		// The CSRF header must be exactly "1".
		csrf := func(name string, edit func(c badCase) badCase) {
			refuse(catCSRF, name, http.StatusForbidden, "CSRF_HEADER_REQUIRED", edit)
		}
		csrf("no "+server.HeaderCSRF, func(c badCase) badCase { return c.with(server.HeaderCSRF, "") })
		for _, v := range []string{"0", "true", "yes", "2", "11", "01", "-1", "1.0", "１", "1\u200b", "on", " 1x"} {
			csrf(server.HeaderCSRF+" "+strconv.Quote(v), func(c badCase) badCase { return c.with(server.HeaderCSRF, v) })
		}
		for _, vs := range [][]string{{""}, {"0", "1"}} {
			csrf(server.HeaderCSRF+" "+fmt.Sprintf("%q", vs), func(c badCase) badCase {
				c = c.with(server.HeaderCSRF, "")
				c.rawHeaders = http.Header{http.CanonicalHeaderKey(server.HeaderCSRF): vs}
				return c
			})
		}
		for _, h := range []string{"X-CSRF-Token", "X-Requested-With", "X-Clearance-CSRF-Token"} {
			csrf("the CSRF value in "+h, func(c badCase) badCase { return c.with(server.HeaderCSRF, "").with(h, "1") })
		}
		csrf("the CSRF value in the query", func(c badCase) badCase {
			c.path += sep(q.query) + server.HeaderCSRF + "=1"
			return c.with(server.HeaderCSRF, "")
		})
		csrf("the CSRF value in the body", func(c badCase) badCase {
			c.body = `{"claim_code":` + lit(w1Code) + `,"` + server.HeaderCSRF + `":"1"}`
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
	claimValues := func(q req) []badCase {
		out := sessionCases(q)
		add := func(cat, name, body string, headers map[string]string, status int, want ...string) {
			c := s.variant(q, cat, name, body, want...)
			c.status = status
			for k, v := range headers {
				c = c.with(k, v)
			}
			out = append(out, c)
		}
		// Not the shape of a claim code: 400, before any lookup.
		for _, v := range []struct{ name, code string }{
			{"empty", ""}, {"blank", "   "}, {"no prefix", rest}, {"a dot for the prefix's underscore", "clr_clm." + rest},
			{"an org key's prefix", tenant.PrefixOrg + rest}, {"a session's prefix", onboarding.PrefixSession + rest},
			{"the provisional key", w1Key}, {"the claimed workspace's owner key", w2Owner}, {"the live session", live},
			{"the prefix in upper case", "CLR_CLM_" + rest}, {"a leading space", " " + w1Code}, {"a leading newline", "\n" + w1Code},
			{"a leading zero-width space", "\u200b" + w1Code}, {"a leading byte order mark", "\ufeff" + w1Code},
			{"a fullwidth prefix", "ｃｌｒ＿ｃｌｍ＿" + rest}, {"a Cyrillic letter in the prefix", "clr_сlm_" + rest},
			{"129 bytes", onboarding.PrefixClaimCode + strings.Repeat("A", 121)},
			{"129 bytes of non-ASCII", onboarding.PrefixClaimCode + strings.Repeat("é", 60) + "A"},
			{"4096 bytes", onboarding.PrefixClaimCode + strings.Repeat("A", 4088)},
			{"the code twice", w1Code + w1Code + w1Code}, {"a URL", "https://clearance.example/claim?code=" + w1Code},
		} {
			add(catValue, "claim_code "+v.name, claimBody(v.code), nil, http.StatusBadRequest, "INVALID_REQUEST")
		}
		for _, b := range []string{`{}`, `{"claim_code":null}`} {
			add(catValue, b, b, nil, http.StatusBadRequest, "INVALID_REQUEST")
		}
		for _, v := range []string{`{"code":` + lit(w1Code) + `}`, `[` + lit(w1Code) + `]`, `[]`, `0`, `false`} {
			add(catWrongType, "claim_code "+shorten(v), `{"claim_code":`+v+`}`, nil, http.StatusBadRequest, "WRONG_TYPE")
		}
		add(catMalformed, "two codes", `{"claim_code":`+lit(w1Code)+`,`+lit(w1Code)+`}`, nil, http.StatusBadRequest, "MALFORMED_JSON")
		for _, b := range []string{`{"claim_code":` + lit(w1Code) + `,"org_id":` + lit(w1Org) + `}`, `{"code":` + lit(w1Code) + `}`,
			`{"claimCode":` + lit(w1Code) + `}`, `{"Claim_Code":` + lit(w1Code) + `}`, `{"claim_code ":` + lit(w1Code) + `}`,
			`{"claim_code":` + lit(w1Code) + `,"name":"Mine"}`, `{"claim_code":` + lit(w1Code) + `,"scopes":["org:*"]}`,
			`{"claim_code":` + lit(w1Code) + `,"account_id":` + lit(unknownID) + `}`} {
			add(catUnknown, shorten(b), b, nil, http.StatusBadRequest, "UNKNOWN_MEMBER")
		}
		add(catDuplicate, "claim_code twice", `{"claim_code":"clr_clm_x","claim_code":`+lit(w1Code)+`}`, nil,
			http.StatusBadRequest, "DUPLICATE_MEMBER")
		add(catValue, "claim_code with NUL", claimBody(w1Code+"\u0000"), nil, http.StatusBadRequest, "JSON_NUL_CHARACTER")
		// Shaped like a code (the prefix, at most 128 bytes) but no live
		// code: one answer, 404 CLAIM_CODE_INVALID, whatever the reason.
		// (Control characters and non-ASCII after the prefix are not
		// checked for their shape: they are no code's either.)
		for _, v := range []struct{ name, code string }{
			{"an unknown code", onboarding.PrefixClaimCode + strings.Repeat("A", 43)},
			{"the prefix alone", onboarding.PrefixClaimCode}, {"128 bytes", onboarding.PrefixClaimCode + strings.Repeat("A", 120)},
			{"the code with its last character changed", w1Code[:len(w1Code)-1] + flipChar(w1Code[len(w1Code)-1])},
			{"the code with a character more", w1Code + "A"}, {"the code with a character less", w1Code[:len(w1Code)-1]},
			{"the code's random part in upper case", onboarding.PrefixClaimCode + strings.ToUpper(rest)},
			{"the code's random part in lower case", onboarding.PrefixClaimCode + strings.ToLower(rest)},
			{"a trailing space", w1Code + " "}, {"a trailing newline", w1Code + "\n"}, {"a trailing zero-width space", w1Code + "\u200b"},
			{"a control character inside", onboarding.PrefixClaimCode + "\u0007" + rest},
			{"non-ASCII after the prefix", onboarding.PrefixClaimCode + strings.Repeat("é", 43)},
			{"fullwidth after the prefix", onboarding.PrefixClaimCode + "ＡＢＣ"},
			{"a percent-encoded NUL", w1Code + "%00"},
			{"a code another account spent", w2Code},
		} {
			add(catValue, "claim_code "+v.name, claimBody(v.code), nil, http.StatusNotFound, "CLAIM_CODE_INVALID")
		}
		add(catForeign, "the other account's session, its spent code with a character more", claimBody(w2Code+"A"), account(other),
			http.StatusNotFound, "CLAIM_CODE_INVALID")
		return out
	}
	// After the accepted claim (w1, by the live account): the same
	// account again mints nothing (409, nothing in the org's ledger), and
	// the code is nobody else's.
	headOf := func(orgID string) string {
		t.Helper()
		r := x.req(t, "GET", pathLedger+"?limit=1&org_id="+orgID, x.platform, nil, nil).want(t, http.StatusOK)
		return fmt.Sprint(lookup(r.JSON, "head.seq")) + " " + r.str("head.entry_hash")
	}
	claimLate := func(t *testing.T) {
		t.Helper()
		h1, h2 := headOf(w1Org), headOf(w2.str("org_id"))
		for _, c := range []struct {
			name, secret, code string
			status             int
			want               string
		}{
			{"the claimer again", live, w1Code, http.StatusConflict, onboarding.CodeAlreadyClaimed},
			{"another account", other, w1Code, http.StatusNotFound, onboarding.CodeClaimCodeInvalid},
			{"the other account, of its own workspace again", other, w2Code, http.StatusConflict, onboarding.CodeAlreadyClaimed},
			{"the claimer, of the other account's workspace", live, w2Code, http.StatusNotFound, onboarding.CodeClaimCodeInvalid},
		} {
			r := s.send(t, badCase{category: "late", name: c.name, method: "POST", path: pathClaim, body: claimBody(c.code),
				hasBody: true, headers: account(c.secret)})
			if r.Status != c.status || r.str("code") != c.want || authorizes(r.JSON) {
				t.Errorf("a claim by %s after the claims: want %d %s: %s", c.name, c.status, c.want, r)
			}
		}
		if headOf(w1Org) != h1 || headOf(w2.str("org_id")) != h2 {
			t.Errorf("refused claims moved a claimed workspace's ledger")
		}
	}
	claimSpec := routeSpec{headers: account(live), body: claimBody(w1Code), idents: []string{`{"claim_code":@@}`},
		extra: claimValues, late: claimLate}

	return map[string]routeSpec{
		"POST " + pathProvision: provisionSpec,
		"POST " + pathClaim:     claimSpec,
	}
}

// The battery of TestBadInputOnEveryRoute on the zero-human lane's routes
// alone, in an env of its own: their cases are refused with a 4xx and a
// stable code, never authorize, and change nothing (both orgs' ledger
// heads after every case; what the API shows and every byte of the store
// after the battery); then each route's accepted request is accepted.
func TestBadInputOnWorkspaceRoutes(t *testing.T) {
	t.Parallel()
	var mailbox string
	x := newExecEnvWith(t, "", func(x *execEnv) {
		x.secretsKey = testSecretsKey
		mailbox = badInputMailbox(t, x)
	})
	s := &badSuite{t: t, x: x, a: x.o, scoped: map[string]string{},
		byCategory: map[string]int{}, byCode: map[string]int{}, byRoute: map[string]int{}}
	s.b = x.createOrg("Foreign")
	specs := s.workspaceSpecs(mailbox)

	served := map[string][]string{} // path -> methods, of the whole table
	var table []tableRoute
	for _, r := range readRouteTable(t) {
		served[r.path] = append(served[r.path], r.method)
		if _, ok := specs[r.pattern]; ok {
			table = append(table, r)
		}
	}
	if len(table) != len(specs) {
		t.Fatalf("routes.go serves %d of the %d routes specified", len(table), len(specs))
	}

	before := s.snapshot(t)
	fpBefore := x.fingerprint(t)
	heads := s.heads(t)
	controls := make([]req, len(table))
	for i, r := range table {
		spec := specs[r.pattern]
		q := s.accepted(r, spec)
		controls[i] = q
		cases := s.cases(r, spec, q, served[r.path])
		if len(cases) == 0 {
			t.Errorf("route %q: no bad-input cases were generated", r.pattern)
		}
		t.Run(r.pattern, func(t *testing.T) {
			for _, c := range cases {
				res := s.send(t, c)
				s.check(t, r, c, res)
				if now := s.heads(t); now != heads {
					t.Errorf("%s / %s: the request changed the ledger head %v -> %v: %s", c.category, c.name, heads, now, res)
					heads = now
				}
			}
		})
	}
	if d := cmp.Diff(before, s.snapshot(t)); d != "" {
		t.Errorf("bad input changed observable state (-before +after):\n%s", d)
	}
	if fp := x.fingerprint(t); fp != fpBefore {
		t.Errorf("bad input changed the store: %s", cmp.Diff(fpBefore, fp))
	}

	order := make([]int, len(table))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		return specs[table[order[i]].pattern].phase < specs[table[order[j]].pattern].phase
	})
	for _, i := range order {
		r, q := table[i], controls[i]
		var body any
		if q.body != "" {
			body = q.body
		}
		if res := x.req(t, q.method, q.url(), q.key, body, q.headers); res.Status < 200 || res.Status > 299 {
			t.Errorf("%s: the accepted request is refused: %s", r.pattern, res)
		}
		if late := specs[r.pattern].late; late != nil {
			late(t)
		}
	}
	x.ledgerOK(t)

	total := 0
	for _, n := range s.byCategory {
		total += n
	}
	t.Logf("bad-input totals: routes covered %d of %d, bad inputs tried %d, 5xx seen %d, authorizations %d",
		len(s.byRoute), len(table), total, s.fiveXX, s.authorized)
	for _, c := range sortedCounts(s.byCategory) {
		t.Logf("  %5d  %s", c.n, c.k)
	}
	codes := sortedCounts(s.byCode)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s %d", c.k, c.n)
	}
	t.Logf("codes answered: %s", strings.Join(parts, ", "))
	if len(s.byRoute) != len(table) || s.fiveXX != 0 || s.authorized != 0 {
		t.Errorf("want every route covered, no 5xx and no authorization")
	}
}
