package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/mod/sumdb/note"
)

// TestConsoleShowsTampering puts a tampering proxy between the browser and
// a real server and checks the console crosses what does not verify, with
// the reason: a proof packet whose dossier was edited on the way (the
// reader's own checks, shown as the reader answers them for the same
// bytes), a checkpoint whose signature was altered, and a published
// ledger key that is not the one that signed (both checked by WebCrypto in
// the page). Without tampering the same views tick everything.
func TestConsoleShowsTampering(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	x := newExecEnv(t, bandsBundle)
	blocked := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":50000}`, nil).want(t, http.StatusOK)
	for range 3 {
		x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":20}`, nil).want(t, http.StatusOK)
	}
	x.req(t, "POST", pathSeal, x.o.Key, `{}`, nil).want(t, http.StatusOK)
	x.advance(time.Minute)

	// The proxy: what it edits, when asked to.
	var editPacket, editSignature, otherKey atomic.Bool
	var edited atomic.Value // []byte: the last packet the proxy edited
	_, foreignKey, err := note.GenerateKey(rand.Reader, strings.SplitN(x.publishedLedgerKey(t), "+", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	origin := x.srv.Config.Handler
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var edit func([]byte) []byte
		switch {
		case editPacket.Load() && strings.HasSuffix(r.URL.Path, "/proof-packet"):
			edit = func(b []byte) []byte {
				out := bytes.Replace(b, []byte(`"outcome":"BLOCK"`), []byte(`"outcome":"ALLOW"`), 1)
				edited.Store(out)
				return out
			}
		case editSignature.Load() && r.URL.Path == "/v1/protocol/audit/ledger/checkpoint":
			edit = func(b []byte) []byte { return flipSignature(t, b) }
		case otherKey.Load() && r.URL.Path == "/.well-known/clearance-ledger-key":
			edit = func([]byte) []byte { return []byte(foreignKey + "\n") }
		}
		if edit == nil {
			origin.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		origin.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(edit(rec.Body.Bytes()))
	}))
	defer front.Close()

	c := openConsole(ctx, t, front.URL)
	c.signIn(x.o.Key)

	// An edited packet: the reader's verdict on the edited bytes, crossed
	// where the reader says so, with its reasons; the capsule still ticks.
	editPacket.Store(true)
	c.eval(`location.hash = '#/dossiers/` + blocked.str("dossier_id") + `', 'ok'`)
	c.waitFor("both verdicts", `['verify-packet', 'verify-capsule'].every(id => ['valid', 'invalid', 'error'].includes(document.querySelector('#' + id + ' .verdict').dataset.state)) ? 'ok' : false`)
	packet, _ := edited.Load().([]byte)
	if !bytes.Contains(packet, []byte(`"outcome":"ALLOW"`)) {
		t.Fatalf("the proxy edited no packet")
	}
	rep := x.req(t, "POST", pathReader, "", map[string]any{"artifact_base64": packet}, nil).want(t, http.StatusOK)
	var want []string
	failed := 0
	for _, v := range lookup(rep.JSON, "checks").([]any) {
		ch := v.(map[string]any)
		line := ch["name"].(string) + " " + strings.ToLower(strings.TrimSpace(jsonText(ch["ok"])))
		if ch["ok"] != true {
			failed++
		}
		want = append(want, line)
	}
	if got := c.eval(`Array.from(document.querySelectorAll('#verify-packet .checks li')).map(li => li.dataset.check + ' ' + li.dataset.ok).join('\n')`); got != strings.Join(want, "\n") || failed == 0 {
		t.Errorf("an edited packet's checks shown:\n%s\nthe reader's (%d failed):\n%s", got, failed, strings.Join(want, "\n"))
	}
	if got := c.eval(`document.querySelector('#verify-packet .verdict').dataset.state + ' ' + document.querySelector('#verify-capsule .verdict').dataset.state`); got != "invalid valid" {
		t.Errorf("verdicts packet, capsule: %q", got)
	}
	reasons := c.eval(`Array.from(document.querySelectorAll('#verify-packet .checks li.fail')).map(li => li.textContent).join('\n')`)
	if strings.Count(reasons, "\n")+1 != failed || strings.TrimSpace(reasons) == "" {
		t.Errorf("the crossed checks say:\n%s", reasons)
	}
	c.accessible("a dossier that does not verify")
	c.shot("console-dossier-tampered.png")
	editPacket.Store(false)

	// The ledger: untouched, every check ticks; an altered signature and a
	// foreign key are crossed where they fail and nowhere else.
	verify := func() string {
		t.Helper()
		c.open("ledger")
		c.waitFor("the ledger", `document.getElementById('ledger-status').dataset.state === 'done' ? 'ok' : false`)
		c.eval(`document.getElementById('l-seq').value = '1', document.getElementById('l-size').value = '', 'ok'`)
		c.do("fetch the proof", chromedp.Click(chromedp.CSS("#proof-fetch")))
		c.waitFor("the proof", `document.getElementById('proof-status').dataset.state === 'done' && !document.getElementById('verify-browser').disabled ? 'ok' : false`)
		c.do("verify in the browser", chromedp.Click(chromedp.CSS("#verify-browser")))
		c.waitFor("the verdict", `['valid', 'invalid', 'error'].includes(document.getElementById('browser-verdict').dataset.state) ? 'ok' : false`)
		out := c.eval(`Array.from(document.querySelectorAll('#browser-checks li')).map(li => li.dataset.check + ' ' + li.dataset.ok + (li.querySelector('.reason') ? ' ' + li.querySelector('.reason').textContent : '')).join('\n')`)
		c.open("decisions") // leave, so the ledger view loads afresh
		return out
	}
	if got := verify(); got != "ledger key true\ncheckpoint signature true\ncheckpoint body true\nentry hash true\nleaf hash true\ninclusion true" {
		t.Fatalf("an untouched proof:\n%s", got)
	}
	editSignature.Store(true)
	if got := verify(); got != "ledger key true\ncheckpoint signature false SIGNATURE_INVALID\ncheckpoint body true\nentry hash true\nleaf hash true\ninclusion true" {
		t.Errorf("an altered checkpoint signature:\n%s", got)
	}
	editSignature.Store(false)
	otherKey.Store(true)
	if got := verify(); !strings.HasPrefix(got, "ledger key true\ncheckpoint signature false NO_SIGNATURE_BY_KEY\n") {
		t.Errorf("a published key that did not sign:\n%s", got)
	}
	c.shot("console-ledger-foreign-key.png")
}

// flipSignature alters the last byte of the signature of the checkpoint
// note in a checkpoint answer, leaving its text as it was.
func flipSignature(t *testing.T, answer []byte) []byte {
	var cp map[string]any
	if err := json.Unmarshal(answer, &cp); err != nil {
		t.Errorf("checkpoint answer: %v", err)
		return answer
	}
	text, _ := cp["checkpoint"].(string)
	i := strings.LastIndex(strings.TrimSuffix(text, "\n"), " ")
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(text[i+1:], "\n"))
	if i < 0 || err != nil || len(sig) != 68 {
		t.Errorf("checkpoint note %q: %v", text, err)
		return answer
	}
	sig[len(sig)-1] ^= 1
	cp["checkpoint"] = text[:i+1] + base64.StdEncoding.EncodeToString(sig) + "\n"
	out, _ := json.Marshal(cp)
	return out
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
