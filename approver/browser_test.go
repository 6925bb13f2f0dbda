package approver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/browsertest"
)

// localPathOf is the path of a URL, for logs (without its token).
func localPathOf(u string) string {
	if i := strings.Index(u, "//"); i >= 0 {
		u = u[i+2:]
	}
	if i := strings.Index(u, "/"); i >= 0 {
		u = u[i:]
	}
	if i := strings.LastIndex(u, "/"); i > 0 {
		u = u[:i] + "/…"
	}
	return u
}

// TestBrowser drives the real pages in headless Chromium with its virtual
// WebAuthn authenticator (CTAP2, internal, resident keys, user
// verification): an approver registers a passkey at the enrollment link,
// then approves one request and denies another on their approval pages;
// the receipts are read back through the API and verified. With user
// verification failing, the approval is refused and nothing is recorded.
func TestBrowser(t *testing.T) {
	browsertest.Chromium(t) // skip before setting anything up
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The service on http://localhost:<port>: localhost is a secure
	// context, and a name (unlike 127.0.0.1) is a valid RP ID.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	var mu sync.Mutex
	var decisions []ApprovalRequest
	key := testKey(t)
	svc, err := New(Options{
		PublicURL: public, Issuer: public, SigningKey: key,
		Credentials: map[string]string{credA: orgA},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnDecision: func(r ApprovalRequest) {
			mu.Lock()
			defer mu.Unlock()
			decisions = append(decisions, r)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	h := &harness{t: t, base: public, svc: svc, clock: &fakeClock{t: time.Now()}, key: key}
	open := func(esc string) ApprovalRequest {
		t.Helper()
		res := h.api(http.MethodPost, "/v1/approval-requests", credA, h.openBody(orgA, esc))
		if res.Status != http.StatusCreated {
			t.Fatalf("open: %d %s", res.Status, res.Body)
		}
		var r ApprovalRequest
		res.json(t, &r)
		return r
	}

	browser := browsertest.Start(ctx, t)
	bctx := browser.Ctx

	// outcome clicks button on the page at url and returns the text the page
	// shows once the ceremony has ended.
	outcome := func(url, button string) string {
		t.Helper()
		text := browser.Outcome(t, url, button)
		t.Logf("%s after %s: %q", localPathOf(url), button, text)
		return text
	}

	// Enrollment.
	enrollURL := public + h.enrollmentLink(credA, "alice@example.com")
	if text := outcome(enrollURL, "#register"); !strings.Contains(text, "Passkey registered") {
		t.Fatalf("enrollment: %q", text)
	}
	svc.mu.Lock()
	enrolled := len(svc.st.approvers[orgA]["alice@example.com"].Credentials)
	svc.mu.Unlock()
	if enrolled != 1 {
		t.Fatalf("%d passkeys enrolled", enrolled)
	}

	lookup := jwksLookup(t, svc)
	for _, c := range []struct {
		esc, button, text string
		want              Status
	}{
		{"esc-approve", `button[data-decision="APPROVED"]`, "Approved by alice@example.com", StatusApproved},
		{"esc-deny", `button[data-decision="DENIED"]`, "Denied by alice@example.com", StatusDenied},
	} {
		r := open(c.esc)
		if text := outcome(r.ApprovalURL, c.button); !strings.Contains(text, c.text) {
			t.Fatalf("%s: the page says %q", c.esc, text)
		}
		got := h.get(credA, r.RequestID)
		if got.Status != c.want || got.Approver != "alice@example.com" {
			t.Fatalf("%s: %+v", c.esc, got)
		}
		rc, _, err := grant.VerifyApprovalReceipt(got.Receipt, lookup, public)
		if err != nil {
			t.Fatalf("%s: receipt: %v", c.esc, err)
		}
		if rc.RequestID != r.RequestID || rc.OrgID != orgA || rc.IntentHash != testIntent || rc.Decision != string(c.want) ||
			rc.Approver != "alice@example.com" || rc.Presence != grant.PresenceWebAuthnUV {
			t.Errorf("%s: receipt %+v", c.esc, rc)
		}
		// The page, read again, shows the decision and no buttons.
		var page string
		if err := chromedp.Do(bctx, chromedp.Navigate(r.ApprovalURL)); err != nil {
			t.Fatal(err)
		}
		if page, err = chromedp.Run(bctx, chromedp.Text(chromedp.ID("status"))); err != nil || page != string(c.want) {
			t.Errorf("%s: status on the page %q (%v)", c.esc, page, err)
		}
	}

	// User verification fails: the ceremony is refused, nothing recorded.
	if _, err := chromedp.Call(bctx, webauthn.SetUserVerified, webauthn.SetUserVerifiedParams{
		AuthenticatorID: browser.Authenticator, IsUserVerified: false,
	}); err != nil {
		t.Fatalf("WebAuthn.setUserVerified: %v", err)
	}
	r := open("esc-no-uv")
	if text := outcome(r.ApprovalURL, `button[data-decision="APPROVED"]`); !strings.Contains(text, "Nothing was recorded") {
		t.Fatalf("without user verification the page says %q", text)
	}
	if got := h.get(credA, r.RequestID); got.Status != StatusPending || got.Receipt != "" {
		t.Fatalf("without user verification: %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(decisions) != 2 {
		t.Errorf("%d decisions recorded, want 2", len(decisions))
	}
}
