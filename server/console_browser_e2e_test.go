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
		accessible("the activity view")
		shot("console-activity.png")
	}

	// Signing out forgets the key.
	do("sign out", chromedp.Click(chromedp.CSS("#signout")))
	waitFor("the sign-in view", `!document.getElementById('view-signin').hidden && sessionStorage.length === 0 ? 'ok' : false`)
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
