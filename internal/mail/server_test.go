package mail_test

// A real SMTP server in process (go-smtp) that records what clients do.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

type serverOpts struct {
	startTLS     *tls.Config // offer STARTTLS with this certificate
	implicitTLS  *tls.Config // smtps: TLS from the first byte
	user, pass   string      // offer AUTH PLAIN and accept these
	insecureAuth bool        // offer AUTH without TLS too
	rejectRcpt   bool
	dataEntered  chan<- struct{} // told when a DATA body starts
	dataGate     <-chan struct{} // DATA waits for it to close
}

type authAttempt struct {
	user, pass string
	tls        bool
}

type delivery struct {
	from  string
	rcpts []string
	data  []byte
	tls   bool
}

type record struct {
	sessions     int // EHLOs that opened a session
	mailCommands int
	mailsInClear int // MAIL FROM outside TLS
	auths        []authAttempt
	deliveries   []delivery
}

type testServer struct {
	addr string
	opts serverOpts

	mu  sync.Mutex
	rec record

	stopOnce sync.Once
	listener net.Listener
	srv      *smtp.Server
	served   chan struct{} // closed when Serve returns
}

func startServer(t *testing.T, opts serverOpts) *testServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{addr: l.Addr().String(), opts: opts, served: make(chan struct{})}
	if opts.implicitTLS != nil {
		l = tls.NewListener(l, opts.implicitTLS)
	}
	ts.listener = l
	ts.srv = smtp.NewServer(smtp.BackendFunc(ts.newSession))
	ts.srv.Domain = "localhost"
	ts.srv.TLSConfig = opts.startTLS
	ts.srv.AllowInsecureAuth = opts.insecureAuth
	ts.srv.ErrorLog = log.New(io.Discard, "", 0)
	go func() {
		defer close(ts.served)
		_ = ts.srv.Serve(l)
	}()
	t.Cleanup(ts.stop)
	return ts
}

// stop closes the listener and waits until every connection has ended, so
// what the server saw is final.
func (ts *testServer) stop() {
	ts.stopOnce.Do(func() {
		// Close the listener here: Shutdown only closes those Serve has
		// registered, and Serve may not have started yet.
		_ = ts.listener.Close()
		<-ts.served
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := ts.srv.Shutdown(ctx); err != nil {
			_ = ts.srv.Close()
		}
	})
}

func (ts *testServer) record() record {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	r := ts.rec
	r.auths = append([]authAttempt(nil), r.auths...)
	r.deliveries = append([]delivery(nil), r.deliveries...)
	return r
}

func (ts *testServer) newSession(c *smtp.Conn) (smtp.Session, error) {
	ts.mu.Lock()
	ts.rec.sessions++
	ts.mu.Unlock()
	return &session{ts: ts, conn: c}, nil
}

type session struct {
	ts    *testServer
	conn  *smtp.Conn
	from  string
	rcpts []string
}

func (s *session) isTLS() bool {
	st, ok := s.conn.TLSConnectionState()
	return ok && st.HandshakeComplete
}

func (s *session) AuthMechanisms() []string {
	if s.ts.opts.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(identity, user, pass string) error {
		s.ts.mu.Lock()
		s.ts.rec.auths = append(s.ts.rec.auths, authAttempt{user: user, pass: pass, tls: s.isTLS()})
		s.ts.mu.Unlock()
		if user != s.ts.opts.user || pass != s.ts.opts.pass {
			return smtp.ErrAuthFailed
		}
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.ts.mu.Lock()
	s.ts.rec.mailCommands++
	if !s.isTLS() {
		s.ts.rec.mailsInClear++
	}
	s.ts.mu.Unlock()
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.ts.opts.rejectRcpt {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user here"}
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	if s.ts.opts.dataEntered != nil {
		s.ts.opts.dataEntered <- struct{}{}
	}
	if s.ts.opts.dataGate != nil {
		<-s.ts.opts.dataGate
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.ts.mu.Lock()
	s.ts.rec.deliveries = append(s.ts.rec.deliveries, delivery{from: s.from, rcpts: s.rcpts, data: b, tls: s.isTLS()})
	s.ts.mu.Unlock()
	return nil
}

func (s *session) Reset()        { s.from, s.rcpts = "", nil }
func (s *session) Logout() error { return nil }

// selfSigned returns a server configuration with a fresh self-signed
// certificate for 127.0.0.1 and localhost, and a client configuration that
// trusts it (and nothing else).
func selfSigned(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "localhost"},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}}
	client = &tls.Config{RootCAs: pool}
	return server, client
}

// silentListener accepts connections and never says a word.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}
