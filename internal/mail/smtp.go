package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// DefaultTimeout bounds a Send whose context has no deadline.
const DefaultTimeout = 30 * time.Second

// helloName is what the client says in EHLO; go-smtp's own default.
const helloName = "localhost"

// SMTP is the Mailer that sends through an SMTP server (see the package
// documentation for the URL forms and the TLS rules). Each Send is one
// connection. It is safe for concurrent use once TLSConfig is set.
type SMTP struct {
	// TLSConfig, when set before the first Send, is used for STARTTLS and
	// for smtps (a copy, with ServerName set to the URL's host when empty):
	// for example to trust a private CA. Nil means the system roots.
	TLSConfig *tls.Config

	addr     string // host:port
	host     string
	implicit bool // smtps
	user     string
	pass     string
	auth     bool
	from     string
	logger   *slog.Logger
}

// NewSMTP parses rawURL, smtp://[user:pass@]host:port or
// smtps://[user:pass@]host:port, and returns an SMTP sending as from (a bare
// address, checked like Message.To). A nil logger logs nothing. Nothing is
// dialled here. Errors never quote the password.
func NewSMTP(rawURL string, from string, logger *slog.Logger) (*SMTP, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error quotes the whole URL, password included: keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("mail: invalid SMTP URL: %v", err)
	}
	s := &SMTP{from: from, logger: orDiscard(logger)}
	switch u.Scheme {
	case "smtp":
	case "smtps":
		s.implicit = true
	default:
		return nil, fmt.Errorf("mail: invalid SMTP URL %s: scheme must be smtp or smtps", u.Redacted())
	}
	switch {
	case u.Opaque != "":
		return nil, fmt.Errorf("mail: invalid SMTP URL %s: want %s://host:port", u.Redacted(), u.Scheme)
	case u.Path != "" && u.Path != "/":
		return nil, fmt.Errorf("mail: invalid SMTP URL %s: a path is not understood", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery:
		return nil, fmt.Errorf("mail: invalid SMTP URL %s: a query is not understood", u.Redacted())
	case u.Fragment != "":
		return nil, fmt.Errorf("mail: invalid SMTP URL %s: a fragment is not understood", u.Redacted())
	}
	s.host = u.Hostname()
	if s.host == "" {
		return nil, fmt.Errorf("mail: invalid SMTP URL %s: no host", u.Redacted())
	}
	port := u.Port()
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("mail: invalid SMTP URL %s: want an explicit port 1-65535 (587 for smtp, 465 for smtps)", u.Redacted())
	}
	s.addr = net.JoinHostPort(s.host, port)
	if u.User != nil {
		pass, ok := u.User.Password()
		if u.User.Username() == "" || !ok || pass == "" {
			return nil, fmt.Errorf("mail: invalid SMTP URL %s: credentials need a user name and a password", u.Redacted())
		}
		s.user, s.pass, s.auth = u.User.Username(), pass, true
	}
	if err := checkAddress(from); err != nil {
		return nil, fmt.Errorf("mail: sender address: %v", err)
	}
	return s, nil
}

// Addr returns the server's host:port.
func (s *SMTP) Addr() string { return s.addr }

// Send validates m and sends it in one SMTP transaction. It returns nil
// once the server accepted the message (250 after DATA). It logs the
// recipient, the server and how the connection was protected at Info,
// never the subject or the body.
func (s *SMTP) Send(ctx context.Context, m Message) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mail: smtp %s: %w", s.addr, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	data := render(m, s.from, time.Now())
	security, err := s.send(ctx, m.To, data)
	if err != nil {
		// A connection closed by the context fails with a network error;
		// say why it was closed.
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = fmt.Errorf("%w: %w", ctxErr, err)
		}
		return fmt.Errorf("mail: smtp %s: %w", s.addr, err)
	}
	s.logger.LogAttrs(ctx, slog.LevelInfo, "mail sent", slog.String("to", m.To),
		slog.String("server", s.addr), slog.String("tls", security))
	return nil
}

// send picks the connection the URL and the server allow and runs the
// transaction on it. It returns how the connection was protected.
func (s *SMTP) send(ctx context.Context, to string, data []byte) (string, error) {
	if s.implicit {
		return "implicit", s.withClient(ctx, clientImplicitTLS, func(c *smtp.Client) error {
			return s.transact(c, to, data)
		})
	}
	if s.auth {
		// Credentials: STARTTLS or nothing.
		err := s.withClient(ctx, clientStartTLS, func(c *smtp.Client) error {
			return s.transact(c, to, data)
		})
		if errors.Is(err, errSTARTTLS) {
			err = fmt.Errorf("credentials are sent only over TLS: %w", err)
		}
		return "starttls", err
	}
	// No credentials: STARTTLS when offered. go-smtp cannot upgrade a
	// client it did not create for STARTTLS (on purpose: opportunistic TLS
	// is easy to strip), so ask on one connection and, when it is offered,
	// send on a second one that must upgrade.
	offered := false
	err := s.withClient(ctx, clientPlain, func(c *smtp.Client) error {
		if offered, _ = c.Extension("STARTTLS"); offered {
			_ = c.Quit()
			return nil
		}
		return s.transact(c, to, data)
	})
	if err != nil || !offered {
		return "none", err
	}
	return "starttls", s.withClient(ctx, clientStartTLS, func(c *smtp.Client) error {
		return s.transact(c, to, data)
	})
}

// errSTARTTLS marks a server that would not start TLS.
var errSTARTTLS = errors.New("STARTTLS")

type clientKind int

const (
	clientPlain clientKind = iota
	clientStartTLS
	clientImplicitTLS
)

// withClient dials s.addr, makes a client of the kind asked and runs f on
// it. The context closes the connection when it ends, whatever the client
// is doing: go-smtp sets its own deadlines on every command.
func (s *SMTP) withClient(ctx context.Context, kind clientKind, f func(*smtp.Client) error) error {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return err
	}
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	defer stop()

	var c *smtp.Client
	switch kind {
	case clientPlain:
		c = smtp.NewClient(raw)
	case clientStartTLS:
		// Says EHLO, requires STARTTLS among the extensions, then upgrades.
		c, err = smtp.NewClientStartTLS(raw, s.tlsConfig())
		if err != nil {
			return fmt.Errorf("%w: %w", errSTARTTLS, err)
		}
	case clientImplicitTLS:
		tc := tls.Client(raw, s.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			return err
		}
		c = smtp.NewClient(tc)
	}
	defer c.Close()
	// EHLO now, so its errors (a failed STARTTLS handshake, an untrusted
	// certificate) are returned rather than swallowed by Extension.
	if err := c.Hello(helloName); err != nil {
		return err
	}
	return f(c)
}

func (s *SMTP) tlsConfig() *tls.Config {
	var cfg *tls.Config
	if s.TLSConfig != nil {
		cfg = s.TLSConfig.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = s.host
	}
	return cfg
}

// transact authenticates when the URL has credentials (only over TLS), then
// runs MAIL, RCPT and DATA. QUIT is a courtesy: once DATA is accepted the
// message is the server's.
func (s *SMTP) transact(c *smtp.Client, to string, data []byte) error {
	if s.auth {
		// withClient said EHLO, so a TLS handshake is complete by now; this
		// check is the last guard against a password in clear.
		if st, ok := c.TLSConnectionState(); !ok || !st.HandshakeComplete {
			return errors.New("refusing to authenticate without TLS")
		}
		if !c.SupportsAuth(sasl.Plain) {
			return errors.New("server offers no AUTH PLAIN")
		}
		if err := c.Auth(sasl.NewPlainClient("", s.user, s.pass)); err != nil {
			return fmt.Errorf("AUTH PLAIN: %w", err)
		}
	}
	if err := c.Mail(s.from, nil); err != nil {
		return fmt.Errorf("MAIL FROM: %w", err)
	}
	if err := c.Rcpt(to, nil); err != nil {
		return fmt.Errorf("RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	_ = c.Quit()
	return nil
}
