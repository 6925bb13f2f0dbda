package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	openapi_types "github.com/oapi-codegen/runtime/types"
)

// UUID and Email are the types of the generated members of those formats,
// named here so that callers need not import their package.
type (
	UUID  = openapi_types.UUID
	Email = openapi_types.Email
)

// Client calls one Clearance server with one credential (an org key, the
// platform key or an automation token). It is safe for concurrent use.
type Client struct {
	base          *url.URL
	key           string
	http          *http.Client
	retries       int
	backoff       time.Duration
	maxRetryAfter time.Duration
	userAgent     string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends the requests with h instead of a client with a 30 s
// timeout.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithRetries sets how many times a request that is safe to repeat is sent
// again after a network error, 429, 502, 503 or 504 (default 2; 0 turns
// retries off). The first wait is backoff (default 200 ms), doubling with
// jitter; a Retry-After longer than 30 s ends the retries.
func WithRetries(n int, backoff time.Duration) Option {
	return func(c *Client) {
		c.retries = max(n, 0)
		if backoff > 0 {
			c.backoff = backoff
		}
	}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// Version is this client's release, sent in its User-Agent.
const Version = "0.1.0"

// New returns a client of the server at baseURL (for example
// "http://127.0.0.1:8080") that authenticates with key. key may be empty
// for the public routes.
func New(baseURL, key string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("client: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http(s)://host[:port]", baseURL)
	}
	c := &Client{
		base: u, key: key,
		http:    &http.Client{Timeout: 30 * time.Second},
		retries: 2, backoff: 200 * time.Millisecond, maxRetryAfter: 30 * time.Second,
		userAgent: "clearance-go/" + Version,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// CallOption adjusts one request.
type CallOption func(*request)

// WithIdempotencyKey sends key as the Idempotency-Key: the same key with the same
// body gets the same answer, another body 409. Routes that honour it get a
// random key per call when none is given, so that they can be retried.
func WithIdempotencyKey(key string) CallOption {
	return func(r *request) { r.header.Set("Idempotency-Key", key) }
}

// WithCorrelationID sends id as X-Correlation-Id; it is recorded in the dossier.
func WithCorrelationID(id string) CallOption {
	return func(r *request) { r.header.Set("X-Correlation-Id", id) }
}

// WithRequestID sends id as X-Request-Id; the server echoes it and names it in
// errors.
func WithRequestID(id string) CallOption {
	return func(r *request) { r.header.Set("X-Request-Id", id) }
}

// ForOrg names the org with the org_id query parameter, which the platform key
// needs on org routes (an org key acts on its own org).
func ForOrg(orgID string) CallOption { return Query("org_id", orgID) }

// Query adds a query parameter.
func Query(name, value string) CallOption {
	return func(r *request) { r.query.Add(name, value) }
}

// setQuery sets a query parameter the method's signature takes, replacing
// any the options added.
func setQuery(name, value string) CallOption {
	return func(r *request) { r.query.Set(name, value) }
}

// Header sets a request header.
func Header(name, value string) CallOption {
	return func(r *request) { r.header.Set(name, value) }
}

// Received stores the answer's status and headers in *into (X-Request-Id,
// Idempotent-Replayed, Retry-After, …).
func Received(into *Response) CallOption {
	return func(r *request) { r.received = into }
}

// Response is what Received records of an answer.
type Response struct {
	Status int
	Header http.Header
}

// request is one call being prepared.
type request struct {
	method, path string
	query        url.Values
	header       http.Header
	body         []byte
	contentType  string
	// keyed: the route honours Idempotency-Key, so a POST with one is safe
	// to send again.
	keyed    bool
	received *Response
	// redirect: a 3xx is the answer (its Location is what the caller
	// wants), not followed.
	redirect bool
}

func (c *Client) newRequest(method, path string, body any, opts []CallOption) (*request, error) {
	r := &request{method: method, path: path, query: url.Values{}, header: http.Header{}}
	switch b := body.(type) {
	case nil:
	case []byte:
		r.body, r.contentType = b, "application/json"
	case url.Values:
		r.body, r.contentType = []byte(b.Encode()), "application/x-www-form-urlencoded"
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("client: encode %s %s: %w", method, path, err)
		}
		r.body, r.contentType = raw, "application/json"
	}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// keyed marks a POST route that honours Idempotency-Key; it always sends
// one.
func (r *request) withKey() *request {
	r.keyed = true
	if r.header.Get("Idempotency-Key") == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		r.header.Set("Idempotency-Key", "clearance-go-"+hex.EncodeToString(b[:]))
	}
	return r
}

// retryable reports whether sending r again cannot act twice.
//
// GETs are; so are POSTs the server answers once per Idempotency-Key. A PUT
// or DELETE is not, although HTTP calls them idempotent: some of ours append
// (a consent's history, a draft's revision), and a DELETE whose first answer
// was lost would come back as a 404 for a deletion that happened.
func (r *request) retryable() bool {
	switch r.method {
	case http.MethodGet, http.MethodHead:
		return true
	}
	return r.keyed && r.header.Get("Idempotency-Key") != ""
}

// send performs r, retrying what is safe to retry, and returns the answer's
// body for a 2xx status; any other status is a *Error.
func (c *Client) send(ctx context.Context, r *request) ([]byte, error) {
	resp, err := c.open(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readAll(resp, r)
}

// readAll reads the answer of r.
func readAll(resp *http.Response, r *request) ([]byte, error) {
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: read answer: %w", r.method, r.path, err)
	}
	return body, nil
}

// open performs r and returns the 2xx answer with its body unread.
func (c *Client) open(ctx context.Context, r *request) (*http.Response, error) {
	attempts := 1
	if r.retryable() {
		attempts += c.retries
	}
	wait := c.backoff
	for attempt := 1; ; attempt++ {
		resp, err := c.do(ctx, r)
		var retryAfter time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		case resp.StatusCode >= 200 && resp.StatusCode < 300,
			r.redirect && resp.StatusCode >= 300 && resp.StatusCode < 400:
			return resp, nil
		default:
			e := readError(resp, r)
			resp.Body.Close()
			if !transient(e.Status) {
				return nil, e
			}
			err, retryAfter = e, e.RetryAfter
		}
		if attempt >= attempts || retryAfter > c.maxRetryAfter {
			return nil, err
		}
		pause := max(retryAfter, wait/2+mrand.N(wait/2+1))
		wait *= 2
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func transient(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func (c *Client) do(ctx context.Context, r *request) (*http.Response, error) {
	// Path parameters are escaped by the methods (escape), so the path is
	// joined as text.
	u, err := url.Parse(c.base.String() + r.path)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	if q := r.query.Encode(); q != "" {
		u.RawQuery = q
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json, application/problem+json")
	}
	req.Header.Set("User-Agent", c.userAgent)
	h := c.http
	if r.redirect {
		stay := *h
		stay.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		h = &stay
	}
	resp, err := h.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
	}
	if r.received != nil {
		*r.received = Response{Status: resp.StatusCode, Header: resp.Header.Clone()}
	}
	return resp, nil
}

// call sends r and decodes a 2xx JSON answer into a new T.
func call[T any](ctx context.Context, c *Client, r *request, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	body, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if len(bytes.TrimSpace(body)) == 0 {
		return out, nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return nil, fmt.Errorf("client: %s %s: decode answer: %w", r.method, r.path, err)
	}
	return out, nil
}

// raw sends r and returns a 2xx answer's body as is.
func raw(ctx context.Context, c *Client, r *request, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return c.send(ctx, r)
}

// Error is an answer outside 2xx: an RFC 9457 problem (or, for a refused
// claim, the FailedClaim body) with its stable code.
type Error struct {
	Status    int
	Code      string
	Title     string
	Detail    string
	Type      string
	RequestID string
	// Errors names the fields at fault, for 400s that list them.
	Errors []FieldError
	// ShouldExecute is false on every error; it is here so that code reading a
	// claim's refusal finds the member it expects.
	ShouldExecute bool
	// RetryAfter is the Retry-After of a 429 or 503, zero without one.
	RetryAfter time.Duration
	// Body is the answer's body as received.
	Body []byte
	// Method and Path name the request.
	Method, Path string
}

func (e *Error) Error() string {
	msg := e.Detail
	if msg == "" {
		msg = e.Title
	}
	if e.Code == "" {
		return fmt.Sprintf("clearance: %s %s: %d %s", e.Method, e.Path, e.Status, msg)
	}
	return fmt.Sprintf("clearance: %s %s: %d %s: %s", e.Method, e.Path, e.Status, e.Code, msg)
}

// IsCode reports whether err is, or wraps, a *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// readError makes the *Error of a non-2xx answer. A body that is not a
// problem still gives the status.
func readError(resp *http.Response, r *request) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &Error{Status: resp.StatusCode, Body: body, Method: r.method, Path: r.path,
		RequestID: resp.Header.Get("X-Request-Id"), Title: http.StatusText(resp.StatusCode)}
	var p struct {
		Type      string       `json:"type"`
		Title     string       `json:"title"`
		Detail    string       `json:"detail"`
		Code      string       `json:"code"`
		RequestID string       `json:"request_id"`
		Errors    []FieldError `json:"errors"`
		// OAuth 2.0 token errors (RFC 6749 §5.2).
		OAuthError       string `json:"error"`
		OAuthDescription string `json:"error_description"`
	}
	if json.Unmarshal(body, &p) == nil {
		e.Type, e.Code, e.Errors = p.Type, p.Code, p.Errors
		if p.Title != "" {
			e.Title = p.Title
		}
		e.Detail = p.Detail
		if p.RequestID != "" {
			e.RequestID = p.RequestID
		}
		if e.Code == "" && p.OAuthError != "" {
			e.Code, e.Detail = p.OAuthError, p.OAuthDescription
		}
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		} else if t, err := http.ParseTime(s); err == nil {
			e.RetryAfter = max(time.Until(t), 0)
		}
	}
	return e
}

// escape escapes one path segment.
func escape(s string) string { return url.PathEscape(s) }
