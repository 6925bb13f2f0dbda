// Package browsertest drives headless Chromium for the tests of the
// passkey pages: it finds the browser (skipping without one, unless
// CLEARANCE_REQUIRE_BROWSER=1 makes that a failure, as in CI), starts it
// with Chromium's virtual WebAuthn authenticator attached (CTAP2,
// internal, resident keys, user verification), and reads what a page says
// once a ceremony ended. It is test support only.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"
)

// Chromium finds the browser: $CLEARANCE_CHROMIUM, /usr/bin/chromium, or
// chromium on the PATH.
func Chromium(t testing.TB) string {
	t.Helper()
	candidates := []string{os.Getenv("CLEARANCE_CHROMIUM"), "/usr/bin/chromium"}
	if p, err := exec.LookPath("chromium"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return c
		}
	}
	if os.Getenv("CLEARANCE_REQUIRE_BROWSER") == "1" {
		t.Fatal("no Chromium found (CLEARANCE_CHROMIUM, /usr/bin/chromium, PATH) and CLEARANCE_REQUIRE_BROWSER=1")
	}
	t.Skip("no Chromium found: set CLEARANCE_CHROMIUM (CLEARANCE_REQUIRE_BROWSER=1 makes this a failure)")
	return ""
}

// Browser is a headless Chromium tab with a virtual authenticator.
type Browser struct {
	Ctx context.Context // the tab, for chromedp
	// Authenticator is the virtual authenticator's id (for
	// webauthn.SetUserVerified and the like).
	Authenticator webauthn.AuthenticatorID
}

// Start starts Chromium (found by Chromium) under ctx with a virtual
// authenticator whose user verification succeeds; it stops with the test.
func Start(ctx context.Context, t testing.TB) *Browser {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox, // the tests run as root
		chromedp.DisableGPU,
	)...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if _, err := chromedp.Call(tab, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatalf("WebAuthn.enable: %v", err)
	}
	added, err := chromedp.Call(tab, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{
		Options: &webauthn.VirtualAuthenticatorOptions{
			Protocol:                    webauthn.AuthenticatorProtocolCtap2,
			Transport:                   webauthn.AuthenticatorTransportInternal,
			HasResidentKey:              true,
			HasUserVerification:         true,
			IsUserVerified:              true,
			AutomaticPresenceSimulation: true,
		},
	})
	if err != nil {
		t.Fatalf("WebAuthn.addVirtualAuthenticator: %v", err)
	}
	return &Browser{Ctx: tab, Authenticator: added.AuthenticatorID}
}

// Outcome opens url, clicks the element button selects and returns the
// text the page's #outcome shows once the ceremony ended.
func (b *Browser) Outcome(t testing.TB, url, button string) string {
	t.Helper()
	if err := chromedp.Do(b.Ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(button)), chromedp.Click(chromedp.CSS(button))); err != nil {
		t.Fatalf("%s: %v", button, err)
	}
	text, err := chromedp.Run(b.Ctx, chromedp.Poll[string](
		`(() => { const t = document.getElementById('outcome').textContent; return t && !t.startsWith('Waiting') ? t : false; })()`,
		chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		t.Fatalf("waiting for the outcome after %s: %v", button, err)
	}
	return text
}
