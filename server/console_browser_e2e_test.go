package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/clearancehq/clearance/internal/browsertest"
)

// axeScript is axe-core, installed by `npm ci` in console/testdata/axe.
var axeScript = filepath.Join("..", "console", "testdata", "axe", "node_modules", "axe-core", "axe.min.js")

// TestConsoleInBrowser drives the operator console in headless Chromium
// against a real server and engine: an org with an ENFORCEMENT policy,
// decisions of every outcome in both modes and one grant claimed and
// committed. It signs in with the org key, filters the decisions and
// checks the rows equal the API's, opens a sealed dossier and sees every
// check of its proof packet and capsule ticked, sees an unsealed one say
// so, reads the activity charts' numbers and checks they equal the API's,
// runs axe-core on every view (no serious or critical violation) and
// signs out. Screenshots of each view are saved under the test's
// temporary directory.
func TestConsoleInBrowser(t *testing.T) {
	browsertest.Chromium(t) // skip before setting anything up
	axe, err := os.ReadFile(axeScript)
	if err != nil {
		if os.Getenv("CLEARANCE_REQUIRE_BROWSER") == "1" {
			t.Fatalf("axe-core is missing (run: npm ci --prefix console/testdata/axe): %v", err)
		}
		t.Skipf("axe-core is missing: run `npm ci --prefix console/testdata/axe` (CLEARANCE_REQUIRE_BROWSER=1 makes this a failure): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	x := newExecEnv(t, bandsBundle)
	for _, body := range []string{`{"amount":20}`, `{"amount":2000}`, `{"amount":6000}`, `{"amount":20000}`, `{"amount":30000}`,
		`{"amount":20000,"mode":"SHADOW"}`, `{"amount":40,"mode":"SHADOW"}`} {
		x.req(t, "POST", pathEvaluate, x.o.Key, body, nil).want(t, http.StatusOK)
	}
	g := x.grantFor(t, intentSpec{amount: 120})
	claim := x.claimed(t, g)
	x.finalize(t, g.token, claim.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	sealedBlock := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":50000}`, nil).want(t, http.StatusOK)
	x.req(t, "POST", pathSeal, x.o.Key, `{}`, nil).want(t, http.StatusOK)
	unsealed := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":70}`, nil).want(t, http.StatusOK)
	x.advance(time.Minute) // the default window ends now, exclusive
	// The console's data routes may not be served on a branch without them.
	consoleAPI := x.req(t, "GET", "/v1/console/decisions", x.o.Key, nil, nil).Status != http.StatusNotFound

	dir := t.TempDir()
	browser := browsertest.Start(ctx, t)
	tab := browser.Ctx
	if err := chromedp.Do(tab, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(tab, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	// answers keeps what the page received from the activity route, so
	// the numbers drawn are compared with the very answer they came from.
	var mu sync.Mutex
	activityIDs := []network.RequestID{}
	if err := chromedp.Listen(tab, func(ev any) {
		if e, ok := ev.(*network.EventResponseReceived); ok && strings.Contains(e.Response.URL, "/v1/console/activity") {
			mu.Lock()
			activityIDs = append(activityIDs, e.RequestID)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(tab, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(tab, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	waitFor := func(what, expr string) string {
		t.Helper()
		v, err := chromedp.Run(tab, chromedp.Poll[string](expr, chromedp.WithPollingTimeout(30*time.Second)))
		if err != nil {
			t.Fatalf("waiting for %s: %v (the page says %q)", what, err, eval(`document.getElementById('main').innerText.slice(0, 2000)`))
		}
		return v
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, png, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	injected := false
	accessible := func(view string) {
		t.Helper()
		if !injected {
			if _, err := chromedp.Run(tab, chromedp.Evaluate[bool](string(axe)+"; true")); err != nil {
				t.Fatalf("inject axe-core: %v", err)
			}
			injected = true
		}
		got, err := chromedp.Run(tab, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ['violations']}).then(r => JSON.stringify(
			r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v => ({id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))))`, chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("axe on %s: %v", view, err)
		}
		if got != "[]" {
			t.Errorf("accessibility of %s: serious or critical violations: %s", view, got)
		}
	}

	// The page, under its policy.
	res, err := chromedp.Run(tab, chromedp.NavigateResponse(x.srv.URL+"/console"))
	if err != nil {
		t.Fatalf("open the console: %v", err)
	}
	if res.Status != http.StatusOK || acHeader(res.Headers, "Content-Security-Policy") != "default-src 'none'; script-src 'self'; style-src 'self'; "+
		"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'" {
		t.Fatalf("the console as the browser got it: %d %v", res.Status, res.Headers)
	}
	do("the sign-in form", chromedp.WaitVisible(chromedp.CSS("#apikey")))
	if got := eval(`Array.from(document.querySelectorAll('input, select')).filter(e => !document.querySelector('label[for="' + e.id + '"]')).length + '|' +
		['header', 'nav', 'main'].filter(s => !document.querySelector(s)).join(',') + '|' + document.querySelector('a.skip').getAttribute('href')`); got != "0||#main" {
		t.Fatalf("unlabelled controls | missing landmarks | skip link: %q", got)
	}
	// Signed out, neither the navigation nor the sign-out button shows.
	if got := eval(`getComputedStyle(document.getElementById('who')).display + '|' + getComputedStyle(document.getElementById('nav')).display`); got != "none|none" {
		t.Fatalf("signed out, the header shows: %q", got)
	}
	accessible("the sign-in view")
	shot("console-signin.png")

	// A key that is not an org key is refused on the page; the org key signs in.
	do("a wrong key", chromedp.SendKeys(chromedp.CSS("#apikey"), "not-a-key"), chromedp.Click(chromedp.CSS("#signin-submit")))
	if got := eval(`document.getElementById('signin-error').textContent`); !strings.Contains(got, "clr_org_") {
		t.Fatalf("a wrong key: %q", got)
	}
	eval(`document.getElementById('apikey').value = '', 'ok'`)
	do("sign in", chromedp.SendKeys(chromedp.CSS("#apikey"), x.o.Key), chromedp.Click(chromedp.CSS("#signin-submit")))
	waitFor("the decisions view", `!document.getElementById('view-decisions').hidden && location.hash === '#/decisions' ? 'ok' : false`)
	if got := eval(`sessionStorage.getItem('clearance.console.key') === '` + x.o.Key + `' && localStorage.length === 0 && document.cookie === '' ? 'ok' : 'no'`); got != "ok" {
		t.Fatalf("the key is kept in sessionStorage only: %s", got)
	}

	if consoleAPI {
		// The rows equal the API's answer, unfiltered and for BLOCK.
		rows := func() string {
			return eval(`Array.from(document.querySelectorAll('#decisions-rows tr')).map(r => [r.dataset.dossierId, r.dataset.outcome, r.dataset.mode, r.dataset.workflow].join(' ')).join('\n')`)
		}
		want := func(query string) string {
			ans := x.req(t, "GET", "/v1/console/decisions"+query, x.o.Key, nil, nil).want(t, http.StatusOK)
			var lines []string
			for _, d := range lookup(ans.JSON, "decisions").([]any) {
				m := d.(map[string]any)
				lines = append(lines, fmt.Sprint(m["dossier_id"], " ", m["outcome"], " ", m["mode"], " ", m["workflow_key"]))
			}
			return strings.Join(lines, "\n")
		}
		waitFor("the decisions", `document.getElementById('decisions-status').dataset.state === 'done' ? 'ok' : false`)
		if got, w := rows(), want("?limit=50"); got != w || strings.Count(w, "\n") < 9 {
			t.Fatalf("rows shown:\n%s\nthe API's:\n%s", got, w)
		}
		eval(`document.getElementById('f-outcome').value = 'BLOCK', 'ok'`)
		do("filter BLOCK", chromedp.Click(chromedp.CSS("#f-apply")))
		waitFor("the BLOCK decisions", `document.getElementById('decisions-status').dataset.state === 'done' &&
			Array.from(document.querySelectorAll('#decisions-rows tr')).every(r => r.dataset.outcome === 'BLOCK') ? 'ok' : false`)
		if got, w := rows(), want("?outcome=BLOCK&limit=50"); got != w || strings.Count(w, "\n") != 3 {
			t.Fatalf("BLOCK rows shown:\n%s\nthe API's:\n%s", got, w)
		}
		accessible("the decisions view")
		shot("console-decisions.png")
		// A row opens its dossier, from the keyboard too.
		do("open the sealed BLOCK dossier", chromedp.Focus(chromedp.CSS(`#decisions-rows tr[data-dossier-id="`+sealedBlock.str("dossier_id")+`"] a`)))
		eval(`document.activeElement.click(), 'ok'`)
	} else {
		t.Log("GET /v1/console/decisions is not served yet: the decisions table and the activity charts are not checked")
		eval(`location.hash = '#/dossiers/` + sealedBlock.str("dossier_id") + `', 'ok'`)
	}

	// The sealed dossier: every check of the packet and the capsule ticked,
	// the same checks the reader answers for the same files.
	waitFor("the dossier", `!document.getElementById('view-dossier').hidden && document.getElementById('dossier-summary').dataset.outcome === 'BLOCK' ? 'ok' : false`)
	waitFor("both verdicts", `['verify-packet', 'verify-capsule'].every(id => ['valid', 'invalid', 'error'].includes(document.querySelector('#' + id + ' .verdict').dataset.state)) ? 'ok' : false`)
	q := "?org_id=" + x.o.ID
	for box, path := range map[string]string{"verify-packet": "/proof-packet", "verify-capsule": "/agent-action-capsule"} {
		file := x.req(t, "GET", pathDossiers+sealedBlock.str("dossier_id")+path+q, x.o.Key, nil, nil).want(t, http.StatusOK).Raw
		rep := x.req(t, "POST", pathReader, "", map[string]any{"artifact_base64": file}, nil).want(t, http.StatusOK)
		var names []string
		for _, c := range lookup(rep.JSON, "checks").([]any) {
			names = append(names, c.(map[string]any)["name"].(string)+" true")
		}
		want := strings.Join(names, "\n")
		got := eval(`Array.from(document.querySelectorAll('#` + box + ` .checks li')).map(li => li.dataset.check + ' ' + li.dataset.ok).join('\n')`)
		if got != want || len(names) == 0 || box == "verify-packet" && len(names) < 3 {
			t.Errorf("%s: checks shown:\n%s\nthe reader's:\n%s", box, got, want)
		}
		if v := eval(`document.querySelector('#` + box + ` .verdict').textContent`); !strings.HasPrefix(v, "Valid") {
			t.Errorf("%s: verdict %q", box, v)
		}
		if n := eval(`String(document.querySelectorAll('#` + box + ` .checks li.pass .mark').length)`); n != strconv.Itoa(len(names)) {
			t.Errorf("%s: %s ticks for %d checks", box, n, len(names))
		}
	}
	if got := eval(`Array.from(document.querySelectorAll('#dossier-reasons code')).map(c => c.textContent).join(' ')`); !strings.Contains(got, "TOO_BIG") {
		t.Errorf("reason codes shown: %q", got)
	}
	waitFor("the chain", `document.querySelectorAll('#dossier-chain li').length > 0 ? 'ok' : false`)
	if got := eval(`document.getElementById('dossier-chain').textContent + '|' + document.getElementById('dossier-overrides').textContent`); !strings.Contains(got, "BLOCK ENFORCEMENT") ||
		!strings.Contains(got, "(this one)") || !strings.HasSuffix(got, "|No overrides.") {
		t.Errorf("chain | overrides shown: %q", got)
	}
	accessible("a sealed dossier")
	shot("console-dossier-sealed.png")
	// The skip link moves focus to the content and leaves the view as it is.
	do("the skip link", chromedp.Focus(chromedp.CSS("a.skip")), chromedp.KeyEvent("\r"))
	waitFor("focus on the content", `location.hash === '#main' && document.activeElement.id === 'main' ? 'ok' : false`)
	if got := eval(`String(!document.getElementById('view-dossier').hidden)`); got != "true" {
		t.Errorf("the skip link left the dossier: shown %q", got)
	}

	// A dossier the ledger has not sealed yet says so.
	eval(`location.hash = '#/dossiers/` + unsealed.str("dossier_id") + `', 'ok'`)
	waitFor("the unsealed packet", `document.querySelector('#verify-packet .verdict').dataset.state === 'unsealed' ? 'ok' : false`)
	if got := eval(`document.querySelector('#verify-packet .verdict').textContent`); !strings.HasPrefix(got, "Not sealed yet") {
		t.Errorf("unsealed verdict %q", got)
	}
	shot("console-dossier-unsealed.png")

	if consoleAPI {
		// The charts: every number drawn equals the answer the page got,
		// and all but the latency (which counts these very requests) equal
		// a fresh answer of the API.
		eval(`location.hash = '#/activity', 'ok'`)
		waitFor("the activity", `document.getElementById('activity-status').dataset.state === 'done' ? 'ok' : false`)
		drawn := map[string]float64{}
		if err := json.Unmarshal([]byte(eval(`JSON.stringify(Object.fromEntries(Array.from(document.querySelectorAll('[data-metric]')).map(e => [e.dataset.metric, Number(e.dataset.value)])))`)), &drawn); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		ids := append([]network.RequestID(nil), activityIDs...)
		mu.Unlock()
		if len(ids) == 0 {
			t.Fatal("the page's activity request was not seen")
		}
		body, err := chromedp.Call(tab, network.GetResponseBody, network.GetResponseBodyParams{RequestID: ids[len(ids)-1]})
		if err != nil {
			t.Fatal(err)
		}
		var pageGot map[string]any
		if err := json.Unmarshal(body.Body, &pageGot); err != nil {
			t.Fatal(err)
		}
		compareMetrics(t, "the answer the page got", drawn, flattenNumbers(pageGot, ""), nil)
		fresh := x.req(t, "GET", "/v1/console/activity?from="+pageGot["from"].(string)+"&to="+pageGot["to"].(string)+"&bucket=hour", x.o.Key, nil, nil).want(t, http.StatusOK)
		compareMetrics(t, "a fresh answer of the API", drawn, flattenNumbers(fresh.JSON, ""), func(k string) bool { return strings.HasPrefix(k, "latency.") })
		if drawn["totals.by_outcome.BLOCK"] < 4 || drawn["executions.COMMITTED"] != 1 || drawn["totals.by_mode.SHADOW"] != 2 {
			t.Errorf("the charts miss the decisions made: %v", drawn)
		}
		// The shadow report, for the same window: every number shown equals
		// the API's.
		waitFor("the shadow report", `document.getElementById('shadow-status').dataset.state === 'done' ? 'ok' : false`)
		shown := map[string]float64{}
		if err := json.Unmarshal([]byte(eval(`JSON.stringify(Object.fromEntries(Array.from(document.querySelectorAll('[data-field^="shadow."]')).map(e => [e.dataset.field.slice(7), Number(e.dataset.value)])))`)), &shown); err != nil {
			t.Fatal(err)
		}
		shadow := x.req(t, "GET", "/v1/protocol/shadow-reports?from="+pageGot["from"].(string)+"&to="+pageGot["to"].(string), x.o.Key, nil, nil).want(t, http.StatusOK)
		compareMetrics(t, "the shadow report", shown, flattenNumbers(shadow.JSON, ""), nil)
		if shown["total"] != 2 || shown["by_outcome.BLOCK"] != 1 || len(lookup(shadow.JSON, "by_workflow").([]any)) == 0 {
			t.Errorf("the shadow report misses the SHADOW decisions made: %v", shown)
		}
		accessible("the activity view")
		shot("console-activity.png")
	}

	// Signing out forgets the key.
	do("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#apikey")))
	waitFor("the sign-in view", `!document.getElementById('view-signin').hidden && sessionStorage.length === 0 ? 'ok' : false`)
	// Nothing of the org's data stays in the page for the tab's next user.
	if got := eval(`String(document.getElementById('decisions-rows').children.length)`); got != "0" {
		t.Fatalf("after sign-out the page still holds %s decision rows", got)
	}
}

// flattenNumbers maps each number of v to its dotted path (arrays by index).
func flattenNumbers(v any, prefix string) map[string]float64 {
	out := map[string]float64{}
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	switch t := v.(type) {
	case float64:
		out[prefix] = t
	case map[string]any:
		for k, e := range t {
			for p, n := range flattenNumbers(e, join(k)) {
				out[p] = n
			}
		}
	case []any:
		for i, e := range t {
			for p, n := range flattenNumbers(e, join(strconv.Itoa(i))) {
				out[p] = n
			}
		}
	}
	return out
}

// compareMetrics fails unless every number of the API's answer (but those
// skip names) is drawn with the same value, and nothing else is drawn.
func compareMetrics(t *testing.T, what string, drawn, api map[string]float64, skip func(string) bool) {
	t.Helper()
	var diffs []string
	for k, v := range api {
		if skip != nil && skip(k) {
			continue
		}
		if d, ok := drawn[k]; !ok || d != v {
			diffs = append(diffs, fmt.Sprintf("%s: drawn %v (shown: %v), API %v", k, d, ok, v))
		}
	}
	for k := range drawn {
		if _, ok := api[k]; !ok {
			diffs = append(diffs, k+": drawn, not in the API's answer")
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("the charts against %s:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// consoleTab is one Chromium tab on the console, with the steps the
// browser tests take in it.
type consoleTab struct {
	t        *testing.T
	tab      context.Context
	dir      string
	axe      []byte
	injected bool
}

// openConsole starts Chromium on the console at base; it skips (or fails
// with CLEARANCE_REQUIRE_BROWSER=1) without Chromium or axe-core.
func openConsole(ctx context.Context, t *testing.T, base string) *consoleTab {
	t.Helper()
	browsertest.Chromium(t)
	axe, err := os.ReadFile(axeScript)
	if err != nil {
		if os.Getenv("CLEARANCE_REQUIRE_BROWSER") == "1" {
			t.Fatalf("axe-core is missing (run: npm ci --prefix console/testdata/axe): %v", err)
		}
		t.Skipf("axe-core is missing: run `npm ci --prefix console/testdata/axe`: %v", err)
	}
	c := &consoleTab{t: t, tab: browsertest.Start(ctx, t).Ctx, dir: t.TempDir(), axe: axe}
	c.do("the viewport", chromedp.EmulateViewport(1280, 800))
	if _, err := chromedp.Run(c.tab, chromedp.NavigateResponse(base+"/console")); err != nil {
		t.Fatalf("open the console: %v", err)
	}
	c.do("the sign-in form", chromedp.WaitVisible(chromedp.CSS("#apikey")))
	return c
}

func (c *consoleTab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	if err := chromedp.Do(c.tab, steps...); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

func (c *consoleTab) eval(expr string) string {
	c.t.Helper()
	v, err := chromedp.Run(c.tab, chromedp.Evaluate[string](expr))
	if err != nil {
		c.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

func (c *consoleTab) waitFor(what, expr string) string {
	c.t.Helper()
	v, err := chromedp.Run(c.tab, chromedp.Poll[string](expr, chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		c.t.Fatalf("waiting for %s: %v (the page says %q)", what, err, c.eval(`document.getElementById('main').innerText.slice(0, 2000)`))
	}
	return v
}

func (c *consoleTab) shot(name string) {
	c.t.Helper()
	png, err := chromedp.Run(c.tab, chromedp.FullScreenshot(100))
	if err != nil {
		c.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, png, 0o600); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("screenshot: %s", p)
}

// accessible fails on any serious or critical axe-core violation.
func (c *consoleTab) accessible(view string) {
	c.t.Helper()
	if !c.injected {
		if _, err := chromedp.Run(c.tab, chromedp.Evaluate[bool](string(c.axe)+"; true")); err != nil {
			c.t.Fatalf("inject axe-core: %v", err)
		}
		c.injected = true
	}
	got, err := chromedp.Run(c.tab, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ['violations']}).then(r => JSON.stringify(
		r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v => ({id: v.id, impact: v.impact, help: v.help,
		nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))))`, chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
	if err != nil {
		c.t.Fatalf("axe on %s: %v", view, err)
	}
	if got != "[]" {
		c.t.Errorf("accessibility of %s: serious or critical violations: %s", view, got)
	}
}

// signIn signs in with key from the sign-in view.
func (c *consoleTab) signIn(key string) {
	c.t.Helper()
	c.eval(`document.getElementById('apikey').value = '', 'ok'`)
	c.do("sign in", chromedp.SendKeys(chromedp.CSS("#apikey"), key), chromedp.Click(chromedp.CSS("#signin-submit")))
	c.waitFor("the decisions view", `!document.getElementById('view-decisions').hidden ? 'ok' : false`)
}

func (c *consoleTab) signOut() {
	c.t.Helper()
	c.do("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#apikey")))
	c.waitFor("the sign-in view", `!document.getElementById('view-signin').hidden && `+
		`document.getElementById('escalations-rows').children.length === 0 && document.getElementById('browser-checks').children.length === 0 ? 'ok' : false`)
}

// open opens a view by its link in the navigation, from the keyboard.
func (c *consoleTab) open(view string) {
	c.t.Helper()
	c.do("focus "+view, chromedp.Focus(chromedp.CSS(`#nav a[data-view="`+view+`"]`)))
	c.eval(`document.activeElement.click(), 'ok'`)
	c.waitFor(view, `!document.getElementById('view-`+view+`').hidden && document.querySelector('#nav a[data-view="`+view+`"]').getAttribute('aria-current') === 'page' ? 'ok' : false`)
}

// TestConsoleEscalationsPoliciesLedger drives the console's escalations,
// policies and ledger views in headless Chromium against a real server
// with a fake approval service: the open escalations shown equal the
// API's, a key without decision:write is told it may not cancel, the org
// key cancels one from the page and the API then says CANCELLED; the
// policy versions and the diff of two equal the API's; a ledger entry's
// inclusion proof is verified in the page with WebCrypto (every check
// ticked), and a proof for an older tree checked against the latest
// checkpoint is crossed. axe-core runs on each view; screenshots are
// saved under the test's temporary directory.
func TestConsoleEscalationsPoliciesLedger(t *testing.T) {
	browsertest.Chromium(t) // skip before setting anything up
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	e := newEscEnv(t)
	var open []string
	for _, amount := range []float64{2000, 2100, 2200} {
		_, id := e.escalate(t, amount)
		open = append(open, id)
		e.advance(time.Minute)
	}
	older := e.req(t, "POST", pathSeal, e.o.Key, `{}`, nil).want(t, http.StatusOK)
	e.req(t, "POST", pathBundles, e.o.Key, `{"bundle_id":"esc","version":"v2","mode":"ENFORCEMENT","rules":[
 {"id":"needs-approval","match":[{"field":"amount","op":"ge","value":500},{"field":"approval.verified","op":"eq","value":false}],"outcome":"ESCALATE","reason_codes":["NEEDS_APPROVAL"]},
 {"id":"weekend","match":[{"field":"amount","op":"ge","value":100000}],"outcome":"REVIEW_REQUIRED","reason_codes":["HUGE"]}],
 "default":{"outcome":"BLOCK","reason_codes":["UNMATCHED"]}}`, nil).want(t, http.StatusCreated)
	reader := e.createKey(e.o, "decision:read")

	c := openConsole(ctx, t, e.srv.URL)

	// Escalations: a read-only key sees them and may not cancel.
	escalationRows := func() string {
		return c.eval(`Array.from(document.querySelectorAll('#escalations-rows tr')).map(r => [r.dataset.escalationId, r.dataset.status, r.dataset.intentId, r.dataset.createdAt, r.dataset.expiresAt].join(' ')).join('\n')`)
	}
	apiEscalations := func() string {
		ans := e.req(t, "GET", "/v1/console/escalations", e.o.Key, nil, nil).want(t, http.StatusOK)
		var lines []string
		for _, v := range lookup(ans.JSON, "escalations").([]any) {
			m := v.(map[string]any)
			lines = append(lines, fmt.Sprint(m["escalation_id"], " ", m["status"], " ", m["intent_id"], " ", m["created_at"], " ", m["expires_at"]))
		}
		return strings.Join(lines, "\n")
	}
	c.signIn(reader)
	c.open("escalations")
	c.waitFor("the escalations", `document.getElementById('escalations-status').dataset.state === 'done' ? 'ok' : false`)
	if got, want := escalationRows(), apiEscalations(); got != want || strings.Count(want, "\n") != 2 || !strings.HasPrefix(want, open[0]+" PENDING_APPROVAL") {
		t.Fatalf("escalations shown:\n%s\nthe API's:\n%s", got, want)
	}
	if got := c.eval(`Array.from(document.querySelectorAll('#escalations-rows [data-seconds-left]')).filter(s => /^-?[0-9]+$/.test(s.dataset.secondsLeft)).length + ' ' +
		document.querySelectorAll('#escalations-rows ol.transitions li[data-status="PENDING_APPROVAL"]').length`); got != "3 3" {
		t.Errorf("time left | transitions shown: %q", got)
	}
	c.do("cancel without decision:write", chromedp.Focus(chromedp.CSS(`#escalations-rows tr[data-escalation-id="`+open[1]+`"] button`)))
	c.eval(`document.activeElement.click(), 'ok'`)
	c.waitFor("the refusal", `document.querySelector('#escalations-rows tr[data-escalation-id="`+open[1]+`"]').dataset.cancel === 'forbidden' ? 'ok' : false`)
	if got := c.eval(`document.querySelector('#escalations-rows tr[data-escalation-id="` + open[1] + `"] .row-note').textContent`); !strings.Contains(got, "may not cancel") {
		t.Errorf("the refusal says %q", got)
	}
	if s := e.status(t, open[1]).want(t, http.StatusOK).str("status"); s != "PENDING_APPROVAL" {
		t.Fatalf("after a refused cancel: %s", s)
	}
	c.signOut()

	// The org key cancels it; the row leaves and the API says CANCELLED.
	c.signIn(e.o.Key)
	c.open("escalations")
	c.waitFor("the escalations", `document.getElementById('escalations-status').dataset.state === 'done' && document.querySelectorAll('#escalations-rows tr').length === 3 ? 'ok' : false`)
	c.accessible("the escalations view")
	c.shot("console-escalations.png")
	c.do("cancel", chromedp.Focus(chromedp.CSS(`#escalations-rows tr[data-escalation-id="`+open[1]+`"] button`)))
	c.eval(`document.activeElement.click(), 'ok'`)
	c.waitFor("the row gone", `document.getElementById('escalations-status').dataset.cancelled === '`+open[1]+`' ? 'ok' : false`)
	if got := c.eval(`Array.from(document.querySelectorAll('#escalations-rows tr')).map(r => r.dataset.escalationId).join(',') + ' ' + document.activeElement.id`); got != open[0]+","+open[2]+" escalations-status" {
		t.Errorf("rows left | focus after the cancel: %q", got)
	}
	if s := e.status(t, open[1]).want(t, http.StatusOK).str("status"); s != "CANCELLED" {
		t.Fatalf("the API says %s after the page cancelled", s)
	}
	if got, want := escalationRows(), apiEscalations(); got != want {
		t.Errorf("after the cancel, shown:\n%s\nthe API's:\n%s", got, want)
	}
	c.shot("console-escalations-cancelled.png")

	// Policies: the versions and the diff of two, as the API answers them.
	c.open("policies")
	c.waitFor("the versions", `document.getElementById('policies-status').dataset.state === 'done' ? 'ok' : false`)
	list := e.req(t, "GET", pathPolicies, e.o.Key, nil, nil).want(t, http.StatusOK)
	var versions []string
	for _, b := range lookup(list.JSON, "bundles").([]any) {
		m := b.(map[string]any)
		versions = append(versions, fmt.Sprint(m["version"], " ", m["active"], " ", m["rule_count"]))
	}
	if got, want := c.eval(`Array.from(document.querySelectorAll('#policies-rows tr')).map(r => [r.dataset.version, r.dataset.active, r.querySelector('[data-field="rule_count"]').dataset.value].join(' ')).join('\n')`),
		strings.Join(versions, "\n"); got != want || len(versions) != 2 || !strings.Contains(want, "v2 true 2") {
		t.Fatalf("versions shown:\n%s\nthe API's:\n%s", got, want)
	}
	if got := c.eval(`document.getElementById('d-from').value + ' ' + document.getElementById('d-to').value`); got != "v1 v2" {
		t.Errorf("the diff's default choice: %q", got)
	}
	c.do("compare", chromedp.Click(chromedp.CSS("#d-apply")))
	c.waitFor("the diff", `document.getElementById('diff-status').dataset.state === 'done' ? 'ok' : false`)
	diff := e.req(t, "GET", "/v1/policies/diff?from=v1&to=v2", e.o.Key, nil, nil).want(t, http.StatusOK)
	ids := func(path string) string {
		var out []string
		for _, v := range lookup(diff.JSON, path).([]any) {
			switch r := v.(type) {
			case string:
				out = append(out, r)
			case map[string]any:
				var fields []string
				for _, f := range r["fields"].([]any) {
					fields = append(fields, f.(string))
				}
				out = append(out, r["rule_id"].(string)+":"+strings.Join(fields, ","))
			}
		}
		return strings.Join(out, " ")
	}
	wantDiff := fmt.Sprintf("%s|%s|%s|%v|%v", ids("rules_added"), ids("rules_removed"), ids("rules_changed"), diff.JSON["default"] != nil, diff.JSON["identical"])
	gotDiff := c.eval(`['diff-added', 'diff-removed'].map(id => Array.from(document.querySelectorAll('#' + id + ' li[data-rule]')).map(li => li.dataset.rule).join(' ')).join('|') + '|' +
		Array.from(document.querySelectorAll('#diff-changed li[data-rule]')).map(li => li.dataset.rule + ':' + li.dataset.fields).join(' ') + '|' +
		document.getElementById('diff-summary').dataset.defaultChanged + '|' + document.getElementById('diff-summary').dataset.identical`)
	if gotDiff != wantDiff || wantDiff != "weekend|too-big|needs-approval:match|true|false" {
		t.Errorf("diff shown %q, the API's %q", gotDiff, wantDiff)
	}
	if got := c.eval(`document.getElementById('diff-summary').textContent`); !strings.Contains(got, "ALLOW [OK] → BLOCK [UNMATCHED]") {
		t.Errorf("the default change shown: %q", got)
	}
	c.accessible("the policies view")
	c.shot("console-policies.png")

	// Ledger: sealed again, so the latest checkpoint is bigger than older.
	latest := e.req(t, "POST", pathSeal, e.o.Key, `{}`, nil).want(t, http.StatusOK)
	oldSize, newSize := lookup(older.JSON, "tree_size").(float64), lookup(latest.JSON, "tree_size").(float64)
	if newSize <= oldSize || oldSize < 3 {
		t.Fatalf("checkpoints of %v then %v entries", oldSize, newSize)
	}
	c.open("ledger")
	c.waitFor("the ledger", `document.getElementById('ledger-status').dataset.state === 'done' ? 'ok' : false`)
	head := e.req(t, "GET", "/v1/protocol/audit/ledger?limit=1", e.o.Key, nil, nil).want(t, http.StatusOK)
	if got, want := c.eval(`document.querySelector('[data-field="head.seq"]').dataset.value + ' ' + document.querySelector('[data-field="checkpoint.tree_size"]').dataset.value + ' ' +
		document.getElementById('ledger-key').textContent`), fmt.Sprint(lookup(head.JSON, "head.seq"), " ", newSize, " ", e.publishedLedgerKey(t)); got != want {
		t.Fatalf("head, checkpoint, key shown %q, the API's %q", got, want)
	}
	checks := func() string {
		return c.eval(`Array.from(document.querySelectorAll('#browser-checks li')).map(li => li.dataset.check + ' ' + li.dataset.ok + (li.querySelector('.reason') ? ' ' + li.querySelector('.reason').textContent : '')).join('\n')`)
	}
	prove := func(seq int, treeSize string) {
		t.Helper()
		c.eval(`document.getElementById('l-seq').value = '` + strconv.Itoa(seq) + `', document.getElementById('l-size').value = '` + treeSize + `', 'ok'`)
		c.do("fetch the proof", chromedp.Click(chromedp.CSS("#proof-fetch")))
		c.waitFor("the proof", `document.getElementById('proof-status').dataset.state === 'done' && !document.getElementById('verify-browser').disabled ? 'ok' : false`)
		c.do("verify in the browser", chromedp.Focus(chromedp.CSS("#verify-browser")))
		c.eval(`document.activeElement.click(), 'ok'`)
		c.waitFor("the verdict", `['valid', 'invalid', 'error'].includes(document.getElementById('browser-verdict').dataset.state) ? 'ok' : false`)
	}
	// An entry in the middle of the tree: every check ticked.
	seq := int(oldSize) - 1
	prove(seq, "")
	proof := e.req(t, "GET", "/v1/protocol/audit/ledger/proofs/inclusion?seq="+strconv.Itoa(seq), e.o.Key, nil, nil).want(t, http.StatusOK)
	if got, want := c.eval(`['proof.seq', 'proof.tree_size', 'proof.length'].map(f => document.querySelector('[data-field="' + f + '"]').dataset.value).join(' ')`),
		fmt.Sprint(seq, " ", newSize, " ", len(lookup(proof.JSON, "proof").([]any))); got != want {
		t.Errorf("proof shown %q, the API's %q", got, want)
	}
	wantTicks := "ledger key true\ncheckpoint signature true\ncheckpoint body true\nentry hash true\nleaf hash true\ninclusion true"
	if got := checks(); got != wantTicks {
		t.Fatalf("checks in the browser:\n%s\nwant:\n%s", got, wantTicks)
	}
	if v := c.eval(`document.getElementById('browser-verdict').textContent`); !strings.HasPrefix(v, "Valid") {
		t.Errorf("verdict %q", v)
	}
	c.accessible("the ledger view")
	c.shot("console-ledger-verified.png")

	// The proof of the same entry in the older tree does not lead to the
	// latest checkpoint's root: crossed, the rest still ticked.
	prove(seq, strconv.Itoa(int(oldSize)))
	got := checks()
	if !strings.HasPrefix(got, "ledger key true\ncheckpoint signature true\ncheckpoint body true\nentry hash true\nleaf hash true\ninclusion false ") ||
		!(strings.HasSuffix(got, "ROOT_MISMATCH") || strings.HasSuffix(got, "PROOF_MALFORMED")) {
		t.Errorf("an older tree's proof against the latest checkpoint:\n%s", got)
	}
	if v := c.eval(`document.getElementById('browser-verdict').textContent + ' ' + document.querySelector('#browser-checks li[data-check="inclusion"] .detail').textContent`); !strings.HasPrefix(v, "Not valid") ||
		!strings.Contains(v, fmt.Sprintf("a tree of %v entries; the checkpoint signs %v", oldSize, newSize)) {
		t.Errorf("the cross says %q", v)
	}
	c.shot("console-ledger-crossed.png")
}

// TestConsoleReplayAndLiveDecisions drives the console's replay of a
// policy draft and its live decisions list in headless Chromium against a
// real server: with an ENFORCEMENT bundle published, decisions made and a
// stricter draft put, a key without policy:read is told it may not
// replay; the org key runs the replay in the page and every number shown
// equals the API's replay result. Then, with the decisions filtered and
// "Refresh every 10 s" turned on from the keyboard, a decision made
// through the API appears on its own (one of another workflow does not),
// announced in the live region, with focus left where it was. axe-core
// runs on each view; screenshots are saved under the test's temporary
// directory.
func TestConsoleReplayAndLiveDecisions(t *testing.T) {
	browsertest.Chromium(t) // skip before setting anything up
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	x := newExecEnv(t, bandsBundle)
	from := x.clock()
	for _, body := range []string{`{"amount":20,"workflow_key":"refunds"}`, `{"amount":2000,"workflow_key":"refunds"}`,
		`{"amount":20000,"workflow_key":"payouts"}`, `{"amount":40,"workflow_key":"payouts"}`} {
		x.req(t, "POST", pathEvaluate, x.o.Key, body, nil).want(t, http.StatusOK)
		x.advance(time.Minute)
	}
	// The draft escalates everything: three of the four outcomes change.
	x.req(t, "PUT", "/v1/policies/drafts/stricter", x.o.Key, stricterBundle, nil).want(t, http.StatusCreated)
	reader := x.createKey(x.o, "decision:read")

	c := openConsole(ctx, t, x.srv.URL)

	// A key without policy:read is told so, and offered no form.
	c.signIn(reader)
	c.open("policies")
	c.waitFor("the refusal", `document.getElementById('drafts-status').dataset.state === 'forbidden' ? 'ok' : false`)
	if got := c.eval(`document.getElementById('drafts-status').textContent + '|' + document.getElementById('replay-form').hidden`); !strings.HasSuffix(got, "needs policy:read.|true") {
		t.Errorf("without policy:read the replay says %q", got)
	}
	c.signOut()

	// The org key replays the draft over the decisions made.
	c.signIn(x.o.Key)
	c.open("policies")
	c.waitFor("the drafts", `document.getElementById('drafts-status').dataset.state === 'done' ? 'ok' : false`)
	if got := c.eval(`document.getElementById('r-draft').value`); got != "stricter" {
		t.Fatalf("the draft offered: %q", got)
	}
	c.eval(`document.getElementById('r-from').value = '` + from.Format("2006-01-02T15:04:05") + `', 'ok'`)
	c.do("replay", chromedp.Focus(chromedp.CSS("#r-run")))
	c.eval(`document.activeElement.click(), 'ok'`)
	c.waitFor("the replay", `document.getElementById('replay-status').dataset.state === 'done' ? 'ok' : false`)
	id := c.eval(`document.getElementById('replay-result').dataset.replayId`)
	replay := x.req(t, "GET", "/v1/policies/replays/"+id, x.o.Key, nil, nil).want(t, http.StatusOK)
	if replay.str("status") != "done" || replay.str("candidate.draft") != "stricter" {
		t.Fatalf("the page's replay: %s", replay)
	}
	api := flattenNumbers(lookup(replay.JSON, "result"), "")
	for k := range api {
		if strings.HasPrefix(k, "by_decision_type.") { // not shown
			delete(api, k)
		}
	}
	shown := map[string]float64{}
	if err := json.Unmarshal([]byte(c.eval(`JSON.stringify(Object.fromEntries(Array.from(document.querySelectorAll('[data-field^="replay."]')).map(e => [e.dataset.field.slice(7), Number(e.dataset.value)])))`)), &shown); err != nil {
		t.Fatal(err)
	}
	compareMetrics(t, "the replay's result", shown, api, nil)
	if shown["replayed"] != 4 || shown["changed"] != 3 || shown["by_direction.ALLOW->ESCALATE"] != 2 || shown["by_direction.BLOCK->ESCALATE"] != 1 ||
		shown["by_workflow.payouts.changed"] != 2 || shown["by_workflow.refunds.changed"] != 1 {
		t.Errorf("the replay shown misses the decisions made: %v", shown)
	}
	if got := c.eval(`document.querySelectorAll('#replay-examples li[data-dossier-id]').length + ' ' + document.activeElement.id`); got != "3 replay-status" {
		t.Errorf("examples shown | focus after the replay: %q", got)
	}
	c.accessible("the policies view with a replay")
	c.shot("console-policies-replay.png")

	// The live list: filtered to payouts, refreshing, a new payout appears
	// on its own, a new refund does not, and focus stays where it was.
	c.open("decisions")
	c.waitFor("the decisions", `document.getElementById('decisions-status').dataset.state === 'done' ? 'ok' : false`)
	c.eval(`document.getElementById('f-workflow').value = 'payouts', 'ok'`)
	c.do("filter payouts", chromedp.Click(chromedp.CSS("#f-apply")))
	c.waitFor("the payouts", `document.getElementById('decisions-status').dataset.state === 'done' &&
		Array.from(document.querySelectorAll('#decisions-rows tr')).every(r => r.dataset.workflow === 'payouts') ? 'ok' : false`)
	if n := c.eval(`String(document.querySelectorAll('#decisions-rows tr').length)`); n != "2" {
		t.Fatalf("%s payout rows, want 2", n)
	}
	if got := c.eval(`String(document.getElementById('f-live').checked)`); got != "false" {
		t.Fatalf("the live list is on by default")
	}
	c.do("turn the live list on from the keyboard", chromedp.Focus(chromedp.CSS("#f-live")), chromedp.KeyEvent(" "))
	if got := c.eval(`document.getElementById('f-live').checked + ' ' + document.getElementById('decisions-live').textContent`); got != "true The list refreshes every 10 seconds." {
		t.Fatalf("after turning it on: %q", got)
	}
	focused := c.eval(`document.querySelector('#decisions-rows tr:last-child').dataset.dossierId`)
	c.do("focus a row", chromedp.Focus(chromedp.CSS(`#decisions-rows tr[data-dossier-id="`+focused+`"] a`)))
	refund := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":30,"workflow_key":"refunds"}`, nil).want(t, http.StatusOK).str("dossier_id")
	payout := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":25000,"workflow_key":"payouts"}`, nil).want(t, http.StatusOK).str("dossier_id")
	x.advance(time.Minute) // the default window ends now, exclusive
	c.waitFor("the new payout", `document.querySelector('#decisions-rows tr[data-dossier-id="`+payout+`"][data-new="true"]') ? 'ok' : false`)
	ans := x.req(t, "GET", "/v1/console/decisions?workflow=payouts&limit=50", x.o.Key, nil, nil).want(t, http.StatusOK)
	var want []string
	for _, d := range lookup(ans.JSON, "decisions").([]any) {
		want = append(want, d.(map[string]any)["dossier_id"].(string))
	}
	if got := c.eval(`Array.from(document.querySelectorAll('#decisions-rows tr')).map(r => r.dataset.dossierId).join(' ')`); got != strings.Join(want, " ") || len(want) != 3 || strings.Contains(got, refund) {
		t.Errorf("rows after the refresh %q, the API's %q (the refund %s must not show)", got, want, refund)
	}
	if got := c.eval(`document.activeElement.closest('tr') ? document.activeElement.closest('tr').dataset.dossierId : document.activeElement.id`); got != focused {
		t.Errorf("focus after the refresh is on %q, was on row %s", got, focused)
	}
	if got := c.eval(`document.getElementById('decisions-live').textContent + '|' + document.getElementById('f-workflow').value`); !strings.HasPrefix(got, "1 new decision at ") || !strings.HasSuffix(got, "|payouts") {
		t.Errorf("live region | filter after the refresh: %q", got)
	}
	c.accessible("the live decisions view")
	c.shot("console-decisions-live.png")
	c.do("turn the live list off", chromedp.Focus(chromedp.CSS("#f-live")), chromedp.KeyEvent(" "))
	if got := c.eval(`document.getElementById('decisions-live').textContent`); got != "The list no longer refreshes." {
		t.Errorf("after turning it off: %q", got)
	}
}

// TestConsoleAccountSignIn signs an owner in to the console with their
// account in headless Chromium: the e-mail code (read from the SMTP
// server in this process), the workspace chosen, the console key the
// page trades the session for; the decisions shown equal the API's; an
// expired console key is renewed by the page without asking; a reload
// keeps the sign-in; Sign out ends the account session and revokes every
// console key it was issued, and the page offers the e-mail form again.
func TestConsoleAccountSignIn(t *testing.T) {
	browsertest.Chromium(t) // skip before setting anything up
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	x := newSigninEnv(t)
	const owner = "grace@console-browser.example"
	ws := x.signUpNamed(owner, "Console <Browser> & Co")
	decider, _ := x.platformKey(ws.orgID, "decision:write", "decision:read")
	for range 3 {
		x.do("POST", signinPathDecide, decider, signinDecision, nil).want(t, http.StatusOK)
	}
	x.advance(time.Minute) // the default window ends now, exclusive

	c := openConsole(ctx, t, x.srv.URL)
	c.waitFor("the account form", `document.activeElement.id === 'account-email' ? 'ok' : false`)
	c.accessible("the sign-in view")
	c.shot("console-signin.png")
	c.do("ask for a code", chromedp.SendKeys(chromedp.CSS("#account-email"), owner), chromedp.Click(chromedp.CSS("#account-send")))
	c.waitFor("the code step", `!document.getElementById('account-code-step').hidden && document.activeElement.id === 'account-code' ? 'ok' : false`)
	c.do("a wrong code", chromedp.SendKeys(chromedp.CSS("#account-code"), "12345x"), chromedp.Click(chromedp.CSS("#account-verify")))
	if got := c.eval(`document.getElementById('account-status').textContent`); got != "The code is the six digits of the e-mail." {
		t.Errorf("a malformed code says %q", got)
	}
	c.eval(`document.getElementById('account-code').value = '', 'ok'`)
	c.do("the code", chromedp.SendKeys(chromedp.CSS("#account-code"), x.mail.lastCode(t, owner)), chromedp.Click(chromedp.CSS("#account-verify")))
	c.waitFor("the workspaces", `!document.getElementById('workspace-form').hidden ? 'ok' : false`)
	if got := c.eval(`document.getElementById('account-who').textContent + '|' + Array.from(document.getElementById('account-workspace').options, o => o.value + '=' + o.textContent).join(',')`); got != "Signed in as "+owner+".|"+ws.orgID+"=Console <Browser> & Co" {
		t.Fatalf("the workspaces offered: %q", got)
	}
	c.accessible("the workspace choice")
	c.do("open the workspace", chromedp.Click(chromedp.CSS("#account-open")))
	c.waitFor("the decisions", `!document.getElementById('view-decisions').hidden && document.getElementById('decisions-status').dataset.state === 'done' ? 'ok' : false`)
	key := c.eval(`sessionStorage.getItem('clearance.console.key')`)
	if !strings.HasPrefix(key, "clr_org_") || key == decider {
		t.Fatalf("the page's key %q is not a console key", key)
	}
	if got := c.eval(`document.getElementById('who-key').textContent`); !strings.Contains(got, owner) || !strings.Contains(got, "Console <Browser> & Co") {
		t.Errorf("the header says %q", got)
	}
	api := x.do("GET", "/v1/console/decisions", key, nil, nil).want(t, http.StatusOK)
	want := []string{}
	for _, d := range lookup(api.JSON, "decisions").([]any) {
		want = append(want, d.(map[string]any)["dossier_id"].(string))
	}
	if got := c.eval(`Array.from(document.querySelectorAll('#decisions-rows tr'), r => r.dataset.dossierId).join(',')`); got != strings.Join(want, ",") || len(want) != 3 {
		t.Fatalf("the decisions shown %q, the API's %q", got, want)
	}
	c.shot("console-account-decisions.png")

	// An hour on the key is dead: the page renews it from the session and
	// the refreshed list shows, without a sign-in.
	x.advance(time.Hour + time.Minute)
	x.do("GET", "/v1/console/decisions", key, nil, nil).want(t, http.StatusUnauthorized)
	c.do("refresh", chromedp.Click(chromedp.CSS("#f-apply")))
	c.waitFor("the renewed key", `sessionStorage.getItem('clearance.console.key') !== '`+key+`' && document.getElementById('decisions-status').dataset.state === 'done' ? 'ok' : false`)
	renewed := c.eval(`sessionStorage.getItem('clearance.console.key')`)
	x.do("GET", "/v1/console/decisions", renewed, nil, nil).want(t, http.StatusOK)
	if _, err := chromedp.Run(c.tab, chromedp.NavigateResponse(x.srv.URL+"/console#/activity")); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the activity view after a reload", `!document.getElementById('view-activity').hidden ? 'ok' : false`)

	// The session cookie is out of the page's reach (HttpOnly).
	session := c.sessionCookie(x.srv.URL)
	if session == "" || c.eval(`document.cookie`) != "" {
		t.Fatalf("the browser's session cookie %q; the page reads %q", session, c.eval(`document.cookie`))
	}

	// Sign out: the session ends, its console keys are revoked.
	c.do("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#account-email")))
	c.waitFor("the e-mail form", `!document.getElementById('view-signin').hidden && !document.getElementById('account-form').hidden && `+
		`document.getElementById('workspace-form').hidden && sessionStorage.length === 0 ? 'ok' : false`)
	for _, k := range []string{key, renewed} {
		x.do("GET", "/v1/console/decisions", k, nil, nil).want(t, http.StatusUnauthorized)
	}
	x.as(session, true, "POST", consoleKeyPath(ws.orgID), nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	if left := c.sessionCookie(x.srv.URL); left != "" {
		t.Errorf("the browser keeps the session cookie after sign-out")
	}
}

// sessionCookie is the browser's account session cookie for url ("" for
// none), read through the DevTools protocol.
func (c *consoleTab) sessionCookie(url string) string {
	c.t.Helper()
	cookies, err := chromedp.Call(c.tab, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	if err != nil {
		c.t.Fatalf("read the browser's cookies: %v", err)
	}
	for _, ck := range cookies.Cookies {
		if ck.Name == signinCookie {
			return ck.Value
		}
	}
	return ""
}
