package onboarding_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/mail"
	"github.com/clearancehq/clearance/onboarding"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/tenant"
)

// harness is an engine over an in-memory Pebble with a mailbox in a temp
// dir and a clock the test moves.
type harness struct {
	t       *testing.T
	engine  *clearance.Engine
	mailbox string
	mu      sync.Mutex
	now     time.Time
	// mailDown makes every send fail, as a mail server that is down.
	mailDown atomic.Bool
}

// switchedMailer is the harness's mailbox, failing while the mail is down.
type switchedMailer struct {
	mail.Mailer
	down *atomic.Bool
}

func (m switchedMailer) Send(ctx context.Context, msg mail.Message) error {
	if m.down.Load() {
		return errors.New("mail: smtp: connection refused")
	}
	return m.Mailer.Send(ctx, msg)
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), mailbox: filepath.Join(t.TempDir(), "mailbox")}
	clock := func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	mb, err := mail.NewMailbox(h.mailbox, "clearance@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.engine, err = clearance.Open(backend, clearance.Options{Now: clock, Mailer: switchedMailer{mb, &h.mailDown},
		SecretsKey: []byte("onboarding-unit-test-secrets-key-32!")})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// newHarnessOver is a harness whose engine runs over wrap(the in-memory
// Pebble): a backend that injects faults or retries.
func newHarnessOver(t *testing.T, wrap func(store.Backend) store.Backend) *harness {
	t.Helper()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	inner, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	dir := filepath.Join(t.TempDir(), "mailbox")
	mb, err := mail.NewMailbox(dir, "clearance@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := clearance.Open(wrap(inner), clearance.Options{Now: clock, Mailer: mb,
		SecretsKey: []byte("onboarding-unit-test-secrets-key-32!")})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, engine: engine, mailbox: dir, now: now}
}

func (h *harness) advance(d time.Duration) { h.mu.Lock(); h.now = h.now.Add(d); h.mu.Unlock() }

var codeIn = regexp.MustCompile(`code is ([0-9]{6})\.`)

// lastCode is the code of the newest message to addr in the mailbox.
func (h *harness) lastCode(addr string) string {
	h.t.Helper()
	msgs, err := mail.ReadMailbox(h.mailbox)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].To == addr {
			if m := codeIn.FindStringSubmatch(msgs[i].Text); m != nil {
				return m[1]
			}
		}
	}
	h.t.Fatalf("no code mailed to %s", addr)
	return ""
}

func (h *harness) start(email string) (onboarding.Started, error) {
	return h.engine.Onboarding.Start(context.Background(),
		fmt.Appendf(nil, `{"owner_email":%q,"owner_name":"Ada Lovelace","org_name":"Analytical Engines"}`, email))
}

func (h *harness) verify(email, code string) (onboarding.Verified, error) {
	return h.engine.Onboarding.Verify(context.Background(), fmt.Appendf(nil, `{"owner_email":%q,"otp_code":%q}`, email, code))
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

// From nothing to a decision: a code by mail, the grant, a session, the
// bundle, and the bundle's key deciding; the grant stops working then.
func TestSignUpToFirstDecision(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	started, err := h.start("Ada@Example.com")
	if err != nil || started.Status != "code_sent" || started.ExpiresInSeconds != 600 {
		t.Fatalf("Start = %+v, %v", started, err)
	}
	v, err := h.verify("ada@example.com", h.lastCode("ada@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if v.OrgID == "" || v.Workspace.OrgID != v.OrgID || v.Workspace.Name != "Analytical Engines" || v.AccountID == "" {
		t.Fatalf("Verify = %+v", v)
	}
	p, err := h.engine.Admin.Authenticate(ctx, v.OnboardingGrant)
	if err != nil || p.Kind != tenant.KindOnboarding || p.OrgID != v.OrgID {
		t.Fatalf("grant: %+v, %v", p, err)
	}
	sess, err := h.engine.Onboarding.CreateSession(ctx, p, fmt.Appendf(nil, `{"org_id":%q}`, v.OrgID))
	if err != nil || sess.Status != onboarding.SessionOpen {
		t.Fatalf("CreateSession = %+v, %v", sess, err)
	}
	bundleBody := []byte(`{"provider_key":"stripe","workflow_key":"ap.invoice","source_label":"Stripe payouts"}`)
	b, err := h.engine.Onboarding.IssueBundle(ctx, p, sess.SessionID, bundleBody)
	if err != nil {
		t.Fatal(err)
	}
	if b.OrgID != v.OrgID || b.ConnectorID == "" || b.WebhookSecret == "" || b.PolicyVersion == "" ||
		b.WebhookPath != "/v1/signals/webhooks/"+b.ConnectorID {
		t.Fatalf("bundle = %+v", b)
	}
	key, err := h.engine.Admin.Authenticate(ctx, b.APIKey)
	if err != nil || key.Kind != tenant.KindOrg || key.OrgID != v.OrgID {
		t.Fatalf("bundle key: %+v, %v", key, err)
	}
	d, err := h.engine.Evaluate(ctx, clearance.EvaluateRequest{OrgID: v.OrgID, Route: clearance.RouteEvaluateDecision,
		Principal: key, Body: []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":250}`)})
	if err != nil || d.Outcome == "" {
		t.Fatalf("first decision = %+v, %v", d, err)
	}
	_, err = h.engine.Admin.Authenticate(ctx, v.OnboardingGrant)
	wantCode(t, "the grant after the bundle", err, core.CodeUnauthenticated)
	// Once: the org key (org:*) asking again mints nothing.
	_, err = h.engine.Onboarding.IssueBundle(ctx, key, sess.SessionID, bundleBody)
	wantCode(t, "a second bundle", err, onboarding.CodeBundleAlreadyIssued)
	conns, err := h.engine.Signals.ListConnectors(ctx, v.OrgID)
	if err != nil || len(conns) != 1 {
		t.Fatalf("connectors after a refused second bundle: %d, %v", len(conns), err)
	}
}

// Every code that does not verify gets the same answer; a code is good
// once, for ten minutes, and burned after five wrong tries.
func TestCodeRefusals(t *testing.T) {
	h := newHarness(t)
	const addr = "grace@example.com"
	if _, err := h.start(addr); err != nil {
		t.Fatal(err)
	}
	code := h.lastCode(addr)
	wrong := fmt.Sprintf("%06d", (atoi(code)+1)%1_000_000)

	_, err := h.verify("nobody@example.com", code)
	wantCode(t, "an address that asked for nothing", err, onboarding.CodeOTPInvalid)
	for _, bad := range []string{"１２３４５６", "1234567", "12345", "12 456", "+12345", "", "١٢٣٤٥٦"} {
		_, err := h.verify(addr, bad)
		wantCode(t, fmt.Sprintf("code %q", bad), err, core.CodeInvalidRequest)
	}
	for i := range onboarding.DefaultMaxAttempts - 1 {
		_, err := h.verify(addr, wrong)
		wantCode(t, fmt.Sprintf("wrong try %d", i+1), err, onboarding.CodeOTPInvalid)
	}
	if _, err := h.verify(addr, code); err != nil {
		t.Fatalf("the right code after %d wrong tries: %v", onboarding.DefaultMaxAttempts-1, err)
	}
	_, err = h.verify(addr, code)
	wantCode(t, "the code used again", err, onboarding.CodeOTPInvalid)

	// Burned: five wrong tries, then the right code fails too.
	if _, err := h.start(addr); err != nil {
		t.Fatal(err)
	}
	code = h.lastCode(addr)
	wrong = fmt.Sprintf("%06d", (atoi(code)+1)%1_000_000)
	for range onboarding.DefaultMaxAttempts {
		_, _ = h.verify(addr, wrong)
	}
	_, err = h.verify(addr, code)
	wantCode(t, "the right code after five wrong tries", err, onboarding.CodeOTPInvalid)

	// Expired at ten minutes.
	if _, err := h.start(addr); err != nil {
		t.Fatal(err)
	}
	code = h.lastCode(addr)
	h.advance(onboarding.DefaultCodeTTL)
	_, err = h.verify(addr, code)
	wantCode(t, "an expired code", err, onboarding.CodeOTPInvalid)
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// An address is sent at most five codes an hour, whichever server asks.
func TestSendLimit(t *testing.T) {
	h := newHarness(t)
	const addr = "limit@example.com"
	for i := range onboarding.DefaultMaxSends {
		if _, err := h.start(addr); err != nil {
			t.Fatalf("send %d: %v", i+1, err)
		}
		h.advance(time.Minute)
	}
	_, err := h.start(addr)
	wantCode(t, "a sixth code within the hour", err, onboarding.CodeTooManyCodes)
	var ce *core.Error
	if errors.As(err, &ce); ce.RetryAfter <= 0 || ce.RetryAfter > time.Hour {
		t.Fatalf("RetryAfter = %v", ce.RetryAfter)
	}
	msgs, _ := mail.ReadMailbox(h.mailbox)
	if len(msgs) != onboarding.DefaultMaxSends {
		t.Fatalf("%d messages mailed, want %d", len(msgs), onboarding.DefaultMaxSends)
	}
	if _, err := h.start("other@example.com"); err != nil {
		t.Fatalf("another address is limited too: %v", err)
	}
	h.advance(ce.RetryAfter)
	if _, err := h.start(addr); err != nil {
		t.Fatalf("after Retry-After: %v", err)
	}
}

// Concurrent tries of the right code: exactly one org is created.
func TestConcurrentVerifyOneWinner(t *testing.T) {
	h := newHarness(t)
	const addr = "race@example.com"
	if _, err := h.start(addr); err != nil {
		t.Fatal(err)
	}
	code := h.lastCode(addr)
	const n = 8
	var wg sync.WaitGroup
	wins := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := h.verify(addr, code)
			var ce *core.Error
			switch {
			case err == nil:
				wins <- v.OrgID
			case !errors.As(err, &ce) || ce.Code != onboarding.CodeOTPInvalid:
				t.Errorf("a losing try: %v", err)
			}
		}()
	}
	wg.Wait()
	close(wins)
	if len(wins) != 1 {
		t.Fatalf("%d tries of one code succeeded, want 1", len(wins))
	}
}

// The mapping routes refuse another org and keys without org:*, and a
// session of another org is not found.
func TestSessionsStayInTheirOrg(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.start("a@example.com"); err != nil {
		t.Fatal(err)
	}
	va, err := h.verify("a@example.com", h.lastCode("a@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := h.engine.Admin.Authenticate(ctx, va.OnboardingGrant)
	other, err := h.engine.Admin.CreateOrg(ctx, "Other")
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := h.engine.Admin.Authenticate(ctx, other.Key.Secret)
	_, err = h.engine.Onboarding.CreateSession(ctx, pa, fmt.Appendf(nil, `{"org_id":%q}`, other.Org.ID))
	wantCode(t, "a grant naming another org", err, core.CodeOrgMismatch)
	sess, err := h.engine.Onboarding.CreateSession(ctx, pa, fmt.Appendf(nil, `{"org_id":%q}`, va.OrgID))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.engine.Onboarding.IssueBundle(ctx, pb, sess.SessionID, []byte(`{"provider_key":"p","workflow_key":"w","source_label":"s"}`))
	wantCode(t, "another org's session", err, onboarding.CodeSessionNotFound)
	narrow, err := h.engine.Admin.CreateAPIKey(ctx, va.OrgID, []string{"decision:write"})
	if err != nil {
		t.Fatal(err)
	}
	pn, _ := h.engine.Admin.Authenticate(ctx, narrow.Secret)
	_, err = h.engine.Onboarding.IssueBundle(ctx, pn, sess.SessionID, []byte(`{"provider_key":"p","workflow_key":"w","source_label":"s"}`))
	wantCode(t, "a key without org:*", err, core.CodeInsufficientScope)
}

// retrying is a backend whose armed Update runs fn once and rolls it back
// (as PostgreSQL does on a serialization failure), lets between run, then
// runs fn again: what a retried transaction sees.
type retrying struct {
	store.Backend
	mu      sync.Mutex
	armed   bool
	between func()
}

var errRetry = errors.New("retry")

func (r *retrying) Update(ctx context.Context, org string, fn func(store.Tx) error) error {
	r.mu.Lock()
	armed := r.armed && org == onboarding.AccountsOrgID
	if armed {
		r.armed = false
	}
	r.mu.Unlock()
	if armed {
		if err := r.Backend.Update(ctx, org, func(tx store.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return errRetry
		}); !errors.Is(err, errRetry) {
			return err
		}
		r.between()
	}
	return r.Backend.Update(ctx, org, fn)
}

// A wrong try whose transaction ran again after the right code committed
// does not bring the spent code back: nothing of the rolled-back run leaks
// into the retry.
func TestVerifyRetriedTransactionLeavesNothing(t *testing.T) {
	backend := &retrying{}
	h := newHarnessOver(t, func(inner store.Backend) store.Backend { backend.Backend = inner; return backend })
	const addr = "retry@example.com"
	if _, err := h.start(addr); err != nil {
		t.Fatal(err)
	}
	code := h.lastCode(addr)
	wrong := fmt.Sprintf("%06d", (atoi(code)+1)%1_000_000)
	var won error
	backend.between = func() { _, won = h.verify(addr, code) }
	backend.armed = true
	_, err := h.verify(addr, wrong)
	wantCode(t, "the wrong try", err, onboarding.CodeOTPInvalid)
	if won != nil {
		t.Fatalf("the right code, between the runs: %v", won)
	}
	_, err = h.verify(addr, code)
	wantCode(t, "the spent code after the retried wrong try", err, onboarding.CodeOTPInvalid)
}

// An org opens at most MaxSessions mapping sessions: a leaked org key
// cannot mint org keys without bound through bundles.
func TestSessionsBounded(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	o, err := h.engine.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := h.engine.Admin.Authenticate(ctx, o.Key.Secret)
	body := fmt.Appendf(nil, `{"org_id":%q}`, o.Org.ID)
	for i := range onboarding.MaxSessions {
		if _, err := h.engine.Onboarding.CreateSession(ctx, p, body); err != nil {
			t.Fatalf("session %d: %v", i+1, err)
		}
	}
	_, err = h.engine.Onboarding.CreateSession(ctx, p, body)
	wantCode(t, "one session more", err, onboarding.CodeSessionLimitReached)
}

// signUp runs register/start and register/verify for addr.
func (h *harness) signUp(addr string) onboarding.Verified {
	h.t.Helper()
	if _, err := h.start(addr); err != nil {
		h.t.Fatal(err)
	}
	v, err := h.verify(addr, h.lastCode(addr))
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

// signIn runs login/start and login/verify for addr.
func (h *harness) signIn(addr string) (onboarding.SignedIn, error) {
	ctx := context.Background()
	if _, err := h.engine.Onboarding.StartSignIn(ctx, fmt.Appendf(nil, `{"email":%q}`, addr)); err != nil {
		return onboarding.SignedIn{}, err
	}
	return h.engine.Onboarding.VerifySignIn(ctx, fmt.Appendf(nil, `{"email":%q,"otp_code":%q}`, addr, h.lastCode(strings.ToLower(addr))))
}

// An owner signs in by code, sees the workspaces of the account, revokes
// every credential of one with a replacement key, and signs out.
func TestSignInSessionAndRevocation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const addr = "owner@example.com"
	v := h.signUp(addr)
	in, err := h.signIn("Owner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if in.Account.AccountID != v.AccountID || len(in.Account.Workspaces) != 1 || in.Account.Workspaces[0].OrgID != v.OrgID {
		t.Fatalf("signed in as %+v, want account %s with workspace %s", in.Account, v.AccountID, v.OrgID)
	}
	as, err := h.engine.Onboarding.Session(ctx, in.Secret)
	if err != nil || as.AccountID != v.AccountID {
		t.Fatalf("Session = %+v, %v", as, err)
	}
	// Another account's workspace is not found; this one's credentials go.
	other, err := h.engine.Admin.CreateOrg(ctx, "Other")
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.engine.Onboarding.RevokeCredentials(ctx, as, other.Org.ID, nil)
	wantCode(t, "another org", err, onboarding.CodeWorkspaceNotFound)
	r, err := h.engine.Onboarding.RevokeCredentials(ctx, as, v.OrgID, []byte(`{"issue_replacement_key":true}`))
	if err != nil || len(r.KeyIDs) != 1 || r.KeyIDs[0] != v.GrantID || r.Replacement == nil {
		t.Fatalf("RevokeCredentials = %+v, %v", r, err)
	}
	if _, err := h.engine.Admin.Authenticate(ctx, v.OnboardingGrant); err == nil {
		t.Fatal("the onboarding grant works after the revocation")
	}
	if p, err := h.engine.Admin.Authenticate(ctx, r.Replacement.Secret); err != nil || p.OrgID != v.OrgID {
		t.Fatalf("replacement: %+v, %v", p, err)
	}
	if _, err := h.engine.Admin.Authenticate(ctx, other.Key.Secret); err != nil {
		t.Fatalf("another org's key: %v", err)
	}
	// Sign-out ends the session; so does its end of life.
	if err := h.engine.Onboarding.SignOut(ctx, as); err != nil {
		t.Fatal(err)
	}
	_, err = h.engine.Onboarding.Session(ctx, in.Secret)
	wantCode(t, "a signed-out session", err, onboarding.CodeSignInRequired)
	in2, err := h.signIn(addr)
	if err != nil {
		t.Fatal(err)
	}
	h.advance(onboarding.DefaultSessionTTL)
	_, err = h.engine.Onboarding.Session(ctx, in2.Secret)
	wantCode(t, "an expired session", err, onboarding.CodeSignInRequired)
	for _, bad := range []string{"", "clr_ses_", "clr_ses_unknown", in2.Secret + "x", "clr_org_x"} {
		_, err := h.engine.Onboarding.Session(ctx, bad)
		wantCode(t, "session "+bad, err, onboarding.CodeSignInRequired)
	}
}

// A sign-in code is a sign-up code's equal in limits, and one does not
// verify as the other.
func TestSignInCodesApart(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const addr = "new@example.com"
	if _, err := h.engine.Onboarding.StartSignIn(ctx, fmt.Appendf(nil, `{"email":%q}`, addr)); err != nil {
		t.Fatal(err)
	}
	code := h.lastCode(addr)
	_, err := h.verify(addr, code) // as a sign-up code
	wantCode(t, "a sign-in code at register/verify", err, onboarding.CodeOTPInvalid)
	in, err := h.engine.Onboarding.VerifySignIn(ctx, fmt.Appendf(nil, `{"email":%q,"otp_code":%q}`, addr, code))
	if err != nil || in.Account.AccountID == "" || len(in.Account.Workspaces) != 0 {
		t.Fatalf("a new address signs in to an empty account: %+v, %v", in, err)
	}
	_, err = h.engine.Onboarding.VerifySignIn(ctx, fmt.Appendf(nil, `{"email":%q,"otp_code":%q}`, addr, code))
	wantCode(t, "the sign-in code again", err, onboarding.CodeOTPInvalid)
}

// A send whose mail fails changes nothing: the code mailed before still
// verifies, and the failed sends count toward no limit.
func TestFailedSendChangesNothing(t *testing.T) {
	h := newHarness(t)
	if _, err := h.start("ada@example.com"); err != nil {
		t.Fatal(err)
	}
	code := h.lastCode("ada@example.com")
	h.mailDown.Store(true)
	limit := h.engine.Onboarding.Settings().MaxSends
	for i := range limit + 1 {
		_, err := h.start("ada@example.com")
		wantCode(t, fmt.Sprintf("send %d while the mail is down", i+1), err, onboarding.CodeMailUnavailable)
		_, err = h.start("grace@example.com")
		wantCode(t, fmt.Sprintf("a new address's send %d while the mail is down", i+1), err, onboarding.CodeMailUnavailable)
	}
	h.mailDown.Store(false)
	if _, err := h.verify("ada@example.com", code); err != nil {
		t.Fatalf("the code mailed before the outage: %v", err)
	}
	if _, err := h.start("grace@example.com"); err != nil {
		t.Fatalf("a send after the outage: %v", err)
	}
	if _, err := h.verify("grace@example.com", h.lastCode("grace@example.com")); err != nil {
		t.Fatal(err)
	}
}
