package server_test

// Sign-up end to end: the HTTP routes of onboarding over a real store
// (Pebble or PostgreSQL, see openBackend), with the codes mailed through a
// real SMTP server in this process (go-smtp) and read back from what it
// received.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/httptest"
	netmail "net/mail"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/server"
)

// Sign-up routes and settings under test.
const (
	pathRegisterStart   = "/v1/public/auth/register/start"
	pathRegisterVerify  = "/v1/public/auth/register/verify"
	pathMappingSessions = "/v1/public/pilot/signal-mapping/sessions"

	signUpFrom = "clearance@example.com"

	// The documented defaults the limits below are asserted against.
	signUpCodeTTL     = 10 * time.Minute
	signUpGrantTTL    = 30 * time.Minute
	signUpMaxAttempts = 5
	signUpMaxSends    = 5
	signUpSendWindow  = time.Hour
)

// signUpStart is the moment every sign-up env's clock starts at.
var signUpStart = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func bundlePath(sessionID string) string {
	return pathMappingSessions + "/" + sessionID + "/deployment-bundle"
}

// ---------------------------------------------------------------------------
// A real SMTP server in process that records every message it accepts.

// smtpMessage is one accepted message: its envelope and its bytes.
type smtpMessage struct {
	from  string
	rcpts []string
	data  []byte
}

type smtpRecorder struct {
	addr   string
	srv    *smtp.Server
	served chan struct{}
	// fail, when set, is the SMTP error every DATA is answered with (the
	// message is not recorded): a mail server that is up but refuses.
	fail atomic.Pointer[smtp.SMTPError]

	mu   sync.Mutex
	msgs []smtpMessage
}

// startSMTPRecorder listens on a loopback port; it stops when t ends.
func startSMTPRecorder(t testing.TB) *smtpRecorder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &smtpRecorder{addr: l.Addr().String(), served: make(chan struct{})}
	rec.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &smtpRecSession{rec: rec}, nil
	}))
	rec.srv.Domain = "localhost"
	rec.srv.ErrorLog = log.New(io.Discard, "", 0)
	go func() {
		defer close(rec.served)
		_ = rec.srv.Serve(l)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rec.srv.Shutdown(ctx); err != nil {
			_ = rec.srv.Close()
		}
		<-rec.served
	})
	return rec
}

type smtpRecSession struct {
	rec   *smtpRecorder
	from  string
	rcpts []string
}

func (s *smtpRecSession) Mail(from string, _ *smtp.MailOptions) error { s.from = from; return nil }

func (s *smtpRecSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.rcpts = append(s.rcpts, to)
	return nil
}

// Data records the message before it answers 250, so a Send that returned
// (and so a 202 of register/start) means the message is here.
func (s *smtpRecSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if e := s.rec.fail.Load(); e != nil {
		return e
	}
	s.rec.mu.Lock()
	s.rec.msgs = append(s.rec.msgs, smtpMessage{from: s.from, rcpts: append([]string(nil), s.rcpts...), data: b})
	s.rec.mu.Unlock()
	return nil
}

func (s *smtpRecSession) Reset()        { s.from, s.rcpts = "", nil }
func (s *smtpRecSession) Logout() error { return nil }

// signUpMail is a received message, read independently of the mail
// package: headers through net/mail, the body decoded from
// quoted-printable.
type signUpMail struct {
	envelopeFrom string
	rcpts        []string
	from, to     string
	subject      string
	text         string
}

// to returns the messages whose envelope names addr, oldest first.
func (rec *smtpRecorder) to(t testing.TB, addr string) []signUpMail {
	t.Helper()
	rec.mu.Lock()
	msgs := append([]smtpMessage(nil), rec.msgs...)
	rec.mu.Unlock()
	var out []signUpMail
	for _, m := range msgs {
		named := false
		for _, r := range m.rcpts {
			named = named || r == addr
		}
		if !named {
			continue
		}
		out = append(out, parseSignUpMail(t, m))
	}
	return out
}

func parseSignUpMail(t testing.TB, m smtpMessage) signUpMail {
	t.Helper()
	msg, err := netmail.ReadMessage(bytes.NewReader(m.data))
	if err != nil {
		t.Fatalf("a received message does not parse: %v\n%s", err, m.data)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "text/plain" || !strings.EqualFold(params["charset"], "utf-8") {
		t.Fatalf("Content-Type %q: %v", msg.Header.Get("Content-Type"), err)
	}
	if cte := msg.Header.Get("Content-Transfer-Encoding"); !strings.EqualFold(cte, "quoted-printable") {
		t.Fatalf("Content-Transfer-Encoding %q, want quoted-printable", cte)
	}
	text, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		t.Fatalf("body is not quoted-printable: %v", err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	return signUpMail{envelopeFrom: m.from, rcpts: m.rcpts, from: msg.Header.Get("From"), to: msg.Header.Get("To"),
		subject: subject, text: string(text)}
}

// sixDigits is a run of exactly six digits.
var sixDigits = regexp.MustCompile(`(?:^|[^0-9])([0-9]{6})(?:[^0-9]|$)`)

// lastCode returns the code of the newest message to addr, checking that
// it is addressed to addr, from the engine's sender, on both the envelope
// and the headers, and holds exactly one code.
func (rec *smtpRecorder) lastCode(t testing.TB, addr string) string {
	t.Helper()
	msgs := rec.to(t, addr)
	if len(msgs) == 0 {
		t.Fatalf("no message was sent to %s", addr)
	}
	m := msgs[len(msgs)-1]
	if len(m.rcpts) != 1 || m.rcpts[0] != addr || m.to != addr || m.envelopeFrom != signUpFrom || m.from != signUpFrom {
		t.Fatalf("message to %s: envelope %s -> %v, headers From %q To %q", addr, m.envelopeFrom, m.rcpts, m.from, m.to)
	}
	if m.subject == "" {
		t.Fatalf("message to %s has no subject", addr)
	}
	found := sixDigits.FindAllStringSubmatch(m.text, -1)
	if len(found) != 1 {
		t.Fatalf("message to %s holds %d six-digit codes, want 1:\n%s", addr, len(found), m.text)
	}
	return found[0][1]
}

// ---------------------------------------------------------------------------
// The env: newEnv's server with a mailer, a secrets key and a test clock.

type signUpEnv struct {
	*env
	mail *smtpRecorder
	now  *atomic.Int64 // unix nanos
}

// newSignUpEnv starts an SMTP recorder and a server whose engine mails
// through it, over a fresh store, with one clock the test moves for the
// engine and the store.
func newSignUpEnv(t testing.TB) *signUpEnv {
	t.Helper()
	x := &signUpEnv{mail: startSMTPRecorder(t), now: &atomic.Int64{}}
	x.now.Store(signUpStart.UnixNano())
	mailer, err := clearance.NewMailer("smtp://"+x.mail.addr, "", signUpFrom, nil)
	if err != nil {
		t.Fatal(err)
	}
	x.env = &env{t: t, dbDir: filepath.Join(t.TempDir(), "db"), opts: server.Options{AuthRateLimit: -1},
		engineOpts: clearance.Options{Mailer: mailer, SecretsKey: testSecretsKey, Now: x.clock}}
	// As env.start, with the test clock for the store as well.
	st := openBackend(t, x.dbDir, x.clock)
	eng, err := clearance.Open(st, x.engineOpts)
	if err != nil {
		st.Close()
		t.Fatalf("open engine: %v", err)
	}
	x.store, x.engine = st, eng
	x.server = server.New(eng, x.opts)
	x.srv = httptest.NewServer(x.server)
	x.client = x.srv.Client()
	t.Cleanup(x.stop)
	secret, err := eng.Admin.NewPlatformSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Admin.EnsurePlatformKey(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	x.platform = secret

	s := eng.Onboarding.Settings()
	if s.CodeTTL != signUpCodeTTL || s.GrantTTL != signUpGrantTTL || s.MaxAttempts != signUpMaxAttempts ||
		s.MaxSends != signUpMaxSends || s.SendWindow != signUpSendWindow {
		t.Fatalf("onboarding settings %+v are not the documented defaults", s)
	}
	return x
}

func (x *signUpEnv) clock() time.Time { return time.Unix(0, x.now.Load()).UTC() }

func (x *signUpEnv) advance(d time.Duration) { x.now.Add(int64(d)) }

// start asks for a code for addr.
func (x *signUpEnv) start(addr string) *result {
	x.t.Helper()
	return x.do("POST", pathRegisterStart, "", map[string]string{
		"owner_email": addr, "owner_name": "Ada Lovelace", "org_name": "Analytical Engines"}, nil)
}

func (x *signUpEnv) verify(addr, code string) *result {
	x.t.Helper()
	return x.do("POST", pathRegisterVerify, "", map[string]string{"owner_email": addr, "otp_code": code}, nil)
}

// signedUp is a verified sign-up.
type signedUp struct {
	orgID, grant, accountID string
}

// signUp takes addr from nothing to an onboarding grant.
func (x *signUpEnv) signUp(addr string) signedUp {
	x.t.Helper()
	x.start(addr).want(x.t, http.StatusAccepted)
	r := x.verify(addr, x.mail.lastCode(x.t, addr)).want(x.t, http.StatusOK)
	s := signedUp{orgID: r.str("org_id"), grant: r.str("onboarding_grant"), accountID: r.str("account_id")}
	if !strings.HasPrefix(s.grant, "clr_onb_") || s.orgID == "" || s.accountID == "" {
		x.t.Fatalf("verify: %s", r)
	}
	return s
}

// session opens a mapping session of orgID with key.
func (x *signUpEnv) session(key, orgID string) string {
	x.t.Helper()
	r := x.do("POST", pathMappingSessions, key, map[string]string{"org_id": orgID}, nil).want(x.t, http.StatusCreated)
	if r.str("session_id") == "" || r.str("org_id") != orgID || r.str("status") != "open" {
		x.t.Fatalf("session: %s", r)
	}
	return r.str("session_id")
}

// bundleBody is a deployment bundle's request.
var bundleBody = map[string]string{"provider_key": "stripe", "workflow_key": "ap.invoice", "source_label": "Stripe payouts"}

// wrongCode is a code certain to differ from code: the i-th after it.
func wrongCode(t testing.TB, code string, i int) string {
	t.Helper()
	n, err := strconv.Atoi(code)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%06d", (n+1+i)%1_000_000)
}

// hasMember reports whether a member name appears anywhere in v.
func hasMember(v any, name string) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, m := range x {
			if k == name || hasMember(m, name) {
				return true
			}
		}
	case []any:
		for _, m := range x {
			if hasMember(m, name) {
				return true
			}
		}
	}
	return false
}

// sameBut compares two answers' statuses, Content-Types and bodies, the
// request ids in the bodies aside.
func sameBut(t testing.TB, what string, a, b *result) {
	t.Helper()
	strip := func(r *result) string {
		rid := r.str("request_id")
		if rid == "" {
			return string(r.Raw)
		}
		return strings.ReplaceAll(string(r.Raw), strconv.Quote(rid), `"<request id>"`)
	}
	if a.Status != b.Status || a.Header.Get("Content-Type") != b.Header.Get("Content-Type") || strip(a) != strip(b) {
		t.Fatalf("%s differ:\n%s\n%s", what, a, b)
	}
}

// ---------------------------------------------------------------------------

// From nothing to a first decision: a code by SMTP, the grant, a mapping
// session, the deployment bundle, a decision with the bundle's key and a
// signal through the bundle's webhook; then the grant is dead and the
// bundle is not issued again.
func TestOnboardingSignUpToFirstDecision(t *testing.T) {
	t.Parallel()
	x := newSignUpEnv(t)
	const owner, stranger = "ada@analytical.example", "nobody@analytical.example"

	st := x.start(owner).want(t, http.StatusAccepted)
	if st.str("status") != "code_sent" || st.num("expires_in_seconds") != signUpCodeTTL.Seconds() {
		t.Fatalf("start: %s", st)
	}
	other := x.start(stranger).want(t, http.StatusAccepted)
	if !bytes.Equal(st.Raw, other.Raw) {
		t.Fatalf("start answers differ by address:\n%s\n%s", st, other)
	}
	if n := len(x.mail.to(t, owner)); n != 1 {
		t.Fatalf("%d messages to the owner, want 1", n)
	}
	code := x.mail.lastCode(t, owner)

	v := x.verify(owner, code).want(t, http.StatusOK)
	orgID, grant := v.str("org_id"), v.str("onboarding_grant")
	if !strings.HasPrefix(grant, "clr_onb_") || len(orgID) != 36 || v.str("account_id") == "" || v.str("grant_id") == "" {
		t.Fatalf("verify: %s", v)
	}
	if exp, err := time.Parse(time.RFC3339Nano, v.str("grant_expires_at")); err != nil || !exp.Equal(signUpStart.Add(signUpGrantTTL)) {
		t.Fatalf("grant_expires_at %q, want %s: %v", v.str("grant_expires_at"), signUpStart.Add(signUpGrantTTL), err)
	}
	for path, want := range map[string]string{
		"workspace.org_id":                    orgID,
		"workspace.name":                      "Analytical Engines",
		"workspace.paths.mapping_sessions":    pathMappingSessions,
		"workspace.paths.evaluate_decision":   pathEvaluate,
		"workspace.paths.signal_connectors":   pathSignalConnectors,
		"workspace.paths.webhook_integration": "/v1/orgs/" + orgID + "/integrations/WEBHOOK/connect",
	} {
		if got := v.str(path); got != want {
			t.Errorf("verify %s = %q, want %q", path, got, want)
		}
	}
	if hasMember(v.JSON, "api_key") || bytes.Contains(v.Raw, []byte("clr_org_")) {
		t.Fatalf("verify answers an org API key: %s", v)
	}

	sessionID := x.session(grant, orgID)
	b := x.do("POST", bundlePath(sessionID), grant, bundleBody, nil).want(t, http.StatusCreated)
	apiKey, connID, whSecret, whURL := b.str("api_key"), b.str("connector_id"), b.str("webhook_secret"), b.str("webhook_url")
	if !strings.HasPrefix(apiKey, "clr_org_") || connID == "" || whSecret == "" || b.str("policy_version") == "" ||
		b.str("org_id") != orgID || b.str("session_id") != sessionID {
		t.Fatalf("bundle: %s", b)
	}
	if u, err := url.Parse(whURL); err != nil || !u.IsAbs() || u.Host == "" ||
		!strings.HasSuffix(whURL, pathSignalWebhooks+connID) || whURL != x.srv.URL+pathSignalWebhooks+connID {
		t.Fatalf("webhook_url %q is not this server's absolute URL of connector %s", whURL, connID)
	}

	d := x.do("POST", pathEvaluate, apiKey, `{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":250}`, nil).
		want(t, http.StatusOK)
	if d.str("outcome") == "" || d.str("dossier_id") == "" {
		t.Fatalf("first decision: %s", d)
	}

	// The signal goes to the absolute URL as the bundle gave it.
	rq, err := http.NewRequest("POST", whURL, strings.NewReader(fmt.Sprintf(
		`{"events":[{"type":"fraud.alert","timestamp":%q,"data":{"level":"low"}}]}`, x.clock().Format(time.RFC3339))))
	if err != nil {
		t.Fatal(err)
	}
	rq.Header.Set("Content-Type", "application/json")
	rq.Header.Set("X-Webhook-Secret", whSecret)
	res, err := x.client.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("signal to the bundle's webhook: %d %s", res.StatusCode, raw)
	}

	// The bundle revoked the grant.
	x.do("POST", pathMappingSessions, grant, map[string]string{"org_id": orgID}, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	x.do("POST", bundlePath(sessionID), grant, bundleBody, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	// Once: the org key asking again mints nothing.
	x.do("POST", bundlePath(sessionID), apiKey, bundleBody, nil).wantProblem(t, http.StatusConflict, "BUNDLE_ALREADY_ISSUED")
	conns := x.do("GET", pathSignalConnectors, apiKey, nil, nil).want(t, http.StatusOK)
	if list, _ := conns.JSON["connectors"].([]any); len(list) != 1 || conns.str("connectors.0.connector_id") != connID {
		t.Fatalf("connectors after a refused second bundle: %s", conns)
	}
}

// Guessing: a code takes five wrong tries and is burned, an address gets
// five codes an hour, and an address takes ten wrong codes a day in all
// (sign-up and sign-in together, onboarding/attempts.go): then every
// verify and send for it is 429 TOO_MANY_ATTEMPTS until the day has passed.
func TestOnboardingCodeBruteForceIsBounded(t *testing.T) {
	t.Parallel()
	x := newSignUpEnv(t)
	const victim = "victim@example.com"
	const maxFailures, failureWindow = 10, 24 * time.Hour // the documented defaults

	guesses, checked, accepted := 0, 0, 0
	var locked *result
	var lockedAt time.Time
	for round := 0; locked == nil; round++ {
		if r := x.start(victim); r.Status != http.StatusAccepted {
			locked, lockedAt = r.wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_ATTEMPTS"), x.clock()
			break
		}
		code := x.mail.lastCode(t, victim)
		for i := range signUpMaxAttempts {
			guesses++
			switch r := x.verify(victim, wrongCode(t, code, i)); r.Status {
			case http.StatusOK:
				accepted++
			case http.StatusUnauthorized:
				r.wantProblem(t, http.StatusUnauthorized, "OTP_INVALID")
				checked++
			default:
				r.wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_ATTEMPTS")
			}
		}
		// The right code, after five wrong tries (burned) or at the limit
		// (locked), is refused too.
		guesses++
		if r := x.verify(victim, code); r.Status == http.StatusOK {
			accepted++
			t.Errorf("round %d: the right code was accepted after %d wrong tries", round+1, signUpMaxAttempts)
		} else if r.Status != http.StatusUnauthorized {
			r.wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_ATTEMPTS")
		}
		x.advance(time.Minute)
	}
	if accepted != 0 || checked != maxFailures {
		t.Fatalf("%d of %d guesses were accepted (want 0), %d checked (want %d)", accepted, guesses, checked, maxFailures)
	}
	// Locked until the first failure (at signUpStart) leaves the window.
	retry, err := strconv.Atoi(locked.Header.Get("Retry-After"))
	if want := int((failureWindow - lockedAt.Sub(signUpStart)) / time.Second); err != nil || retry != want {
		t.Fatalf("Retry-After %q, want %d", locked.Header.Get("Retry-After"), want)
	}
	if n := len(x.mail.to(t, victim)); n != maxFailures/signUpMaxAttempts {
		t.Fatalf("%d messages to the address, want %d", n, maxFailures/signUpMaxAttempts)
	}
	t.Logf("guesses checked per address per %v: at most %d; "+
		"measured: %d guesses, %d checked, %d accepted; chance of a blind guess per window <= %d/1e6",
		failureWindow, maxFailures, guesses, checked, accepted, maxFailures)

	// The send limit: a sixth code within the hour is not sent.
	const sender = "sender@example.com"
	for range signUpMaxSends {
		x.start(sender).want(t, http.StatusAccepted)
		x.advance(time.Minute)
	}
	r := x.start(sender).wantProblem(t, http.StatusTooManyRequests, "TOO_MANY_CODES")
	if retry, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || retry != int((signUpSendWindow-signUpMaxSends*time.Minute)/time.Second) {
		t.Fatalf("TOO_MANY_CODES Retry-After %q", r.Header.Get("Retry-After"))
	}
	if n := len(x.mail.to(t, sender)); n != signUpMaxSends {
		t.Fatalf("%d messages to the address, want %d", n, signUpMaxSends)
	}

	// The window slides: after Retry-After a code is sent and works.
	x.advance(lockedAt.Add(time.Duration(retry) * time.Second).Sub(x.clock()))
	x.start(victim).want(t, http.StatusAccepted)
	x.verify(victim, x.mail.lastCode(t, victim)).want(t, http.StatusOK)

	// The limit of a code is exactly five: four wrong tries leave it good.
	const edge = "edge@example.com"
	x.start(edge).want(t, http.StatusAccepted)
	code := x.mail.lastCode(t, edge)
	for i := range signUpMaxAttempts - 1 {
		x.verify(edge, wrongCode(t, code, i)).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID")
	}
	x.verify(edge, code).want(t, http.StatusOK)
}

// Each address's code is its own; codes are good once, for ten minutes,
// only as six ASCII digits; every refusal of a well-formed code is one
// answer, whatever the reason.
func TestOnboardingCodeRefusals(t *testing.T) {
	t.Parallel()
	x := newSignUpEnv(t)
	const a, b = "alice@example.com", "bob@example.com"

	x.start(a).want(t, http.StatusAccepted)
	codeA := x.mail.lastCode(t, a)
	x.start(b).want(t, http.StatusAccepted)
	codeB := x.mail.lastCode(t, b)
	for tries := 0; codeA == codeB; tries++ { // one chance in a million
		if tries == 3 {
			t.Fatal("the same code three times over")
		}
		x.start(b).want(t, http.StatusAccepted)
		codeB = x.mail.lastCode(t, b)
	}
	wrong := x.verify(a, codeB).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID")
	sameBut(t, "a wrong code and another address's code", wrong,
		x.verify(b, codeA).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID"))
	unknown := x.verify("nobody@example.com", codeA).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID")
	sameBut(t, "a wrong code and an unknown address", wrong, unknown)

	// Each code still works for its own address, once.
	va := x.verify(a, codeA).want(t, http.StatusOK)
	vb := x.verify(b, codeB).want(t, http.StatusOK)
	if va.str("org_id") == vb.str("org_id") || va.str("account_id") == vb.str("account_id") {
		t.Fatalf("two addresses share an org or an account:\n%s\n%s", va, vb)
	}
	sameBut(t, "a wrong code and a used one", wrong,
		x.verify(a, codeA).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID"))

	// Not six ASCII digits: a bad request, not a try.
	x.start(a).want(t, http.StatusAccepted)
	codeA = x.mail.lastCode(t, a)
	for _, bad := range []string{"１２３４５６", "1234567", codeA + "0", "١٢٣٤٥٦", " " + codeA[1:]} {
		x.verify(a, bad).wantProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
	}
	// Good until ten minutes have passed, not after.
	x.advance(signUpCodeTTL - time.Second)
	x.verify(a, codeA).want(t, http.StatusOK)
	x.start(b).want(t, http.StatusAccepted)
	codeB = x.mail.lastCode(t, b)
	x.advance(signUpCodeTTL)
	sameBut(t, "a wrong code and an expired one", wrong,
		x.verify(b, codeB).wantProblem(t, http.StatusUnauthorized, "OTP_INVALID"))
}

// The onboarding grant opens the mapping routes of its own org, for thirty
// minutes, and nothing else; the platform key does not open them.
func TestOnboardingGrantStaysOnMappingRoutes(t *testing.T) {
	t.Parallel()
	x := newSignUpEnv(t)
	a, b := x.signUp("a@example.com"), x.signUp("b@example.com")

	x.do("POST", pathEvaluate, a.grant, `{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":250}`, nil).
		wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.do("GET", pathSignalConnectors, a.grant, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.do("GET", "/v1/protocol/reason-codes", a.grant, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.do("POST", pathSignalConnectors, a.grant, map[string]any{"name": "feed"}, nil).
		wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")

	// Another org's id, another org's session.
	x.do("POST", pathMappingSessions, a.grant, map[string]string{"org_id": b.orgID}, nil).
		wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	sessionB := x.session(b.grant, b.orgID)
	x.do("POST", bundlePath(sessionB), a.grant, bundleBody, nil).wantProblem(t, http.StatusNotFound, "MAPPING_SESSION_NOT_FOUND")
	x.do("POST", bundlePath(unknownID), a.grant, bundleBody, nil).wantProblem(t, http.StatusNotFound, "MAPPING_SESSION_NOT_FOUND")

	// The platform key, and an org key without org:*, are refused.
	sessionA := x.session(a.grant, a.orgID)
	x.do("POST", pathMappingSessions, x.platform, map[string]string{"org_id": a.orgID}, nil).
		wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.do("POST", bundlePath(sessionA), x.platform, bundleBody, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	narrow := x.createKey(org{ID: a.orgID}, "decision:write")
	x.do("POST", pathMappingSessions, narrow, map[string]string{"org_id": a.orgID}, nil).
		wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.do("POST", bundlePath(sessionA), narrow, bundleBody, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")

	// None of that touched B's session, and B's bundle revokes B's grant
	// only.
	bb := x.do("POST", bundlePath(sessionB), b.grant, bundleBody, nil).want(t, http.StatusCreated)
	if bb.str("org_id") != b.orgID {
		t.Fatalf("B's bundle: %s", bb)
	}
	x.do("POST", pathMappingSessions, b.grant, map[string]string{"org_id": b.orgID}, nil).
		wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
	x.do("POST", bundlePath(sessionA), a.grant, bundleBody, nil).want(t, http.StatusCreated)

	// A grant is good for thirty minutes.
	c := x.signUp("c@example.com")
	x.advance(signUpGrantTTL - time.Second)
	x.session(c.grant, c.orgID)
	x.advance(time.Second)
	x.do("POST", pathMappingSessions, c.grant, map[string]string{"org_id": c.orgID}, nil).
		wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")
}

// Start answers the same bytes for an address with an account and one
// without, and does the same work: a code is mailed to either.
func TestOnboardingStartSameForKnownAndUnknown(t *testing.T) {
	t.Parallel()
	x := newSignUpEnv(t)
	const known, unknown = "known@example.com", "unknown@example.com"
	first := x.signUp(known)

	k := x.start(known)
	u := x.start(unknown)
	if k.Status != http.StatusAccepted || u.Status != k.Status || !bytes.Equal(k.Raw, u.Raw) ||
		k.Header.Get("Content-Type") != u.Header.Get("Content-Type") {
		t.Fatalf("start answers differ:\nknown:   %s\nunknown: %s", k, u)
	}
	if nk, nu := len(x.mail.to(t, known)), len(x.mail.to(t, unknown)); nk != 2 || nu != 1 {
		t.Fatalf("messages: %d to the known address (want 2), %d to the unknown (want 1)", nk, nu)
	}
	// The known owner's new code makes another org on the same account.
	v := x.verify(known, x.mail.lastCode(t, known)).want(t, http.StatusOK)
	if v.str("account_id") != first.accountID || v.str("org_id") == first.orgID {
		t.Fatalf("second sign-up of a known address: %s (first: %+v)", v, first)
	}
	x.verify(unknown, x.mail.lastCode(t, unknown)).want(t, http.StatusOK)
}
