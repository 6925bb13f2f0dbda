package approver

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/grant"
)

// The test deployment: two orgs, each with one credential.
const (
	testPublicURL = "https://approvals.example.test"
	testRPID      = "approvals.example.test"
	testOrigin    = "https://approvals.example.test"
	orgA          = "org_a"
	orgB          = "org_b"
	credA         = "cred-org-a-0123456789abcdef"
	credB         = "cred-org-b-0123456789abcdef"
	testIntent    = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

var testStart = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)

// fakeClock is the service's clock in tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type harness struct {
	t         *testing.T
	base      string // the service's public URL
	svc       *Service
	clock     *fakeClock
	key       grant.Key
	mu        sync.Mutex
	decisions []ApprovalRequest
}

func testKey(t testing.TB) grant.Key {
	t.Helper()
	k, err := grant.KeyFromSeed(bytes.Repeat([]byte{42}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newHarness(t *testing.T, mods ...func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, base: testPublicURL, clock: &fakeClock{t: testStart}, key: testKey(t)}
	opts := Options{
		PublicURL:   testPublicURL,
		Issuer:      "https://approvals.example.test/issuer",
		SigningKey:  h.key,
		Credentials: map[string]string{credA: orgA, credB: orgB},
		Now:         h.clock.Now,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnDecision: func(r ApprovalRequest) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.decisions = append(h.decisions, r)
		},
	}
	for _, m := range mods {
		m(&opts)
	}
	svc, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.svc = svc
	return h
}

func (h *harness) decided() []ApprovalRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ApprovalRequest(nil), h.decisions...)
}

// response is an answer of the service.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.Body, err)
	}
}

// code is the problem code of a refusal.
func (r response) code(t testing.TB) string {
	t.Helper()
	var p problemBody
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("not a problem body (%d): %s", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("problem Content-Type %q", ct)
	}
	if p.Status != r.Status || p.Type == "" || p.Title == "" || p.Detail == "" {
		t.Errorf("incomplete problem body: %s", r.Body)
	}
	return p.Code
}

// serve sends one request to h (an http.Handler) in process.
func serve(h http.Handler, method, path, cred string, body any, contentType string) response {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			panic(err)
		}
		rd = bytes.NewReader(data)
	}
	req := httptest.NewRequest(method, path, rd)
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

// api calls Clearance's API with a credential.
func (h *harness) api(method, path, cred string, body any) response {
	return serve(h.svc, method, path, cred, body, "application/json")
}

// pagePost calls a page's JSON route.
func (h *harness) pagePost(path string, body any) response {
	return serve(h.svc, http.MethodPost, path, "", body, "application/json")
}

// openBody is a valid OpenRequest of org for escalation esc, expiring in an hour.
func (h *harness) openBody(org, esc string) map[string]any {
	return map[string]any{
		"org_id":        org,
		"escalation_id": esc,
		"intent_hash":   testIntent,
		"actor":         map[string]any{"id": "agent-7", "type": "agent"},
		"action": map[string]any{"type": "payment.send", "amount": "1250.00", "currency": "EUR",
			"target": "acct:DE89370400440532013000", "workflow_key": "vendor-payout"},
		"expires_at": h.clock.Now().Add(time.Hour).Format(time.RFC3339),
	}
}

// open opens a request and returns it.
func (h *harness) open(org, cred, esc string) ApprovalRequest {
	h.t.Helper()
	res := h.api(http.MethodPost, "/v1/approval-requests", cred, h.openBody(org, esc))
	if res.Status != http.StatusCreated {
		h.t.Fatalf("open: %d %s", res.Status, res.Body)
	}
	var r ApprovalRequest
	res.json(h.t, &r)
	return r
}

func (h *harness) get(cred, id string) ApprovalRequest {
	h.t.Helper()
	res := h.api(http.MethodGet, "/v1/approval-requests/"+id, cred, nil)
	if res.Status != http.StatusOK {
		h.t.Fatalf("get: %d %s", res.Status, res.Body)
	}
	var r ApprovalRequest
	res.json(h.t, &r)
	return r
}

// path is the local path of a public URL of the service.
func (h *harness) path(u string) string {
	h.t.Helper()
	p, ok := strings.CutPrefix(u, h.base)
	if !ok {
		h.t.Fatalf("%q is not under %s", u, h.base)
	}
	return p
}

// enroll registers a new approver of org with a fresh software
// authenticator and returns the authenticator.
func (h *harness) enroll(org, cred, approverID string) *softAuthenticator {
	h.t.Helper()
	a := newSoftAuthenticator(h.t, testRPID, testOrigin)
	h.enrollWith(a, cred, approverID)
	return a
}

func (h *harness) enrollWith(a *softAuthenticator, cred, approverID string) {
	h.t.Helper()
	link := h.enrollmentLink(cred, approverID)
	opts := h.pagePost(link+"/begin", map[string]any{})
	if opts.Status != http.StatusOK {
		h.t.Fatalf("enroll begin: %d %s", opts.Status, opts.Body)
	}
	fin := h.pagePost(link+"/finish", map[string]any{"credential": json.RawMessage(a.register(h.t, opts.Body))})
	if fin.Status != http.StatusOK {
		h.t.Fatalf("enroll finish: %d %s", fin.Status, fin.Body)
	}
}

// enrollmentLink opens an enrollment link and returns its local path.
func (h *harness) enrollmentLink(cred, approverID string) string {
	h.t.Helper()
	res := h.api(http.MethodPost, "/v1/approvers", cred, map[string]any{"approver_id": approverID, "display_name": "Approver " + approverID})
	if res.Status != http.StatusCreated {
		h.t.Fatalf("enroll approver: %d %s", res.Status, res.Body)
	}
	var e Enrollment
	res.json(h.t, &e)
	return h.path(e.EnrollmentURL)
}

// begin starts an approval ceremony for decision and returns the options.
func (h *harness) begin(r ApprovalRequest, decision Status) []byte {
	h.t.Helper()
	res := h.pagePost(h.path(r.ApprovalURL)+"/begin", map[string]any{"decision": decision})
	if res.Status != http.StatusOK {
		h.t.Fatalf("begin: %d %s", res.Status, res.Body)
	}
	return res.Body
}

// finish posts an assertion for decision.
func (h *harness) finish(r ApprovalRequest, decision Status, assertion []byte) response {
	return h.pagePost(h.path(r.ApprovalURL)+"/finish", map[string]any{"decision": decision, "assertion": json.RawMessage(assertion)})
}

// decide runs a whole approval ceremony with a and expects success.
func (h *harness) decide(r ApprovalRequest, decision Status, a *softAuthenticator) {
	h.t.Helper()
	res := h.finish(r, decision, a.assert(h.t, h.begin(r, decision)))
	if res.Status != http.StatusOK {
		h.t.Fatalf("finish: %d %s", res.Status, res.Body)
	}
}

// jwksLookup resolves receipt kids from the service's JWKS.
func jwksLookup(t testing.TB, h http.Handler) func(string) (ed25519.PublicKey, error) {
	t.Helper()
	res := serve(h, http.MethodGet, "/.well-known/jwks.json", "", nil, "")
	if res.Status != http.StatusOK {
		t.Fatalf("jwks: %d", res.Status)
	}
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	res.json(t, &set)
	return func(kid string) (ed25519.PublicKey, error) {
		for _, k := range set.Keys {
			if k["kid"] == kid {
				jwk, err := json.Marshal(k)
				if err != nil {
					return nil, err
				}
				pub, _, err := grant.ParsePublicJWK(jwk)
				return pub, err
			}
		}
		return nil, errors.New("unknown kid " + fmt.Sprint(kid))
	}
}
