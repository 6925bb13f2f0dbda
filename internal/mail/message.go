package mail

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	netmail "net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of a Message, checked by Validate.
const (
	MaxAddressBytes = 254      // RFC 5321's path limit, less the angle brackets
	MaxSubjectBytes = 200      // encoded, still well under RFC 5322's 998-byte line
	MaxTextBytes    = 64 << 10 // a code mail is a few hundred bytes
	maxParsedBytes  = 1 << 20  // what Parse reads of a message at most
	dateLayout      = time.RFC1123Z
)

// ErrInvalidMessage is wrapped by every error of Validate, and so of Send
// for a message it refuses.
var ErrInvalidMessage = errors.New("mail: invalid message")

// Message is one e-mail to one recipient.
type Message struct {
	// To is one bare addr-spec, e.g. ada@example.com: no display name, no
	// angle brackets, ASCII only (an internationalised domain is given in
	// its xn-- form), at most MaxAddressBytes.
	To string
	// Subject is 1 to MaxSubjectBytes bytes of UTF-8 without control
	// characters (so no CR or LF: no header can be injected through it).
	// It is Q-encoded (RFC 2047) unless it is ASCII without "=?".
	Subject string
	// Text is the plain-text body: 1 to MaxTextBytes bytes of UTF-8, no
	// control characters but tab, CR and LF. Line endings may be LF, CRLF
	// or CR; the message carries CRLF, and a final line break is added when
	// Text has none.
	Text string
}

// Validate reports whether m can be sent. Its errors wrap ErrInvalidMessage
// and name the field, never quoting Subject or Text.
func (m Message) Validate() error {
	if err := checkAddress(m.To); err != nil {
		return fmt.Errorf("%w: To: %v", ErrInvalidMessage, err)
	}
	switch {
	case m.Subject == "":
		return fmt.Errorf("%w: Subject is empty", ErrInvalidMessage)
	case len(m.Subject) > MaxSubjectBytes:
		return fmt.Errorf("%w: Subject is longer than %d bytes", ErrInvalidMessage, MaxSubjectBytes)
	case !utf8.ValidString(m.Subject):
		return fmt.Errorf("%w: Subject is not valid UTF-8", ErrInvalidMessage)
	case strings.IndexFunc(m.Subject, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: Subject holds a control character (CR, LF or another)", ErrInvalidMessage)
	}
	switch {
	case m.Text == "":
		return fmt.Errorf("%w: Text is empty", ErrInvalidMessage)
	case len(m.Text) > MaxTextBytes:
		return fmt.Errorf("%w: Text is longer than %d bytes", ErrInvalidMessage, MaxTextBytes)
	case !utf8.ValidString(m.Text):
		return fmt.Errorf("%w: Text is not valid UTF-8", ErrInvalidMessage)
	case strings.IndexFunc(m.Text, func(r rune) bool {
		return unicode.IsControl(r) && r != '\t' && r != '\r' && r != '\n'
	}) >= 0:
		return fmt.Errorf("%w: Text holds a control character other than tab, CR or LF", ErrInvalidMessage)
	}
	return nil
}

// checkAddress accepts exactly one bare addr-spec. net/mail parses it; the
// address it finds must be the whole input, so a display name, angle
// brackets, a comment, a second address or surrounding space are refused
// rather than silently dropped.
func checkAddress(s string) error {
	if s == "" {
		return errors.New("empty address")
	}
	if len(s) > MaxAddressBytes {
		return fmt.Errorf("address longer than %d bytes", MaxAddressBytes)
	}
	for i := 0; i < len(s); i++ {
		// CR, LF and every other control are out, and so is UTF-8, which
		// would need SMTPUTF8 of every relay on the way.
		if s[i] < ' ' || s[i] >= 0x7f {
			return errors.New("address must be printable ASCII")
		}
	}
	a, err := netmail.ParseAddress(s)
	if err != nil {
		return errors.New("not one valid address")
	}
	if a.Name != "" {
		return errors.New("display name not allowed")
	}
	if a.Address != s {
		return errors.New("must be a bare addr-spec such as ada@example.com")
	}
	return nil
}

// domainOf returns the part after the last @ of an address checkAddress
// accepted.
func domainOf(addr string) string { return addr[strings.LastIndexByte(addr, '@')+1:] }

// render is the one place a Message becomes RFC 5322 bytes, for the
// Mailbox and SMTP alike. m must be valid and from checked.
func render(m Message, from string, now time.Time) []byte {
	var id [16]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)

	var b bytes.Buffer
	header := func(name, value string) {
		b.WriteString(name)
		b.WriteString(": ")
		b.WriteString(value)
		b.WriteString("\r\n")
	}
	header("Date", now.Format(dateLayout))
	header("From", from)
	header("To", m.To)
	header("Subject", encodeSubject(m.Subject))
	header("Message-ID", "<"+hex.EncodeToString(id[:])+"@"+domainOf(from)+">")
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")

	text := strings.ReplaceAll(m.Text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	if !strings.HasSuffix(text, "\n") {
		text += "\n" // the last line of a message ends in CRLF like the others
	}
	// Text mode turns each LF into CRLF and keeps lines at most 76
	// characters; the result is ASCII, so no relay has to convert it.
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(text)) // a bytes.Buffer does not fail
	_ = qp.Close()
	return b.Bytes()
}

// encodeSubject leaves an ASCII subject as it is and Q-encodes any other
// (RFC 2047), one encoded word per folded line so no line gets long.
// mime.QEncoding leaves ASCII alone, even text shaped like an encoded word
// that readers would decode; such a subject is encoded here instead.
func encodeSubject(s string) string {
	enc := mime.QEncoding.Encode("utf-8", s)
	if enc == s && strings.Contains(s, "=?") {
		enc = qEncodeASCII(s)
	}
	return strings.ReplaceAll(enc, "?= =?", "?=\r\n =?")
}

// qEncodeASCII Q-encodes printable ASCII (RFC 2047 §4.2, §5(3)) in words
// of at most 75 characters, separated by spaces as mime's encoder does.
func qEncodeASCII(s string) string {
	const open, end, maxWord = "=?utf-8?q?", "?=", 75
	var b, word strings.Builder
	flush := func() {
		if word.Len() == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(open + word.String() + end)
		word.Reset()
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		var piece string
		switch {
		case c == ' ':
			piece = "_"
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("!*+-/", c) >= 0:
			piece = string(c)
		default:
			piece = fmt.Sprintf("=%02X", c)
		}
		if len(open)+word.Len()+len(piece)+len(end) > maxWord {
			flush()
		}
		word.WriteString(piece)
	}
	flush()
	return b.String()
}

// Delivered is a message read back by Parse or ReadMailbox.
type Delivered struct {
	Path      string // the .eml file (ReadMailbox); empty from Parse
	MessageID string // with its angle brackets
	Date      time.Time
	From      string
	To        string
	Subject   string // decoded
	Text      string // decoded, with LF line endings
}

// Parse reads one message as render writes it: headers through net/mail, the
// Subject decoded (RFC 2047), the body decoded from quoted-printable (or
// taken as it is for 7bit and 8bit) and its line endings made LF. It reads
// at most 1 MiB and accepts only a text/plain body in UTF-8 or US-ASCII.
func Parse(r io.Reader) (Delivered, error) {
	msg, err := netmail.ReadMessage(&capped{r: r, left: maxParsedBytes})
	if err != nil {
		return Delivered{}, fmt.Errorf("mail: parse: %w", err)
	}
	h := msg.Header
	var d Delivered
	if d.Date, err = h.Date(); err != nil {
		return Delivered{}, fmt.Errorf("mail: parse Date: %w", err)
	}
	if d.From, err = headerAddress(h, "From"); err != nil {
		return Delivered{}, err
	}
	if d.To, err = headerAddress(h, "To"); err != nil {
		return Delivered{}, err
	}
	if d.Subject, err = new(mime.WordDecoder).DecodeHeader(h.Get("Subject")); err != nil {
		return Delivered{}, fmt.Errorf("mail: parse Subject: %w", err)
	}
	d.MessageID = h.Get("Message-ID")

	if ct := h.Get("Content-Type"); ct != "" {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil {
			return Delivered{}, fmt.Errorf("mail: parse Content-Type: %w", err)
		}
		cs := strings.ToLower(params["charset"])
		if mt != "text/plain" || (cs != "" && cs != "utf-8" && cs != "us-ascii") {
			return Delivered{}, fmt.Errorf("mail: parse: unsupported Content-Type %q", ct)
		}
	}
	body := msg.Body
	switch cte := strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding"))); cte {
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	case "", "7bit", "8bit":
	default:
		return Delivered{}, fmt.Errorf("mail: parse: unsupported Content-Transfer-Encoding %q", cte)
	}
	text, err := io.ReadAll(body)
	if err != nil {
		return Delivered{}, fmt.Errorf("mail: parse body: %w", err)
	}
	d.Text = strings.ReplaceAll(string(text), "\r\n", "\n")
	return d, nil
}

// capped reads r and fails, rather than truncating, past left bytes.
type capped struct {
	r    io.Reader
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, fmt.Errorf("message larger than %d bytes", maxParsedBytes)
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return 0, fmt.Errorf("message larger than %d bytes", maxParsedBytes)
	}
	return n, err
}

func headerAddress(h netmail.Header, name string) (string, error) {
	a, err := netmail.ParseAddress(h.Get(name))
	if err != nil {
		return "", fmt.Errorf("mail: parse %s: %w", name, err)
	}
	return a.Address, nil
}
