package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/approver"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/browsertest"
)

// lateDirectory is a Directory whose endpoint is set once the approval
// service exists (it needs the org, which needs the server).
type lateDirectory struct {
	mu sync.Mutex
	ep approval.Endpoint
}

func (d *lateDirectory) Endpoint(context.Context, string) (approval.Endpoint, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ep.IsZero() {
		return approval.Endpoint{}, approval.ErrNotConfigured
	}
	return d.ep, nil
}

// TestEscalationPasskeyFlowInBrowser runs the whole managed escalation with
// the reference approval service and a real browser: an approver enrolls a
// passkey in headless Chromium (virtual WebAuthn authenticator, user
// verification), enforce-and-bind escalates, the approver approves on the
// approval page, the completion hint makes Clearance verify directly with
// the service, and the grant of GRANT_READY is claimed and finalized. The
// resolved dossier's receipt verifies against the service's JWKS.
func TestEscalationPasskeyFlowInBrowser(t *testing.T) {
	browsertest.Chromium(t) // skip before setting anything up
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	dir := &lateDirectory{}
	x := newExecEnvWith(t, approvalBundle, func(x *execEnv) { x.approvals = dir })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	cred := "approver-cred-" + x.o.ID
	key := mustKey(t, 77)
	svc, err := approver.New(approver.Options{PublicURL: public, Issuer: public, SigningKey: key,
		Credentials: map[string]string{cred: x.o.ID}, Now: x.clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	dir.mu.Lock()
	dir.ep = approval.Endpoint{BaseURL: public, Credential: cred, Issuer: public}
	dir.mu.Unlock()

	api := func(method, path string, body any) map[string]any {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		rq, _ := http.NewRequestWithContext(ctx, method, public+path, rd)
		rq.Header.Set("Authorization", "Bearer "+cred)
		rq.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %v %v", method, path, res.StatusCode, out, err)
		}
		return out
	}

	browser := browsertest.Start(ctx, t)
	outcome := func(url, button string) string { t.Helper(); return browser.Outcome(t, url, button) }

	enrolled := api(http.MethodPost, "/v1/approvers", map[string]any{"approver_id": "ana@example.com", "display_name": "Ana"})
	if text := outcome(enrolled["enrollment_url"].(string), "#register"); !strings.Contains(text, "Passkey registered") {
		t.Fatalf("enrollment: %q", text)
	}

	// ESCALATE → an approval request bound to the intent.
	e := &escEnv{execEnv: x}
	bind, id := e.escalate(t, 2500)
	reqID := e.status(t, id).want(t, http.StatusOK).str("approval_request_id")
	page := api(http.MethodGet, "/v1/approval-requests/"+reqID, nil)
	if page["intent_hash"] != bind.str("intent_hash") || page["status"] != "PENDING" {
		t.Fatalf("the approval request: %v", page)
	}
	if text := outcome(page["approval_url"].(string), `button[data-decision="APPROVED"]`); !strings.Contains(text, "Approved by ana@example.com") {
		t.Fatalf("approval: %q", text)
	}

	done := e.complete(t, id).want(t, http.StatusAccepted)
	if done.str("status") != "GRANT_READY" || done.str("execution_token") == "" || done.str("approval.approver") != "ana@example.com" ||
		done.str("approval.presence") != grant.PresenceWebAuthnUV {
		t.Fatalf("want GRANT_READY: %s", done)
	}
	if bytes.Contains(done.Raw, []byte(page["approval_url"].(string))) || bytes.Contains(done.Raw, []byte(cred)) {
		t.Fatalf("the status shows the approval page or the credential: %s", done)
	}
	g := issued{token: done.str("execution_token"), hash: bind.str("intent_hash"), grantID: done.str("grant_id")}
	c := x.claimed(t, g)
	x.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)

	// The dossier's receipt verifies against the service's key, offline.
	dos := x.req(t, "GET", pathDossiers+done.str("resolved_dossier_id"), x.o.Key, nil, nil).want(t, http.StatusOK)
	rc, _, err := grant.VerifyApprovalReceipt(dos.str("approval.receipt"), func(kid string) (ed25519.PublicKey, error) {
		if kid != key.KID() {
			return nil, fmt.Errorf("unknown kid %q", kid)
		}
		return key.Public(), nil
	}, public)
	if err != nil || rc.RequestID != reqID || rc.IntentHash != bind.str("intent_hash") || rc.Decision != grant.ApprovalApproved {
		t.Fatalf("the recorded receipt: %+v %v", rc, err)
	}
	x.ledgerOK(t)
}
