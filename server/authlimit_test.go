package server

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/mail"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
}

// A source gets its burst, then one request per 60/rate seconds; the
// global budget holds across sources; a refused request takes nothing
// from either budget.
func TestAuthLimitPerSourceAndGlobal(t *testing.T) {
	clock := newFakeClock()
	l := newAuthLimiter(DefaultAuthRateLimit, DefaultAuthGlobalRateLimit, maxAuthSources, clock.Now)
	const burst, globalBurst = 2 * DefaultAuthRateLimit, 2 * DefaultAuthGlobalRateLimit

	for i := range burst {
		if wait, scope := l.allow("198.51.100.1"); scope != "" {
			t.Fatalf("request %d of the burst refused (%s, %v)", i+1, scope, wait)
		}
	}
	wait, scope := l.allow("198.51.100.1")
	if scope != authScopeSource || wait != 6*time.Second {
		t.Fatalf("beyond the burst: %q, wait %v; want source, 6s (10 a minute)", scope, wait)
	}
	clock.advance(6 * time.Second)
	if _, scope := l.allow("198.51.100.1"); scope != "" {
		t.Fatalf("after the wait: refused (%s)", scope)
	}
	if _, scope := l.allow("198.51.100.1"); scope != authScopeSource {
		t.Fatalf("a second request after one refill: %q, want source", scope)
	}

	// A refusal takes nothing from the global budget.
	before := l.global.TokensAt(clock.Now())
	if _, scope := l.allow("198.51.100.1"); scope != authScopeSource || l.global.TokensAt(clock.Now()) != before {
		t.Fatalf("a refused request: %q, global tokens %v -> %v", scope, before, l.global.TokensAt(clock.Now()))
	}

	// The global budget: 200 in a burst across sources.
	l = newAuthLimiter(DefaultAuthRateLimit, DefaultAuthGlobalRateLimit, maxAuthSources, clock.Now)
	for i := range globalBurst / burst {
		for j := range burst {
			if _, scope := l.allow(fmt.Sprintf("203.0.113.%d", i)); scope != "" {
				t.Fatalf("request %d in all refused: %s", i*burst+j+1, scope)
			}
		}
	}
	wait, scope = l.allow("192.0.2.99")
	if scope != authScopeGlobal || wait != 600*time.Millisecond {
		t.Fatalf("beyond the global burst: %q, wait %v; want global, 0.6s (100 a minute)", scope, wait)
	}
	// ... and nothing from the source's own.
	if tokens := l.sources["192.0.2.99"].Value.(*authSource).lim.TokensAt(clock.Now()); tokens != burst {
		t.Fatalf("a source refused by the global budget holds %v tokens, want %d", tokens, burst)
	}
	clock.advance(600 * time.Millisecond)
	if _, scope := l.allow("192.0.2.99"); scope != "" {
		t.Fatalf("after one global refill: refused %s", scope)
	}
	if _, scope := l.allow("192.0.2.100"); scope != authScopeGlobal {
		t.Fatalf("the global budget spent again: %q, want global", scope)
	}
	t.Logf("per source: burst %d, then %d/min; in all: burst %d, then %d/min", burst, DefaultAuthRateLimit, globalBurst, DefaultAuthGlobalRateLimit)
}

// The sources a budget tracks are bounded: idle ones (a full bucket) are
// forgotten as requests come, and beyond the cap the least recently used
// one goes; a busy source is kept while the cap allows.
func TestAuthLimitSourcesBounded(t *testing.T) {
	clock := newFakeClock()
	const limit = 100
	l := newAuthLimiter(DefaultAuthRateLimit, -1, limit, clock.Now)
	// A busy source, its bucket spent.
	for range 2 * DefaultAuthRateLimit {
		l.allow("busy")
	}
	if _, scope := l.allow("busy"); scope != authScopeSource {
		t.Fatal("the busy source is not limited")
	}
	// Made-up sources, far more than the cap.
	for i := range 50 * limit {
		l.allow(fmt.Sprintf("made-up-%d", i))
		if n := l.tracked(); n > limit {
			t.Fatalf("%d sources tracked after %d made up, want at most %d", n, i+1, limit)
		}
	}
	// The cap evicted the busy source among the least recently used; it
	// is limited again once it spends a fresh bucket (the global budget
	// bounds what that is worth).
	l = newAuthLimiter(DefaultAuthRateLimit, -1, limit, clock.Now)
	for range 2 * DefaultAuthRateLimit {
		l.allow("busy")
	}
	for i := range limit / 2 {
		l.allow(fmt.Sprintf("other-%d", i))
	}
	if _, scope := l.allow("busy"); scope != authScopeSource {
		t.Fatal("the busy source was forgotten below the cap")
	}
	// Idle: two minutes refill a bucket of 20 at 10 a minute; the next
	// requests forget the idle sources, a few each.
	clock.advance(2 * time.Minute)
	for range limit {
		l.allow("fresh")
	}
	if n := l.tracked(); n > 2 {
		t.Fatalf("%d sources tracked after every other went idle, want at most 2", n)
	}
}

func TestAuthSourceOf(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.7:1234":                 "203.0.113.7",
		"203.0.113.7":                      "203.0.113.7",
		"[::ffff:192.0.2.1]:80":            "192.0.2.1",
		"[2001:db8:1:2:3:4:5:6]:443":       "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:ffff::1]:8080": "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:443":            "2001:db8:1:3::/64",
		"[fe80::1%eth0]:80":                "fe80::/64",
		"[::1]:80":                         "::/64",
		"not an address":                   "?not an address",
	} {
		if got := authSourceOf(in); got != want {
			t.Errorf("authSourceOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// newAuthTestServer is a server over a fresh engine whose codes are
// mailed to a mailbox in a temp dir (returned).
func newAuthTestServer(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := filepath.Join(t.TempDir(), "mailbox")
	mb, err := mail.NewMailbox(dir, "clearance@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := clearance.Open(st, clearance.Options{Mailer: mb, SecretsKey: []byte("server-authlimit-test-secrets-key-32!")})
	if err != nil {
		t.Fatal(err)
	}
	return New(eng, opts), dir
}

// authReq serves one request from remote (a RemoteAddr) and returns the
// recorded answer.
func authReq(s *Server, method, target, remote, body string, header map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.RemoteAddr = remote
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
		if strings.Contains(target, "/automation/") {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

func problemCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var p struct{ Code string }
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	return p.Code
}

// Every public auth route has the budget, which --rate-limit -1 (the
// per-credential bucket off) leaves on: beyond it, 429 RATE_LIMITED with
// Retry-After, before the body is read. A source is an IPv6 /64; the
// automation routes have a budget of their own, 6 times larger.
func TestAuthLimitOnEveryPublicAuthRoute(t *testing.T) {
	s, _ := newAuthTestServer(t, Options{RateLimit: -1, AuthRateLimit: 1, AuthGlobalRateLimit: 1e6})
	checked := 0
	for i, rt := range s.routes() {
		method, path, _ := strings.Cut(rt.pattern, " ")
		if rt.auth != authPublic || !strings.HasPrefix(path, "/v1/public/auth/") {
			continue
		}
		checked++
		burst := 2 // AuthRateLimit 1: burst 2
		if strings.HasPrefix(path, authPathAutomation) {
			burst = 2 * authAutomationFactor
		}
		remote := fmt.Sprintf("[2001:db8:0:%x::1]:1234", i)
		for j := range burst {
			if w := authReq(s, method, path, remote, "", nil); w.Code == http.StatusTooManyRequests {
				t.Fatalf("%s: request %d of the burst %d refused", rt.pattern, j+1, burst)
			}
		}
		// Another address of the same /64 shares the budget.
		w := authReq(s, method, path, fmt.Sprintf("[2001:db8:0:%x:ffff::2]:999", i), `{"email":"a@example.com"}`, nil)
		if w.Code != http.StatusTooManyRequests || problemCode(t, w) != codeRateLimited || w.Header().Get("Retry-After") == "" {
			t.Fatalf("%s beyond the budget: %d %s, Retry-After %q; want 429 %s", rt.pattern, w.Code, w.Body, w.Header().Get("Retry-After"), codeRateLimited)
		}
		// Another /64 does not.
		if w := authReq(s, method, path, fmt.Sprintf("[2001:db8:1:%x::1]:1234", i), "", nil); w.Code == http.StatusTooManyRequests {
			t.Fatalf("%s: another /64 refused", rt.pattern)
		}
	}
	if checked < 7 {
		t.Fatalf("%d public auth routes checked, want at least 7 (register and login start/verify, authorize GET and POST, token)", checked)
	}
}

// The budgets in numbers, over HTTP: the code routes share one budget per
// source (20, then 10 a minute), the automation routes another; the global
// budget holds across sources; AuthRateLimit -1 turns them off.
func TestAuthLimitDefaultsOverHTTP(t *testing.T) {
	s, _ := newAuthTestServer(t, Options{})
	const src = "198.51.100.7:5555"
	body := `{"email":"nobody@example.com","otp_code":"123456"}`
	for i := range 2 * DefaultAuthRateLimit {
		path := "/v1/public/auth/login/verify"
		if i%2 == 1 {
			path = "/v1/public/auth/register/verify"
		}
		if w := authReq(s, "POST", path, src, body, nil); w.Code == http.StatusTooManyRequests {
			t.Fatalf("request %d refused: %s", i+1, w.Body)
		}
	}
	w := authReq(s, "POST", "/v1/public/auth/login/start", src, `{"email":"nobody@example.com"}`, nil)
	if w.Code != http.StatusTooManyRequests || problemCode(t, w) != codeRateLimited || w.Header().Get("Retry-After") != "6" {
		t.Fatalf("the 21st request: %d %s Retry-After %q, want 429 RATE_LIMITED, 6", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	if w := authReq(s, "POST", "/v1/public/auth/automation/token", src, "grant_type=authorization_code", nil); w.Code == http.StatusTooManyRequests {
		t.Fatalf("the automation budget is spent by the code routes: %s", w.Body)
	}

	// The global budget: 3 a minute, burst 6, whatever the sources.
	g, _ := newAuthTestServer(t, Options{AuthGlobalRateLimit: 3})
	for i := range 6 {
		if w := authReq(g, "POST", "/v1/public/auth/login/verify", fmt.Sprintf("192.0.2.%d:1", i), body, nil); w.Code == http.StatusTooManyRequests {
			t.Fatalf("global request %d refused", i+1)
		}
	}
	w = authReq(g, "POST", "/v1/public/auth/login/verify", "192.0.2.200:1", body, nil)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "on this server") || w.Header().Get("Retry-After") != "20" {
		t.Fatalf("beyond the global budget: %d %s Retry-After %q, want 429, 20", w.Code, w.Body, w.Header().Get("Retry-After"))
	}

	off, _ := newAuthTestServer(t, Options{AuthRateLimit: -1})
	for i := range 200 {
		if w := authReq(off, "POST", "/v1/public/auth/login/verify", src, body, nil); w.Code == http.StatusTooManyRequests {
			t.Fatalf("AuthRateLimit -1: request %d refused", i+1)
		}
	}
}

var authCodeIn = regexp.MustCompile(`code is ([0-9]{6})\.`)

// signInOver signs addr in over s with requests to host, and returns the
// login/verify answer.
func signInOver(t *testing.T, s *Server, mailbox, host, addr string, tlsState *tls.ConnectionState) *httptest.ResponseRecorder {
	t.Helper()
	do := func(path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "http://"+host+path, strings.NewReader(body))
		r.TLS = tlsState
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w
	}
	if w := do("/v1/public/auth/login/start", fmt.Sprintf(`{"email":%q}`, addr)); w.Code != http.StatusAccepted {
		t.Fatalf("login/start: %d %s", w.Code, w.Body)
	}
	msgs, err := mail.ReadMailbox(mailbox)
	if err != nil {
		t.Fatal(err)
	}
	var code string
	for _, m := range msgs {
		if c := authCodeIn.FindStringSubmatch(m.Text); m.To == addr && c != nil {
			code = c[1]
		}
	}
	w := do("/v1/public/auth/login/verify", fmt.Sprintf(`{"email":%q,"otp_code":%q}`, addr, code))
	if w.Code != http.StatusOK {
		t.Fatalf("login/verify: %d %s", w.Code, w.Body)
	}
	return w
}

// The session cookie is __Host-clearance_session (Secure, Path=/, no
// Domain) over TLS, behind an https public URL and on any host but a
// loopback one; clearance_session (not Secure) only over plain HTTP to a
// loopback host. Only the name that applies is read.
func TestSessionCookieName(t *testing.T) {
	s, mailbox := newAuthTestServer(t, Options{AuthRateLimit: -1})
	cases := []struct {
		name, host string
		tls        bool
		public     string
		want       string
	}{
		{"plain HTTP to 127.0.0.1", "127.0.0.1:8080", false, "", CookieSession},
		{"plain HTTP to localhost", "localhost:8080", false, "", CookieSession},
		{"plain HTTP to [::1]", "[::1]:8080", false, "", CookieSession},
		{"plain HTTP to another host", "clearance.example.com", false, "", CookieSessionSecure},
		{"plain HTTP to a LAN address", "192.168.1.10:8080", false, "", CookieSessionSecure},
		{"TLS to 127.0.0.1", "127.0.0.1:8443", true, "", CookieSessionSecure},
		{"an https public URL, loopback Host", "127.0.0.1:8080", false, "https://clearance.example.com", CookieSessionSecure},
		{"an http loopback public URL", "clearance.example.com", false, "http://localhost:8080", CookieSession},
		{"an http public URL of another host", "127.0.0.1:8080", false, "http://clearance.internal:8080", CookieSessionSecure},
	}
	for i, c := range cases {
		s.opts.PublicURL = c.public
		var state *tls.ConnectionState
		if c.tls {
			state = &tls.ConnectionState{}
		}
		addr := fmt.Sprintf("owner%d@example.com", i)
		w := signInOver(t, s, mailbox, c.host, addr, state)
		cookies := w.Result().Cookies()
		if len(cookies) != 1 || cookies[0].Name != c.want {
			t.Fatalf("%s: Set-Cookie %v, want one %s", c.name, w.Header().Values("Set-Cookie"), c.want)
		}
		ck := cookies[0]
		secure := c.want == CookieSessionSecure
		if ck.Secure != secure || ck.Path != "/" || ck.Domain != "" || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode {
			t.Fatalf("%s: cookie %q, want Secure=%v, Path=/, no Domain, HttpOnly, SameSite=Lax", c.name, w.Header().Get("Set-Cookie"), secure)
		}
		// Read under the name that applies, never the other.
		other := CookieSession
		if !secure {
			other = CookieSessionSecure
		}
		session := func(name string) int {
			r := httptest.NewRequest("GET", "http://"+c.host+"/v1/public/auth/session", nil)
			r.TLS = state
			r.AddCookie(&http.Cookie{Name: name, Value: ck.Value})
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			return w.Code
		}
		if got := session(c.want); got != http.StatusOK {
			t.Fatalf("%s: the session under %s: %d, want 200", c.name, c.want, got)
		}
		if got := session(other); got != http.StatusUnauthorized {
			t.Fatalf("%s: the session under %s: %d, want 401", c.name, other, got)
		}
		// Sign-out clears the same name.
		r := httptest.NewRequest("DELETE", "http://"+c.host+"/v1/public/auth/session", nil)
		r.TLS = state
		r.AddCookie(&http.Cookie{Name: c.want, Value: ck.Value})
		r.Header.Set(HeaderCSRF, "1")
		out := httptest.NewRecorder()
		s.ServeHTTP(out, r)
		if cs := out.Result().Cookies(); out.Code != http.StatusNoContent || len(cs) != 1 || cs[0].Name != c.want ||
			cs[0].MaxAge != -1 || cs[0].Secure != secure {
			t.Fatalf("%s: sign-out %d %v", c.name, out.Code, out.Header().Values("Set-Cookie"))
		}
	}
}
