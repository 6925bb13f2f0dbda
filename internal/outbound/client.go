package outbound

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// Defaults of Options.
const (
	DefaultTimeout          = 10 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultUserAgent        = "clearance"
)

// Step timeouts, each capped by Options.Timeout.
const (
	dialTimeout         = 5 * time.Second
	tlsHandshakeTimeout = 5 * time.Second
	idleConnTimeout     = 90 * time.Second
	maxHeaderBytes      = 64 << 10
)

// Options configure a Client. The zero value is the production setting:
// TLS only, blocked ranges refused, the defaults above.
type Options struct {
	// AllowPrivate turns the SSRF guard off: plain http is accepted and no
	// address is blocked, neither at registration nor at dial time. It is
	// for development and tests on one machine (--allow-private-destinations)
	// and should be logged loudly when set.
	AllowPrivate bool

	// Timeout bounds one whole exchange, from dialing to the last byte of
	// the body; 0 or less means DefaultTimeout. Dialing and the TLS
	// handshake are also bounded by 5 s each and waiting for the response
	// headers by Timeout.
	Timeout time.Duration

	// MaxResponseBytes is the largest response body read; a larger one is
	// ErrResponseTooLarge. 0 or less means DefaultMaxResponseBytes.
	MaxResponseBytes int64

	// UserAgent is sent when a request has none; "" means DefaultUserAgent.
	UserAgent string

	// RootCAs, when not nil, replaces the system's roots for verifying
	// servers' certificates (a private CA, or httptest.Server's in tests).
	RootCAs *x509.CertPool
}

// EnsureDefaults returns o with every zero or negative field given its
// default.
func (o Options) EnsureDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	return o
}

// Client makes outbound HTTP requests under the package's rules. It is safe
// for concurrent use; make one per process and share it.
type Client struct {
	allowPrivate bool
	maxBody      int64
	userAgent    string
	hc           *http.Client

	// hosts, set only by tests (export_test.go), replaces a host name before
	// dialing: the stand-in for a DNS answer.
	hosts map[string]string
}

// Response is an answer read in full.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte // at most Options.MaxResponseBytes
}

// New returns a Client for o (defaults applied).
func New(o Options) *Client {
	o = o.EnsureDefaults()
	c := &Client{allowPrivate: o.AllowPrivate, maxBody: o.MaxResponseBytes, userAgent: o.UserAgent}
	dialer := &net.Dialer{
		Timeout:        min(dialTimeout, o.Timeout),
		KeepAlive:      30 * time.Second,
		ControlContext: c.control,
	}
	tr := &http.Transport{
		Proxy: nil, // never the environment's proxy: it would dial for us, past control
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if c.hosts != nil {
				if host, port, err := net.SplitHostPort(addr); err == nil {
					if to, ok := c.hosts[host]; ok {
						addr = net.JoinHostPort(to, port)
					}
				}
			}
			return dialer.DialContext(ctx, network, addr)
		},
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: o.RootCAs},
		TLSHandshakeTimeout:    min(tlsHandshakeTimeout, o.Timeout),
		ResponseHeaderTimeout:  o.Timeout,
		ExpectContinueTimeout:  time.Second,
		IdleConnTimeout:        idleConnTimeout,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    8,
		MaxResponseHeaderBytes: maxHeaderBytes,
		ForceAttemptHTTP2:      true,
	}
	c.hc = &http.Client{
		Transport: tr,
		Timeout:   o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // Do turns the 3xx into ErrRedirect
		},
	}
	return c
}

// AllowPrivate reports whether the SSRF guard is off (Options.AllowPrivate).
func (c *Client) AllowPrivate() bool { return c.allowPrivate }

// HTTPClient returns an *http.Client for a protocol library that drives
// net/http itself (git's smart HTTP): the same transport as Do — no proxy,
// the dial guard judging every resolved address, the step timeouts — and
// no redirects (a 3xx is handed back as the response, for the library to
// refuse). Timeout is Options.Timeout; the caller may change it on the
// copy it gets. Unlike Do it neither re-checks URLs (call CheckURL first)
// nor caps response bodies: the caller bounds what it reads.
func (c *Client) HTTPClient() *http.Client {
	return &http.Client{Transport: c.hc.Transport, Timeout: c.hc.Timeout, CheckRedirect: c.hc.CheckRedirect}
}

// CloseIdleConnections closes the connections kept for reuse.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// control is the dial guard: it runs after name resolution, on the address
// about to be connected, for every address tried.
func (c *Client) control(_ context.Context, network, address string, _ syscall.RawConn) error {
	if c.allowPrivate {
		return nil
	}
	if network != "tcp4" && network != "tcp6" {
		return fmt.Errorf("%w: network %s", ErrBlockedDestination, network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable address %q", ErrBlockedDestination, address)
	}
	if Blocked(ap.Addr()) {
		return fmt.Errorf("%w: resolved address %s", ErrBlockedDestination, ap.Addr())
	}
	return nil
}

// Do sends req and reads the answer in full. req.URL must pass CheckURL
// (it is checked again here: a URL registered under older rules is not
// trusted). A User-Agent is added when req has none; req itself is not
// modified.
//
// Every answer that arrives is returned, whatever its status, except a
// 3xx (ErrRedirect, not followed) and a body larger than
// Options.MaxResponseBytes (ErrResponseTooLarge). Failing to get an answer
// is ErrUnreachable wrapped with its cause, or ErrBlockedDestination when
// the dial guard refused every address the host resolved to.
func (c *Client) Do(req *http.Request) (*Response, error) {
	if req == nil || req.URL == nil {
		return nil, fmt.Errorf("%w: no request URL", ErrInvalidURL)
	}
	u, err := c.CheckURL(req.URL.String())
	if err != nil {
		return nil, err
	}
	op := req.Method
	if op == "" {
		op = http.MethodGet
	}
	op += " " + origin(u)
	if req.Header.Get("User-Agent") == "" {
		req = req.Clone(req.Context())
		req.Header.Set("User-Agent", c.userAgent)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		cause := unwrapURLError(err)
		if errors.Is(cause, ErrBlockedDestination) {
			return nil, fmt.Errorf("%s: %w", op, cause)
		}
		return nil, fmt.Errorf("%s: %w: %w", op, ErrUnreachable, cause)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		loc := resp.Header.Get("Location")
		if len(loc) > 200 {
			loc = loc[:200] + "…"
		}
		return nil, fmt.Errorf("%s: %w: status %d, Location %q", op, ErrRedirect, resp.StatusCode, loc)
	}
	if resp.ContentLength > c.maxBody {
		return nil, fmt.Errorf("%s: %w: Content-Length %d exceeds %d bytes", op, ErrResponseTooLarge, resp.ContentLength, c.maxBody)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading the body: %w: %w", op, ErrUnreachable, unwrapURLError(err))
	}
	if int64(len(body)) > c.maxBody {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", op, ErrResponseTooLarge, c.maxBody)
	}
	return &Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// origin is u's scheme, host and port: what errors may name of a URL
// (its path or query may hold a secret).
func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }
