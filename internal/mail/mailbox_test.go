package mail_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/quotedprintable"
	netmail "net/mail"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/mail"
)

const sender = "no-reply@clearance.example"

// logBuffer collects JSON log lines; slog's handler serialises its writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func newLogger() (*slog.Logger, *logBuffer) {
	lb := &logBuffer{}
	return slog.New(slog.NewJSONHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

func newMailbox(t *testing.T) (*mail.Mailbox, *logBuffer) {
	t.Helper()
	logger, lb := newLogger()
	mb, err := mail.NewMailbox(filepath.Join(t.TempDir(), "mailbox"), sender, logger)
	if err != nil {
		t.Fatal(err)
	}
	return mb, lb
}

// files lists every name in dir, hidden and temporary ones included.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

var codeMail = mail.Message{
	To:      "ada@example.com",
	Subject: "Your Clearance sign-in code",
	Text:    "Your code is 493027.\nIt expires in 10 minutes.\n",
}

// The file is a complete RFC 5322 message, checked with the standard
// library rather than with the package's own Parse.
func TestMailboxWritesACompleteMessage(t *testing.T) {
	mb, logs := newMailbox(t)
	before := time.Now().Truncate(time.Second)
	if err := mb.Send(context.Background(), codeMail); err != nil {
		t.Fatal(err)
	}
	names := files(t, mb.Dir())
	if len(names) != 1 || !regexp.MustCompile(`^\d{8}T\d{6}\.\d{9}Z-[0-9a-f]{16}\.eml$`).MatchString(names[0]) {
		t.Fatalf("mailbox holds %q, want one <time>-<random>.eml", names)
	}
	path := filepath.Join(mb.Dir(), names[0])
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(bytes.ReplaceAll(raw, []byte("\r\n"), nil), []byte("\n")) || bytes.Contains(bytes.ReplaceAll(raw, []byte("\r\n"), nil), []byte("\r")) {
		t.Errorf("a line ending is not CRLF:\n%q", raw)
	}
	for i, c := range raw {
		if c >= 0x80 {
			t.Fatalf("byte %d is %#x: the message should be 7-bit", i, c)
		}
	}

	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	h := msg.Header
	want := map[string]string{
		"From":                      sender,
		"To":                        "ada@example.com",
		"Subject":                   "Your Clearance sign-in code",
		"Mime-Version":              "1.0",
		"Content-Type":              "text/plain; charset=utf-8",
		"Content-Transfer-Encoding": "quoted-printable",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if id := h.Get("Message-Id"); !regexp.MustCompile(`^<[0-9a-f]{32}@clearance\.example>$`).MatchString(id) {
		t.Errorf("Message-ID = %q", id)
	}
	date, err := h.Date()
	if err != nil {
		t.Fatal(err)
	}
	if date.Before(before) || date.After(time.Now()) {
		t.Errorf("Date %v is not the time of sending", date)
	}
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(body), "Your code is 493027.\r\nIt expires in 10 minutes.\r\n"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}

	// One Info record naming the recipient and the file, and not the code.
	recs := logs.records(t)
	if len(recs) != 1 || recs[0]["msg"] != "mail written to mailbox" || recs[0]["level"] != "INFO" ||
		recs[0]["to"] != "ada@example.com" || recs[0]["path"] != path {
		t.Errorf("log = %v", recs)
	}
	if s := logs.String(); strings.Contains(s, "493027") || strings.Contains(s, "sign-in code") {
		t.Errorf("the log holds the subject or the body: %s", s)
	}
}

func TestMailboxRoundTripsNonASCII(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes: the longest subject, all of it encoded
	cases := []mail.Message{
		{To: "ada@example.com", Subject: "Ваш код входа — 493027 ✓", Text: "Здравствуйте, Ада!\nВаш код: 493027 🙂\n"},
		{To: "ada@example.com", Subject: long, Text: "x\n"},
		{To: "ada@example.com", Subject: "=?utf-8?q?not_really?= plain", Text: "=3D is not an escape here\n"},
		{To: "ada@example.com", Subject: strings.Repeat("=?", mail.MaxSubjectBytes/2), Text: "x\n"},
		{To: "ada@example.com", Subject: "Lines", Text: ".leading dot\n..two\ntrailing spaces   \n\ttab\n" +
			strings.Repeat("0123456789", 20) + "\n" + strings.Repeat("ü", 80) + "\nno final newline"},
	}
	for i, m := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			mb, _ := newMailbox(t)
			if err := mb.Send(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			got, err := mail.ReadMailbox(mb.Dir())
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("%d messages", len(got))
			}
			wantText := m.Text
			if !strings.HasSuffix(wantText, "\n") {
				wantText += "\n"
			}
			if got[0].To != m.To || got[0].Subject != m.Subject || got[0].Text != wantText || got[0].From != sender {
				t.Errorf("read back %+v\nwant subject %q text %q", got[0], m.Subject, wantText)
			}
			raw, err := os.ReadFile(got[0].Path)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(raw), "\r\n") {
				if len(line) > 998 {
					t.Errorf("line of %d bytes", len(line))
				}
			}
		})
	}
}

// A subject's encoded words sit one per folded line.
func TestMailboxFoldsEncodedSubject(t *testing.T) {
	mb, _ := newMailbox(t)
	m := codeMail
	m.Subject = strings.Repeat("€", 60)
	if err := mb.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got, err := mail.ReadMailbox(mb.Dir())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(got[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
	folded := 0
	for _, line := range strings.Split(head, "\r\n") {
		if strings.HasPrefix(line, " =?utf-8?q?") {
			folded++
		}
		if len(line) > 78+len("Subject: ") {
			t.Errorf("header line of %d bytes: %q", len(line), line)
		}
	}
	if folded == 0 {
		t.Errorf("the subject is not folded:\n%s", head)
	}
	if got[0].Subject != m.Subject {
		t.Errorf("subject %q", got[0].Subject)
	}
}

func TestMailboxPermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("mode bits do not govern access on Windows")
	}
	mb, _ := newMailbox(t)
	if err := mb.Send(context.Background(), codeMail); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(mb.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("directory mode %#o, want 0700", perm)
	}
	got, err := mail.ReadMailbox(mb.Dir())
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	fi, err = os.Stat(got[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("file mode %#o, want 0600", perm)
	}
}

func TestNewMailboxRefusesAnOpenDirectory(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("mode bits do not govern access on Windows")
	}
	dir := filepath.Join(t.TempDir(), "mailbox")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // past the umask
		t.Fatal(err)
	}
	if _, err := mail.NewMailbox(dir, sender, nil); err == nil || !strings.Contains(err.Error(), "0700") {
		t.Fatalf("NewMailbox on a 0755 directory: %v", err)
	}
}

func TestNewMailboxRefusesBadArguments(t *testing.T) {
	dir := t.TempDir()
	for _, from := range []string{"", "Clearance <no-reply@clearance.example>", "no-reply", "a@b.example, c@d.example"} {
		if _, err := mail.NewMailbox(filepath.Join(dir, "m"), from, nil); err == nil {
			t.Errorf("NewMailbox accepted sender %q", from)
		}
	}
	if _, err := mail.NewMailbox("", sender, nil); err == nil {
		t.Error("NewMailbox accepted an empty directory")
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mail.NewMailbox(file, sender, nil); err == nil {
		t.Error("NewMailbox accepted a file as its directory")
	}
}

func TestMailboxConcurrentSendsWriteDistinctFiles(t *testing.T) {
	mb, logs := newMailbox(t)
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- mb.Send(context.Background(), mail.Message{To: fmt.Sprintf("user%d@example.com", i), Subject: "code", Text: fmt.Sprintf("message %d\n", i)})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := mail.ReadMailbox(mb.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || len(files(t, mb.Dir())) != n {
		t.Fatalf("%d messages read, %d files, want %d of each", len(got), len(files(t, mb.Dir())), n)
	}
	seen := map[string]bool{}
	for _, d := range got {
		if seen[d.Text] {
			t.Errorf("%q read twice", d.Text)
		}
		seen[d.Text] = true
		var i int
		if _, err := fmt.Sscanf(d.Text, "message %d\n", &i); err != nil || d.To != fmt.Sprintf("user%d@example.com", i) {
			t.Errorf("message %+v mixes two sends", d)
		}
	}
	if len(logs.records(t)) != n {
		t.Errorf("%d log records, want %d", len(logs.records(t)), n)
	}
}

func TestReadMailboxOldestFirstAndSkipsOtherFiles(t *testing.T) {
	mb, _ := newMailbox(t)
	for i := range 5 {
		if err := mb.Send(context.Background(), mail.Message{To: "ada@example.com", Subject: "code", Text: fmt.Sprintf("%d\n", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Not messages: a temporary file of a Send in progress, a hidden file,
	// another extension, a directory.
	for _, name := range []string{".incoming-123", ".hidden.eml", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(mb.Dir(), name), []byte("garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(mb.Dir(), "sub.eml"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := mail.ReadMailbox(mb.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, d := range got {
		texts = append(texts, d.Text)
	}
	if strings.Join(texts, "") != "0\n1\n2\n3\n4\n" {
		t.Errorf("read %q, want the order of sending", texts)
	}

	// A broken .eml file is an error, not silently skipped.
	if err := os.WriteFile(filepath.Join(mb.Dir(), "broken.eml"), []byte("not a message"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mail.ReadMailbox(mb.Dir()); err == nil || !strings.Contains(err.Error(), "broken.eml") {
		t.Errorf("ReadMailbox with a broken file: %v", err)
	}
}

// invalidMessages are refused by Validate, and so by every Mailer.
var invalidMessages = map[string]mail.Message{
	"empty":                  {},
	"no recipient":           {Subject: "code", Text: "123456"},
	"two recipients":         {To: "ada@example.com, bob@example.com", Subject: "code", Text: "123456"},
	"two recipients, no sep": {To: "ada@example.com bob@example.com", Subject: "code", Text: "123456"},
	"display name":           {To: "Ada <ada@example.com>", Subject: "code", Text: "123456"},
	"angle brackets":         {To: "<ada@example.com>", Subject: "code", Text: "123456"},
	"comment":                {To: "ada@example.com(Ada)", Subject: "code", Text: "123456"},
	"group":                  {To: "team: ada@example.com;", Subject: "code", Text: "123456"},
	"no domain":              {To: "ada", Subject: "code", Text: "123456"},
	"space around":           {To: " ada@example.com", Subject: "code", Text: "123456"},
	"CRLF in To":             {To: "ada@example.com\r\nBcc: eve@example.com", Subject: "code", Text: "123456"},
	"LF in To":               {To: "ada@example.com\nBcc: eve@example.com", Subject: "code", Text: "123456"},
	"non-ASCII To":           {To: "adä@example.com", Subject: "code", Text: "123456"},
	"long To":                {To: strings.Repeat("a", 64) + "@" + strings.Repeat("b", 190) + ".example", Subject: "code", Text: "123456"},
	"CRLF in Subject":        {To: "ada@example.com", Subject: "code\r\nBcc: eve@example.com", Text: "123456"},
	"LF in Subject":          {To: "ada@example.com", Subject: "code\nBcc: eve@example.com", Text: "123456"},
	"CR in Subject":          {To: "ada@example.com", Subject: "code\rBcc: eve@example.com", Text: "123456"},
	"NUL in Subject":         {To: "ada@example.com", Subject: "code\x00", Text: "123456"},
	"C1 in Subject":          {To: "ada@example.com", Subject: "code\u0085x", Text: "123456"},
	"empty Subject":          {To: "ada@example.com", Text: "123456"},
	"long Subject":           {To: "ada@example.com", Subject: strings.Repeat("s", mail.MaxSubjectBytes+1), Text: "123456"},
	"bad UTF-8 Subject":      {To: "ada@example.com", Subject: "code \xff", Text: "123456"},
	"empty Text":             {To: "ada@example.com", Subject: "code"},
	"long Text":              {To: "ada@example.com", Subject: "code", Text: strings.Repeat("t", mail.MaxTextBytes+1)},
	"bad UTF-8 Text":         {To: "ada@example.com", Subject: "code", Text: "123456 \xc3"},
	"NUL in Text":            {To: "ada@example.com", Subject: "code", Text: "123\x00456"},
	"escape in Text":         {To: "ada@example.com", Subject: "code", Text: "\x1b[31m123456"},
}

func TestValidate(t *testing.T) {
	for name, m := range invalidMessages {
		err := m.Validate()
		if !errors.Is(err, mail.ErrInvalidMessage) {
			t.Errorf("%s: Validate = %v, want ErrInvalidMessage", name, err)
			continue
		}
		if m.Text != "" && strings.Contains(err.Error(), m.Text) || m.Subject != "" && strings.Contains(err.Error(), m.Subject) {
			t.Errorf("%s: the error quotes the subject or body: %v", name, err)
		}
	}
	m := codeMail
	m.To = "Ada <ada@example.com>"
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "display name") {
		t.Errorf("Validate with a display name = %v", err)
	}
	valid := []mail.Message{
		codeMail,
		{To: "a@b", Subject: "x", Text: "y"},
		{To: "first.last+tag@sub.example.co.uk", Subject: "Straße ✓", Text: "line\r\nline\rline\n\ttab"},
		{To: "ada@[192.0.2.1]", Subject: strings.Repeat("s", mail.MaxSubjectBytes), Text: strings.Repeat("t", mail.MaxTextBytes)},
	}
	for _, m := range valid {
		if err := m.Validate(); err != nil {
			t.Errorf("Validate(%q) = %v", m.To, err)
		}
	}
}

func TestMailboxRefusesInvalidMessagesAndWritesNothing(t *testing.T) {
	mb, logs := newMailbox(t)
	for name, m := range invalidMessages {
		if err := mb.Send(context.Background(), m); !errors.Is(err, mail.ErrInvalidMessage) {
			t.Errorf("%s: Send = %v", name, err)
		}
	}
	if names := files(t, mb.Dir()); len(names) != 0 {
		t.Errorf("the mailbox holds %q", names)
	}
	if logs.String() != "" {
		t.Errorf("logged %s", logs)
	}
}

func TestMailboxHonoursACancelledContext(t *testing.T) {
	mb, _ := newMailbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := mb.Send(ctx, codeMail); !errors.Is(err, context.Canceled) {
		t.Errorf("Send = %v, want context.Canceled", err)
	}
	if names := files(t, mb.Dir()); len(names) != 0 {
		t.Errorf("the mailbox holds %q", names)
	}
}

// A Send that cannot rename leaves no temporary file behind.
func TestMailboxLeavesNothingOnFailure(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("directory permissions differ on Windows")
	}
	if os.Geteuid() == 0 {
		t.Skip("root writes to read-only directories")
	}
	mb, _ := newMailbox(t)
	if err := os.Chmod(mb.Dir(), 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(mb.Dir(), 0o700) })
	if err := mb.Send(context.Background(), codeMail); err == nil {
		t.Fatal("Send to a read-only directory succeeded")
	}
	if names := files(t, mb.Dir()); len(names) != 0 {
		t.Errorf("the mailbox holds %q", names)
	}
}

func TestOpen(t *testing.T) {
	data := t.TempDir()
	m, err := mail.Open("", data, sender, nil)
	if err != nil {
		t.Fatal(err)
	}
	mb, ok := m.(*mail.Mailbox)
	if !ok || mb.Dir() != filepath.Join(data, "mailbox") {
		t.Fatalf("Open without a URL = %#v", m)
	}
	if _, err := os.Stat(mb.Dir()); err != nil {
		t.Fatal(err)
	}

	m, err = mail.Open("smtps://mail.example.com:465", "", sender, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := m.(*mail.SMTP); !ok || s.Addr() != "mail.example.com:465" {
		t.Fatalf("Open with a URL = %#v", m)
	}

	if _, err := mail.Open("", "", sender, nil); err == nil {
		t.Error("Open with neither a URL nor a data directory succeeded")
	}
	if _, err := mail.Open("http://mail.example.com:25", data, sender, nil); err == nil {
		t.Error("Open with an http URL succeeded")
	}
}

func TestParseRefusesWhatItCannotRead(t *testing.T) {
	head := "Date: Mon, 02 Jan 2006 15:04:05 +0000\r\nFrom: a@b.example\r\nTo: c@d.example\r\nSubject: s\r\n"
	cases := map[string]string{
		"html":         head + "Content-Type: text/html\r\n\r\n<p>x</p>\r\n",
		"latin-1":      head + "Content-Type: text/plain; charset=iso-8859-1\r\n\r\nx\r\n",
		"base64":       head + "Content-Transfer-Encoding: base64\r\n\r\neA==\r\n",
		"no date":      "From: a@b.example\r\nTo: c@d.example\r\n\r\nx\r\n",
		"no recipient": "Date: Mon, 02 Jan 2006 15:04:05 +0000\r\nFrom: a@b.example\r\n\r\nx\r\n",
		"huge":         head + "\r\n" + strings.Repeat("x", 1<<20),
	}
	for name, raw := range cases {
		if _, err := mail.Parse(strings.NewReader(raw)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	d, err := mail.Parse(strings.NewReader(head + "\r\nplain 7bit\r\n"))
	if err != nil || d.Text != "plain 7bit\n" || d.To != "c@d.example" {
		t.Errorf("Parse of a plain message = %+v, %v", d, err)
	}
}
