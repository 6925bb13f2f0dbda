package approval

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/outbound"
	"github.com/clearancehq/clearance/internal/strictjson"
)

// Service is the approval service as Clearance uses it. Every method asks
// the service itself; none trusts what a client presents.
type Service interface {
	// Open opens (or, for the same escalation and body, finds again) the
	// approval request of one escalation.
	Open(ctx context.Context, ep Endpoint, r OpenRequest) (Request, error)
	// Get returns a request as the service holds it now.
	Get(ctx context.Context, ep Endpoint, requestID string) (Request, error)
	// Cancel cancels a PENDING request; a decided one is returned as it
	// stands.
	Cancel(ctx context.Context, ep Endpoint, requestID string) (Request, error)
	// PublicKey returns the service's receipt-signing key kid, or an error
	// wrapping grant.ErrUnknownKey when the service does not publish it.
	PublicKey(ctx context.Context, ep Endpoint, kid string) (ed25519.PublicKey, error)
}

// Paths of the protocol, below an Endpoint's BaseURL.
const (
	PathRequests = "/v1/approval-requests"
	PathJWKS     = "/.well-known/jwks.json"
)

// Defaults of HTTPOptions.
const (
	DefaultKeyTTL             = 5 * time.Minute
	DefaultKeyRefetchInterval = 10 * time.Second
)

// HTTPOptions tune an HTTP service client. The zero value is good.
type HTTPOptions struct {
	// KeyTTL is how long a fetched key set is used before it is fetched
	// again; 0 or less means DefaultKeyTTL.
	KeyTTL time.Duration
	// KeyRefetchInterval is the least time between a key set's fetch and
	// a fetch for a kid it did not hold; 0 or less means
	// DefaultKeyRefetchInterval. An unknown kid inside the interval is
	// ErrUnavailable (try again later), not ErrEvidenceInvalid: it bounds
	// the fetches that made-up kids can cause.
	KeyRefetchInterval time.Duration
	// Now is the clock of the key cache; nil means time.Now.
	Now func() time.Time
}

// HTTP is the Service of the approval-service protocol over the outbound
// client. It is safe for concurrent use; one per process shares the key
// cache.
type HTTP struct {
	client *outbound.Client
	ttl    time.Duration
	every  time.Duration
	now    func() time.Time

	mu   sync.Mutex
	sets map[string]*keySet // by base URL
}

var _ Service = (*HTTP)(nil)

// NewHTTP returns the Service that speaks the protocol through c.
func NewHTTP(c *outbound.Client, o HTTPOptions) *HTTP {
	h := &HTTP{client: c, ttl: o.KeyTTL, every: o.KeyRefetchInterval, now: o.Now, sets: map[string]*keySet{}}
	if h.ttl <= 0 {
		h.ttl = DefaultKeyTTL
	}
	if h.every <= 0 {
		h.every = DefaultKeyRefetchInterval
	}
	if h.now == nil {
		h.now = time.Now
	}
	return h
}

// openBody is the wire form of OpenRequest, sent as RFC 8785 JSON so that
// the same request is the same bytes (the service compares bodies for
// idempotency).
type openBody struct {
	OrgID        string `json:"org_id"`
	EscalationID string `json:"escalation_id"`
	IntentHash   string `json:"intent_hash"`
	Actor        Actor  `json:"actor"`
	Action       Action `json:"action"`
	ExpiresAt    string `json:"expires_at"`
}

// requestAnswer is the wire form of an approval request. Members the
// package does not know are tolerated (the service may add some); the
// ones it uses are required and checked.
type requestAnswer struct {
	RequestID    string `json:"request_id"`
	OrgID        string `json:"org_id"`
	EscalationID string `json:"escalation_id"`
	IntentHash   string `json:"intent_hash"`
	Status       string `json:"status"`
	ExpiresAt    string `json:"expires_at"`
	CreatedAt    string `json:"created_at"`
	DecidedAt    string `json:"decided_at"`
	Approver     string `json:"approver"`
	Receipt      string `json:"receipt"`
	ApprovalURL  string `json:"approval_url"`
}

// problem is an RFC 9457 answer; only code and detail are shown.
type problem struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// Open implements Service: POST {base}/v1/approval-requests. The answer
// (201 new, 200 found again) must name the org, escalation and intent
// sent, or it is ErrEvidenceInvalid.
func (h *HTTP) Open(ctx context.Context, ep Endpoint, r OpenRequest) (Request, error) {
	if err := r.validate(); err != nil {
		return Request{}, fail(ErrInvalidRequest, "%v", err)
	}
	body, err := canon.Marshal(openBody{OrgID: r.OrgID, EscalationID: r.EscalationID, IntentHash: r.IntentHash,
		Actor: r.Actor, Action: r.Action, ExpiresAt: r.ExpiresAt.UTC().Format(time.RFC3339)})
	if err != nil {
		return Request{}, fail(ErrInvalidRequest, "encoding the request: %v", err)
	}
	got, err := h.request(ctx, ep, http.MethodPost, PathRequests, body, http.StatusCreated, http.StatusOK)
	if err != nil {
		return Request{}, err
	}
	if got.OrgID != r.OrgID || got.EscalationID != r.EscalationID || got.IntentHash != r.IntentHash {
		return Request{}, newError(ErrEvidenceInvalid, got.Status, fmt.Errorf(
			"%w: the service opened a request for org %q, escalation %q, intent %s; asked for org %q, escalation %q, intent %s",
			ErrEvidenceInvalid, got.OrgID, got.EscalationID, got.IntentHash, r.OrgID, r.EscalationID, r.IntentHash))
	}
	return got, nil
}

// Get implements Service: GET {base}/v1/approval-requests/{id}. An answer
// for another request id is ErrEvidenceInvalid; 404 is ErrNotFound.
func (h *HTTP) Get(ctx context.Context, ep Endpoint, requestID string) (Request, error) {
	return h.one(ctx, ep, http.MethodGet, requestID)
}

// Cancel implements Service: DELETE {base}/v1/approval-requests/{id}.
func (h *HTTP) Cancel(ctx context.Context, ep Endpoint, requestID string) (Request, error) {
	return h.one(ctx, ep, http.MethodDelete, requestID)
}

func (h *HTTP) one(ctx context.Context, ep Endpoint, method, requestID string) (Request, error) {
	if err := checkID("request id", requestID); err != nil {
		return Request{}, fail(ErrInvalidRequest, "%v", err)
	}
	got, err := h.request(ctx, ep, method, PathRequests+"/"+requestID, nil, http.StatusOK)
	if err != nil {
		return Request{}, err
	}
	if got.RequestID != requestID {
		return Request{}, newError(ErrEvidenceInvalid, got.Status, fmt.Errorf(
			"%w: asked for request %q, the service answered request %q", ErrEvidenceInvalid, requestID, got.RequestID))
	}
	return got, nil
}

// request makes one authenticated call and decodes an approval request
// from an answer with one of the statuses ok.
func (h *HTTP) request(ctx context.Context, ep Endpoint, method, path string, body []byte, ok ...int) (Request, error) {
	resp, err := h.call(ctx, ep, method, path, body, true)
	if err != nil {
		return Request{}, err
	}
	op := method + " " + origin(ep.BaseURL) + path
	for _, s := range ok {
		if resp.StatusCode == s {
			return decodeRequest(op, resp)
		}
	}
	return Request{}, answerError(op, ep, resp)
}

// call sends one request to ep; auth adds the credential.
func (h *HTTP) call(ctx context.Context, ep Endpoint, method, path string, body []byte, auth bool) (*outbound.Response, error) {
	if err := ep.Validate(); err != nil {
		return nil, err
	}
	if _, err := h.client.CheckURL(ep.BaseURL); err != nil {
		return nil, fail(ErrInvalidEndpoint, "base URL: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, method, ep.base()+path, bytes.NewReader(body))
	if err != nil {
		return nil, fail(ErrInvalidEndpoint, "building the request: %v", err)
	}
	if body == nil {
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if auth {
		req.Header.Set("Authorization", "Bearer "+ep.Credential)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		if errors.Is(err, outbound.ErrInvalidURL) {
			return nil, fail(ErrInvalidEndpoint, "%w", err)
		}
		return nil, fail(ErrUnavailable, "%w", err)
	}
	return resp, nil
}

// answerError turns an answer with an unexpected status into the error its
// status means.
func answerError(op string, ep Endpoint, resp *outbound.Response) error {
	what := describe(op, ep, resp)
	switch s := resp.StatusCode; {
	case s == http.StatusNotFound:
		return fail(ErrNotFound, "%s", what)
	case s == http.StatusConflict:
		return fail(ErrConflict, "%s", what)
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		// The credential is refused: nothing can be checked until an
		// operator fixes it.
		return fail(ErrUnavailable, "%s: the credential was refused", what)
	case s == http.StatusTooManyRequests || s >= 500:
		return fail(ErrUnavailable, "%s", what)
	case s >= 400:
		return fail(ErrRejected, "%s", what)
	}
	return fail(ErrUnavailable, "%s, not an answer of the protocol", what)
}

// describe names an answer: its status, and the service's problem code and
// detail when it sent them (the credential, should the service echo it,
// redacted).
func describe(op string, ep Endpoint, resp *outbound.Response) string {
	what := fmt.Sprintf("%s: the service answered %d", op, resp.StatusCode)
	var p problem
	if strictjson.Decode(resp.Body, &p, strictjson.Options{}) == nil {
		if code := safeCode(p.Code); code != "" {
			what += " " + code
		}
		if p.Detail != "" {
			what += fmt.Sprintf(" (%q)", truncate(redact(p.Detail, ep.Credential)))
		}
	}
	return what
}

// safeCode keeps a problem code that is UPPER_SNAKE of at most 64 bytes.
func safeCode(c string) string {
	if len(c) == 0 || len(c) > 64 {
		return ""
	}
	for i := 0; i < len(c); i++ {
		if b := c[i]; !(b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_') {
			return ""
		}
	}
	return c
}

func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[credential]")
}

// decodeRequest decodes and checks an approval request answered by op.
func decodeRequest(op string, resp *outbound.Response) (Request, error) {
	bad := func(format string, args ...any) (Request, error) {
		return Request{}, fail(ErrUnavailable, "%s: malformed answer: "+format, append([]any{op}, args...)...)
	}
	if !isJSON(resp.Header.Get("Content-Type")) {
		return bad("Content-Type %q is not JSON", truncate(resp.Header.Get("Content-Type")))
	}
	var a requestAnswer
	if err := strictjson.Decode(resp.Body, &a, strictjson.Options{}); err != nil {
		return bad("%v", err)
	}
	if err := checkID("request_id", a.RequestID); err != nil {
		return bad("%v", err)
	}
	for _, c := range []struct {
		name, v  string
		required bool
	}{{"org_id", a.OrgID, true}, {"escalation_id", a.EscalationID, true}, {"approver", a.Approver, false}} {
		if err := checkText(c.name, c.v, c.required); err != nil {
			return bad("%v", err)
		}
	}
	if err := checkDigest("intent_hash", a.IntentHash); err != nil {
		return bad("%v", err)
	}
	r := Request{RequestID: a.RequestID, OrgID: a.OrgID, EscalationID: a.EscalationID, IntentHash: a.IntentHash,
		Status: Status(a.Status), Approver: a.Approver, Receipt: a.Receipt, ApprovalURL: a.ApprovalURL}
	if !r.Status.Valid() {
		return bad("status %q is not one of the protocol's", truncate(a.Status))
	}
	var err error
	if r.ExpiresAt, err = parseTime("expires_at", a.ExpiresAt, true); err != nil {
		return bad("%v", err)
	}
	if r.CreatedAt, err = parseTime("created_at", a.CreatedAt, true); err != nil {
		return bad("%v", err)
	}
	if r.DecidedAt, err = parseTime("decided_at", a.DecidedAt, false); err != nil {
		return bad("%v", err)
	}
	if len(a.Receipt) > MaxReceiptLength {
		return bad("receipt longer than %d bytes", MaxReceiptLength)
	}
	if err := checkApprovalURL(a.ApprovalURL); err != nil {
		return bad("%v", err)
	}
	return r, nil
}

func parseTime(name, s string, required bool) (time.Time, error) {
	if s == "" {
		if required {
			return time.Time{}, fmt.Errorf("%s is required", name)
		}
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q is not an RFC 3339 time", name, truncate(s))
	}
	return t.UTC(), nil
}

// isJSON accepts application/json and any application/*+json.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// origin is the scheme and host of a base URL, for messages.
func origin(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return "the approval service"
	}
	return u.Scheme + "://" + u.Host
}
