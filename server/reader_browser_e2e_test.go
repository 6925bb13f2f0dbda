package server_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/clearancehq/clearance/internal/browsertest"
)

// TestReaderPageInBrowser drives the reader page in headless Chromium
// against a real server and engine: a real proof packet of a real decision
// is picked as the file and rendered valid, checked against this server's
// key; the same packet with one byte of its dossier changed is rendered
// not valid with the reason; a share link pasted is checked too.
// Screenshots of each answer are saved under the test's temporary
// directory.
func TestReaderPageInBrowser(t *testing.T) {
	browsertest.Chromium(t) // skip before setting anything up
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	x := newExecEnv(t, "")
	ev := x.evidenceOf(t, x.o, `{"amount":7}`)
	tampered := bytes.Replace(ev.packet, []byte(`"amount":7`), []byte(`"amount":9`), 1)
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "packet.json"), filepath.Join(dir, "tampered-packet.json")
	for name, b := range map[string][]byte{good: ev.packet, bad: tampered} {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := x.share(t, x.o.Key, ev.dec.str("dossier_id"), `{}`).want(t, http.StatusCreated).str("url")

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
	// verdict waits for a verdict starting with prefix and returns it.
	verdict := func(what, prefix string) string {
		t.Helper()
		v, err := chromedp.Run(browser.Ctx, chromedp.Poll[string](`(() => {
			const r = document.getElementById('result'), v = document.getElementById('verdict').textContent;
			return !r.hidden && v.startsWith(`+"`"+prefix+"`"+`) ? v : false; })()`, chromedp.WithPollingTimeout(30*time.Second)))
		if err != nil {
			t.Fatalf("%s: no verdict %q: %v (the page shows %q)", what, prefix, err, eval(`document.getElementById('verdict').textContent`))
		}
		return v
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(browser.Ctx, chromedp.FullScreenshot(100)) // quality 100: a PNG
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, png, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	resetResult := `document.getElementById('result').hidden = true, document.getElementById('verdict').textContent = '', 'ok'`

	res, err := chromedp.Run(browser.Ctx, chromedp.NavigateResponse(x.srv.URL+"/reader"))
	if err != nil {
		t.Fatalf("open the reader: %v", err)
	}
	if res.Status != http.StatusOK || !strings.Contains(acHeader(res.Headers, "Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("the reader page as the browser got it: %d %v", res.Status, res.Headers)
	}
	do("the reader page", chromedp.WaitVisible(chromedp.CSS("#file")))
	// Every control has a label; the action is a button.
	if got := eval(`Array.from(document.querySelectorAll('input, select')).filter(e => !document.querySelector('label[for="' + e.id + '"]')).length + '|' +
		document.getElementById('verify').tagName`); got != "0|BUTTON" {
		t.Fatalf("unlabelled controls | the action: %q", got)
	}

	// A real packet: valid, against this server's key.
	do("pick the packet", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{good}), chromedp.Click(chromedp.CSS("#verify")))
	if v := verdict("the packet", "Valid"); !strings.Contains(v, "every check passed") {
		t.Fatalf("verdict %q", v)
	}
	if got := eval(`document.getElementById('keyinfo').textContent`); !strings.Contains(got, "checked against this server's ledger key") ||
		!strings.Contains(got, x.engine.Audit.LedgerVerifierKey()) {
		t.Errorf("key line %q", got)
	}
	if got := eval(`document.querySelectorAll('#checks li.pass').length + '|' + document.querySelectorAll('#checks li.fail').length`); got != "8|0" {
		t.Errorf("passed|failed checks shown: %s", got)
	}
	shot("reader-valid.png")

	// The same packet with one byte of its dossier changed.
	eval(resetResult)
	do("pick the tampered packet", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{bad}), chromedp.Click(chromedp.CSS("#verify")))
	verdict("the tampered packet", "Not valid")
	if got := eval(`Array.from(document.querySelectorAll('#checks li.fail')).map(e => e.querySelector('.reason').textContent + ': ' +
		e.querySelector('.detail').textContent).join('\n')`); !strings.HasPrefix(got, "DOSSIER_DIGEST_MISMATCH: the dossier hashes to sha256:") ||
		strings.Count(got, "\n") != 0 {
		t.Errorf("failed checks shown: %q", got)
	}
	shot("reader-tampered.png")

	// A share link pasted, the file cleared.
	eval(resetResult)
	eval(`document.getElementById('file').value = '', 'ok'`)
	do("paste the share link", chromedp.SendKeys(chromedp.CSS("#link"), x.srv.URL+link), chromedp.Click(chromedp.CSS("#verify")))
	verdict("the share link", "Valid")
	if got := eval(`document.getElementById('keyinfo').textContent`); !strings.Contains(got, "Kind: share_link") {
		t.Errorf("share link key line %q", got)
	}
	shot("reader-share-link.png")

	// From the keyboard: Enter in the link field submits the form.
	eval(resetResult)
	do("press Enter in the link field", chromedp.SendKeys(chromedp.CSS("#link"), kb.Enter))
	verdict("the share link, from the keyboard", "Valid")

	// Both a file and a link: refused on the page, nothing sent.
	eval(resetResult)
	do("pick a file beside the link", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{good}), chromedp.Click(chromedp.CSS("#verify")))
	verdict("a file and a link", "Choose a file or a share link")
}
