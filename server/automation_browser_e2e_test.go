package server_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/clearancehq/clearance/internal/browsertest"
)

// acCallback is a request the automation platform's redirect URI received.
type acCallback struct {
	query   url.Values
	referer string
}

// TestAutomationConnectorInBrowser connects an automation platform in
// headless Chromium: the authorization URL shows the sign-in page, the
// owner types the e-mail address and the code mailed to it (read from the
// SMTP server in this process), the page reloads into the consent page,
// Allow lands on the platform's redirect URI with a code and the state,
// which the platform trades for a credential that names the workspace.
// Deny lands there with access_denied; the consent page refuses to show in
// a frame, even of its own origin and signed in.
func TestAutomationConnectorInBrowser(t *testing.T) {
	browsertest.Chromium(t) // skip before setting anything up
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	x := newACEnv(t)
	const owner = "ada@browser.example"
	const wsName = `Analytical <Engines> & Co`
	w := x.signUpNamed(owner, wsName)

	// The platform: its redirect URI records what it receives.
	calls := make(chan acCallback, 8)
	platform := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/oauth/callback" {
			http.NotFound(rw, r)
			return
		}
		calls <- acCallback{query: r.URL.Query(), referer: r.Header.Get("Referer")}
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(rw, `<!doctype html><title>Connected</title><p id="done">connected</p>`)
	}))
	defer platform.Close()
	redirect := platform.URL + "/oauth/callback"
	clientID := x.register(acClientName, redirect)
	next := func(what string) acCallback {
		t.Helper()
		select {
		case c := <-calls:
			return c
		case <-ctx.Done():
			t.Fatalf("%s: the platform received nothing: %v", what, ctx.Err())
			return acCallback{}
		}
	}

	// Clearance as the browser sees it: the env's server, with two pages
	// of this test's beside it (a page that frames another, and a page
	// that may be framed); the requests of frames to the authorization
	// endpoint are noted, with whether they carried the session.
	framed := make(chan bool, 8)
	site := http.NewServeMux()
	site.Handle("/", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == acPathAuthorize && r.Header.Get("Sec-Fetch-Dest") == "iframe" {
			_, err := r.Cookie(signinCookie)
			framed <- err == nil
		}
		x.server.ServeHTTP(rw, r)
	}))
	site.HandleFunc("GET /test/frame", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = fmt.Fprintf(rw, `<!doctype html><title>Frame</title><iframe id="f" src="%s" onload="document.body.dataset.loaded = '1'"></iframe>`,
			html.EscapeString(r.URL.Query().Get("src")))
	})
	site.HandleFunc("GET /test/plain", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(rw, `<!doctype html><title>Plain</title><p id="plain">plain</p>`)
	})
	origin := httptest.NewServer(site)
	defer origin.Close()
	authorizeURL := func(state string, p acPKCE) string {
		return origin.URL + acPathAuthorize + "?" + acQuery(clientID, redirect, state, p).Encode()
	}

	browser := browsertest.Start(ctx, t)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(browser.Ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(browser.Ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}

	// The sign-in page: framed by nobody, the platform named as text.
	p := newACPKCE(t)
	res, err := chromedp.Run(browser.Ctx, chromedp.NavigateResponse(authorizeURL("browser-1", p)))
	if err != nil {
		t.Fatalf("open the authorization URL: %v", err)
	}
	if res.Status != http.StatusOK || !strings.Contains(acHeader(res.Headers, "Content-Security-Policy"), "frame-ancestors 'none'") ||
		acHeader(res.Headers, "X-Frame-Options") != "DENY" || acHeader(res.Headers, "Referrer-Policy") != "no-referrer" {
		t.Fatalf("the sign-in page as the browser got it: %d %v", res.Status, res.Headers)
	}
	do("the sign-in page", chromedp.WaitVisible(chromedp.CSS("#email")))
	if got := eval(`document.querySelector('.note strong').textContent + '|' + document.querySelectorAll('.note b').length`); got != acClientName+"|0" {
		t.Fatalf("the sign-in page names the platform as %q", got)
	}
	do("ask for a code", chromedp.SendKeys(chromedp.CSS("#email"), owner), chromedp.Click(chromedp.CSS("#send")),
		chromedp.WaitVisible(chromedp.CSS("#code")))
	if msgs := x.mail.to(t, owner); len(msgs) != 2 || !strings.Contains(strings.ToLower(msgs[1].subject), "sign-in") {
		t.Fatalf("%d messages to the owner, want the sign-up code and a sign-in code", len(msgs))
	}
	do("sign in", chromedp.SendKeys(chromedp.CSS("#code"), x.mail.lastCode(t, owner)), chromedp.Click(chromedp.CSS("#verify")),
		chromedp.WaitVisible(chromedp.CSS("#allow")))

	// The consent page, after the reload: the workspace chosen, the
	// session out of the page's reach.
	if got := eval(`document.querySelector('h1').textContent`); got != "Connect "+acClientName {
		t.Fatalf("consent heading %q", got)
	}
	if got := eval(`document.querySelector('input[name=org_id]:checked').value + '|' +
		document.querySelector('input[name=org_id]:checked').parentElement.textContent.trim()`); got != w.orgID+"|"+wsName {
		t.Fatalf("the consent page's workspace %q, want %s|%s", got, w.orgID, wsName)
	}
	if got := eval(`document.cookie`); got != "" {
		t.Fatalf("the page reads the cookies %q", got)
	}

	// Allow: to the platform, with the code and the state, no Referer.
	do("allow", chromedp.Click(chromedp.CSS("#allow")))
	cb := next("allow")
	code := cb.query.Get("code")
	if len(cb.query) != 2 || cb.query.Get("state") != "browser-1" || len(code) < 20 || cb.referer != "" {
		t.Fatalf("the platform received %v (Referer %q)", cb.query, cb.referer)
	}
	do("land on the platform's page", chromedp.WaitVisible(chromedp.CSS("#done")))
	landed, err := chromedp.Run(browser.Ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if u, err := url.Parse(landed); err != nil || !strings.HasPrefix(landed, redirect+"?") || u.Query().Get("code") != code {
		t.Fatalf("the browser landed on %q", landed)
	}

	// The platform trades the code for its credential.
	tok, keyID := acWantToken(t, x.exchange(acTokenForm(code, redirect, clientID, p.verifier)), w.orgID)
	me := x.do("GET", acPathMe, tok, nil, nil).want(t, http.StatusOK)
	if me.str("key_id") != keyID || me.str("workspace.org_id") != w.orgID || me.str("workspace.name") != wsName {
		t.Fatalf("me: %s", me)
	}
	x.decide(tok, signinDecision)

	// Deny, signed in already: the consent page at once, then back to the
	// platform with access_denied and the state, no code.
	do("deny", chromedp.Navigate(authorizeURL("browser-2", newACPKCE(t))), chromedp.WaitVisible(chromedp.CSS("#deny")),
		chromedp.Click(chromedp.CSS("#deny")))
	cb = next("deny")
	if cb.query.Get("error") != "access_denied" || cb.query.Get("state") != "browser-2" || cb.query.Has("code") ||
		cb.query.Get("error_description") == "" || len(cb.query) != 3 || cb.referer != "" {
		t.Fatalf("the platform received %v (Referer %q) after deny", cb.query, cb.referer)
	}
	do("land on the platform's page after deny", chromedp.WaitVisible(chromedp.CSS("#done")))
	if landed, err := chromedp.Run(browser.Ctx, chromedp.Location()); err != nil || !strings.HasPrefix(landed, redirect+"?") {
		t.Fatalf("after deny the browser is at %q: %v", landed, err)
	}

	// Framing: a page of the same origin shows a plain page in a frame,
	// and not the consent page, which the server did send it.
	frame := func(src string) string {
		t.Helper()
		do("frame "+src, chromedp.Navigate(origin.URL+"/test/frame?src="+url.QueryEscape(src)))
		v, err := chromedp.Run(browser.Ctx, chromedp.Poll[string](`document.body.dataset.loaded === '1' && (() => {
			let d;
			try { d = document.getElementById('f').contentDocument; } catch (e) { return 'blocked: ' + e.name; }
			if (!d) return 'blocked';
			if (d.getElementById('allow') || d.getElementById('email')) return 'shown';
			if (d.getElementById('plain')) return 'plain';
			return 'empty: ' + d.URL;
		})()`, chromedp.WithPollingTimeout(30*time.Second)))
		if err != nil {
			t.Fatalf("frame %s: %v", src, err)
		}
		return v
	}
	if got := frame("/test/plain"); got != "plain" {
		t.Fatalf("a plain page in a frame: %q", got)
	}
	// Refused, Chromium shows its error page, of no origin the parent may
	// read; shown, the parent would read the consent form.
	if got := frame(authorizeURL("browser-3", newACPKCE(t))); got != "blocked" {
		t.Fatalf("the consent page in a frame: %q, want blocked", got)
	}
	select {
	case signedIn := <-framed:
		if !signedIn {
			t.Fatalf("the frame's request carried no session: the server sent the sign-in page")
		}
	case <-ctx.Done():
		t.Fatal("the frame never asked for the consent page")
	}
	select {
	case c := <-calls:
		t.Fatalf("the platform received %v from a framed page", c.query)
	default:
	}
}

// acHeader is a response header as the browser reports it (any case).
func acHeader(h network.Headers, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			s, _ := v.(string)
			return s
		}
	}
	return ""
}
