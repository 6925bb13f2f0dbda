package mail_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/clearancehq/clearance/internal/mail"
)

func newSMTP(t *testing.T, rawURL string, trust *tls.Config) (*mail.SMTP, *logBuffer) {
	t.Helper()
	logger, lb := newLogger()
	s, err := mail.NewSMTP(rawURL, sender, logger)
	if err != nil {
		t.Fatal(err)
	}
	s.TLSConfig = trust
	return s, lb
}

// checkDelivered asserts the server received codeMail from sender, once.
func checkDelivered(t *testing.T, ts *testServer, wantTLS bool) delivery {
	t.Helper()
	rec := ts.record()
	if len(rec.deliveries) != 1 {
		t.Fatalf("%d deliveries, want 1", len(rec.deliveries))
	}
	d := rec.deliveries[0]
	if d.from != sender || len(d.rcpts) != 1 || d.rcpts[0] != codeMail.To {
		t.Errorf("envelope MAIL FROM %q RCPT TO %q", d.from, d.rcpts)
	}
	if d.tls != wantTLS {
		t.Errorf("delivered over TLS: %v, want %v", d.tls, wantTLS)
	}
	got, err := mail.Parse(bytes.NewReader(d.data))
	if err != nil {
		t.Fatal(err)
	}
	if got.From != sender || got.To != codeMail.To || got.Subject != codeMail.Subject || got.Text != codeMail.Text {
		t.Errorf("received %+v", got)
	}
	return d
}

func checkSentLog(t *testing.T, logs *logBuffer, ts *testServer, wantTLS string) {
	t.Helper()
	recs := logs.records(t)
	if len(recs) != 1 || recs[0]["msg"] != "mail sent" || recs[0]["to"] != codeMail.To ||
		recs[0]["server"] != ts.addr || recs[0]["tls"] != wantTLS {
		t.Errorf("log = %v", recs)
	}
	if s := logs.String(); strings.Contains(s, "493027") || strings.Contains(s, "sign-in code") {
		t.Errorf("the log holds the subject or the body: %s", s)
	}
}

func TestSMTPWithoutTLSOnOffer(t *testing.T) {
	ts := startServer(t, serverOpts{})
	s, logs := newSMTP(t, "smtp://"+ts.addr, nil)
	if err := s.Send(context.Background(), codeMail); err != nil {
		t.Fatal(err)
	}
	d := checkDelivered(t, ts, false)
	checkSentLog(t, logs, ts, "none")

	// The same rendering as the Mailbox: the bodies are byte for byte equal.
	mb, _ := newMailbox(t)
	if err := mb.Send(context.Background(), codeMail); err != nil {
		t.Fatal(err)
	}
	files, err := mail.ReadMailbox(mb.Dir())
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(files[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	_, fileBody, _ := bytes.Cut(file, []byte("\r\n\r\n"))
	_, sentBody, _ := bytes.Cut(d.data, []byte("\r\n\r\n"))
	if !bytes.Equal(fileBody, sentBody) || len(sentBody) == 0 {
		t.Errorf("body sent %q, body written %q", sentBody, fileBody)
	}
}

func TestSMTPUpgradesWithSTARTTLSWhenOffered(t *testing.T) {
	serverTLS, trust := selfSigned(t)
	ts := startServer(t, serverOpts{startTLS: serverTLS})
	s, logs := newSMTP(t, "smtp://"+ts.addr, trust)
	if err := s.Send(context.Background(), codeMail); err != nil {
		t.Fatal(err)
	}
	checkDelivered(t, ts, true)
	checkSentLog(t, logs, ts, "starttls")
	if rec := ts.record(); rec.mailsInClear != 0 {
		t.Errorf("%d MAIL commands in clear", rec.mailsInClear)
	}
}

func TestSMTPVerifiesTheCertificate(t *testing.T) {
	serverTLS, _ := selfSigned(t)
	ts := startServer(t, serverOpts{startTLS: serverTLS})
	s, _ := newSMTP(t, "smtp://"+ts.addr, nil) // the system roots do not know it
	err := s.Send(context.Background(), codeMail)
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("Send = %v, want a certificate verification error", err)
	}
	ts.stop()
	if rec := ts.record(); rec.mailCommands != 0 || len(rec.deliveries) != 0 {
		t.Errorf("the server saw %+v", rec)
	}
}

func TestSMTPAuthenticatesAfterSTARTTLS(t *testing.T) {
	serverTLS, trust := selfSigned(t)
	const user, pass = "mailer", "p@ss:w/rd%"
	ts := startServer(t, serverOpts{startTLS: serverTLS, user: user, pass: pass})
	s, _ := newSMTP(t, "smtp://"+url.UserPassword(user, pass).String()+"@"+ts.addr, trust)
	if err := s.Send(context.Background(), codeMail); err != nil {
		t.Fatal(err)
	}
	checkDelivered(t, ts, true)
	rec := ts.record()
	if len(rec.auths) != 1 || rec.auths[0] != (authAttempt{user: user, pass: pass, tls: true}) {
		t.Errorf("AUTH seen: %+v", rec.auths)
	}
	if rec.mailsInClear != 0 {
		t.Errorf("%d MAIL commands in clear", rec.mailsInClear)
	}
}

func TestSMTPWrongPasswordIsAnError(t *testing.T) {
	serverTLS, trust := selfSigned(t)
	ts := startServer(t, serverOpts{startTLS: serverTLS, user: "mailer", pass: "right"})
	s, _ := newSMTP(t, "smtp://mailer:wrong@"+ts.addr, trust)
	err := s.Send(context.Background(), codeMail)
	var serr *smtp.SMTPError
	if !errors.As(err, &serr) || serr.Code != 535 {
		t.Fatalf("Send = %v, want 535", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Errorf("the error quotes the password: %v", err)
	}
	ts.stop()
	if rec := ts.record(); rec.mailCommands != 0 {
		t.Errorf("MAIL after a failed AUTH: %+v", rec)
	}
}

// Credentials never go in clear, even to a server that would take them.
func TestSMTPRefusesCredentialsWithoutSTARTTLS(t *testing.T) {
	ts := startServer(t, serverOpts{user: "mailer", pass: "secret", insecureAuth: true})
	s, logs := newSMTP(t, "smtp://mailer:secret@"+ts.addr, nil)
	err := s.Send(context.Background(), codeMail)
	if err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("Send = %v, want a STARTTLS error", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("the error quotes the password: %v", err)
	}
	ts.stop()
	rec := ts.record()
	if len(rec.auths) != 0 || rec.mailCommands != 0 || len(rec.deliveries) != 0 {
		t.Errorf("the server saw %+v", rec)
	}
	if logs.String() != "" {
		t.Errorf("logged %s", logs)
	}
}

func TestSMTPSImplicitTLS(t *testing.T) {
	serverTLS, trust := selfSigned(t)
	ts := startServer(t, serverOpts{implicitTLS: serverTLS, user: "mailer", pass: "secret"})
	s, logs := newSMTP(t, "smtps://mailer:secret@"+ts.addr, trust)
	if err := s.Send(context.Background(), codeMail); err != nil {
		t.Fatal(err)
	}
	checkDelivered(t, ts, true)
	checkSentLog(t, logs, ts, "implicit")
	if rec := ts.record(); len(rec.auths) != 1 || !rec.auths[0].tls {
		t.Errorf("AUTH seen: %+v", rec.auths)
	}

	// smtps to a server that speaks plain SMTP fails in the handshake.
	plain := startServer(t, serverOpts{})
	s, _ = newSMTP(t, "smtps://"+plain.addr, trust)
	if err := s.Send(context.Background(), codeMail); err == nil {
		t.Error("smtps to a plain server succeeded")
	}
}

func TestSMTPRejectedRecipientIsAnError(t *testing.T) {
	ts := startServer(t, serverOpts{rejectRcpt: true})
	s, logs := newSMTP(t, "smtp://"+ts.addr, nil)
	err := s.Send(context.Background(), codeMail)
	var serr *smtp.SMTPError
	if !errors.As(err, &serr) || serr.Code != 550 || !strings.Contains(err.Error(), "RCPT TO") {
		t.Fatalf("Send = %v, want a 550 at RCPT TO", err)
	}
	if rec := ts.record(); len(rec.deliveries) != 0 {
		t.Errorf("delivered anyway: %+v", rec)
	}
	if logs.String() != "" {
		t.Errorf("logged %s", logs)
	}
}

func TestSMTPCancelledDuringData(t *testing.T) {
	entered := make(chan struct{}, 1)
	gate := make(chan struct{})
	ts := startServer(t, serverOpts{dataEntered: entered, dataGate: gate})
	t.Cleanup(func() { close(gate) }) // runs before the server stops
	s, _ := newSMTP(t, "smtp://"+ts.addr, nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-entered
		cancel()
	}()
	if err := sendBounded(t, s, ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send = %v, want context.Canceled", err)
	}
}

func TestSMTPDeadline(t *testing.T) {
	addr := silentListener(t) // accepts, never greets
	s, _ := newSMTP(t, "smtp://"+addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := sendBounded(t, s, ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send = %v, want context.DeadlineExceeded", err)
	}
}

// sendBounded sends codeMail and fails the test if Send outlives ctx by
// far: go-smtp's own timeouts are minutes long, so a Send that ignored its
// context would hang the test rather than fail it.
func sendBounded(t *testing.T, s *mail.SMTP, ctx context.Context) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Send(ctx, codeMail) }()
	<-ctx.Done()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second): // a watchdog, not synchronisation
		t.Fatal("Send did not return after its context ended")
		return nil
	}
}

func TestSMTPDoesNotDialForAnEndedContextOrAnInvalidMessage(t *testing.T) {
	ts := startServer(t, serverOpts{})
	s, _ := newSMTP(t, "smtp://"+ts.addr, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Send(ctx, codeMail); !errors.Is(err, context.Canceled) {
		t.Errorf("Send = %v, want context.Canceled", err)
	}
	for name, m := range invalidMessages {
		if err := s.Send(context.Background(), m); !errors.Is(err, mail.ErrInvalidMessage) {
			t.Errorf("%s: Send = %v", name, err)
		}
	}
	ts.stop()
	if rec := ts.record(); rec.sessions != 0 {
		t.Errorf("the server saw %+v", rec)
	}
}

func TestNewSMTP(t *testing.T) {
	valid := map[string]string{
		"smtp://127.0.0.1:25":                   "127.0.0.1:25",
		"smtp://user:pass@mail.example.com:587": "mail.example.com:587",
		"SMTP://mail.example.com:587/":          "mail.example.com:587",
		"smtps://mail.example.com:465":          "mail.example.com:465",
		"smtp://[::1]:2525":                     "[::1]:2525",
		"smtp://u%40x:p%3Aw@mail.example.com:1": "mail.example.com:1",
	}
	for raw, addr := range valid {
		s, err := mail.NewSMTP(raw, sender, nil)
		if err != nil {
			t.Errorf("NewSMTP(%q) = %v", raw, err)
			continue
		}
		if s.Addr() != addr {
			t.Errorf("NewSMTP(%q).Addr() = %q, want %q", raw, s.Addr(), addr)
		}
	}
	invalid := []string{
		"",
		"mail.example.com:25",
		"http://mail.example.com:25",
		"smtp+starttls://mail.example.com:25",
		"smtp://mail.example.com",
		"smtp://mail.example.com:",
		"smtp://:25",
		"smtp://mail.example.com:0",
		"smtp://mail.example.com:65536",
		"smtp://mail.example.com:smtp",
		"smtp:mail.example.com:25",
		"smtp://mail.example.com:25/relay",
		"smtp://mail.example.com:25?starttls=never",
		"smtp://mail.example.com:25?",
		"smtp://mail.example.com:25#x",
		"smtp://user@mail.example.com:25",
		"smtp://user:@mail.example.com:25",
		"smtp://:s3cret@mail.example.com:25",
		"smtp://user:s3cret@mail.example.com",
		"smtp://user:s3cret@mail.example.com:25?x=1",
		"smtp://user:s3cret@mail example.com:25",
		"smtp://user:s3cret@mail.example.com:25x",
		"smtp://user:s3cret%zz@mail.example.com:25",
	}
	for _, raw := range invalid {
		_, err := mail.NewSMTP(raw, sender, nil)
		if err == nil {
			t.Errorf("NewSMTP(%q) succeeded", raw)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("NewSMTP(%q): the error quotes the password: %v", raw, err)
		}
	}
	for _, from := range []string{"", "Clearance <no-reply@clearance.example>", "no-reply"} {
		if _, err := mail.NewSMTP("smtp://mail.example.com:25", from, nil); err == nil {
			t.Errorf("NewSMTP accepted sender %q", from)
		}
	}
}

// The mailbox directory Open picks is <data>/mailbox, as the design says.
func TestOpenMailboxPath(t *testing.T) {
	data := t.TempDir()
	m, err := mail.Open("", data, sender, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Send(context.Background(), codeMail); err != nil {
		t.Fatal(err)
	}
	got, err := mail.ReadMailbox(filepath.Join(data, "mailbox"))
	if err != nil || len(got) != 1 || got[0].Text != codeMail.Text {
		t.Fatalf("ReadMailbox = %+v, %v", got, err)
	}
}
