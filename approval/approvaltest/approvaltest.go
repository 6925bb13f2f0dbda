// Package approvaltest is an in-memory approval service for tests: it
// speaks the approval-service protocol (docs/decisions.md, issue 13) over
// an httptest.Server, signs sealed receipts with grant.SignApprovalReceipt,
// and lets a test decide requests, rotate keys, tamper with answers and
// inject faults. It is a fake, not the reference service
// (cmd/clearance-approver): no approval pages, no WebAuthn.
//
// Protocol, as served:
//
//	POST   /v1/approval-requests                 201 new, 200 same (org, escalation, body), 409 other body
//	GET    /v1/approval-requests/{id}            200, 404 unknown or another org's
//	DELETE /v1/approval-requests/{id}            200; PENDING becomes CANCELLED
//	POST   /v1/approval-requests/{id}/revoke     200; APPROVED becomes REVOKED
//	GET    /.well-known/jwks.json                200 {"keys":[…]}, no credential
//
// Every other route needs Authorization: Bearer <credential>, each
// credential bound to one org (Options.Orgs); errors are problem+json
// {type, title, status, code, detail}. A PENDING request whose expires_at
// has passed (by Options.Now) is answered EXPIRED.
package approvaltest

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
)

// The protocol's statuses, as the fake writes them.
const (
	Pending   = "PENDING"
	Approved  = "APPROVED"
	Denied    = "DENIED"
	Expired   = "EXPIRED"
	Cancelled = "CANCELLED"
	Revoked   = "REVOKED"
)

// Options configure a fake service.
type Options struct {
	// Orgs maps each accepted credential to its org. Empty means
	// {"cred-org-1": "org-1", "cred-org-2": "org-2"}.
	Orgs map[string]string
	// Issuer is the iss of receipts; "" means the server's URL.
	Issuer string
	// Key signs receipts; the zero Key means a fresh random key.
	Key grant.Key
	// Now is the service's clock; nil means time.Now.
	Now func() time.Time
}

// Record is one approval request as the fake holds it.
type Record struct {
	RequestID    string
	OrgID        string
	EscalationID string
	IntentHash   string
	Status       string
	ExpiresAt    time.Time
	CreatedAt    time.Time
	DecidedAt    time.Time // zero while undecided
	Approver     string
	Receipt      string
	ApprovalURL  string
	Body         []byte // the RFC 8785 form of the opening body, for idempotency
}

// Call is one request the fake received.
type Call struct {
	Method, Path  string
	Authorization string // the header as received
}

// TB is what the fake needs of a test; testing.TB has it.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// Service is a running fake approval service.
type Service struct {
	*httptest.Server
	t      TB
	orgs   map[string]string
	issuer string
	now    func() time.Time

	mu        sync.Mutex
	signer    grant.Signer
	published []grant.Key
	records   map[string]*Record
	byEsc     map[[2]string]string // (org, escalation id) → request id
	next      int
	calls     []Call
	fault     func(w http.ResponseWriter, r *http.Request) bool
}

// New starts a fake service, closed when the test ends. Misuse (deciding a
// request that is not PENDING, updating one that does not exist) fails t.
func New(t TB, o Options) *Service {
	t.Helper()
	s := &Service{t: t, orgs: o.Orgs, now: o.Now, records: map[string]*Record{}, byEsc: map[[2]string]string{}}
	if len(s.orgs) == 0 {
		s.orgs = map[string]string{"cred-org-1": "org-1", "cred-org-2": "org-2"}
	}
	if s.now == nil {
		s.now = time.Now
	}
	k := o.Key
	if k.IsZero() {
		var err error
		if k, err = grant.NewKey(rand.Reader); err != nil {
			t.Fatalf("approvaltest: %v", err)
		}
	}
	s.signer, s.published = k, []grant.Key{k}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	s.issuer = o.Issuer
	if s.issuer == "" {
		s.issuer = s.URL
	}
	return s
}

// Issuer is the iss of the fake's receipts.
func (s *Service) Issuer() string { return s.issuer }

// AddCredential accepts credential for org from now on (for orgs a test
// creates after the fake started).
func (s *Service) AddCredential(credential, org string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orgs[credential] = org
}

// SetSigner makes k sign the receipts of later decisions; Publish decides
// which keys the JWKS lists.
func (s *Service) SetSigner(k grant.Signer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signer = k
}

// Publish makes the JWKS list exactly keys.
func (s *Service) Publish(keys ...grant.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.published = append([]grant.Key(nil), keys...)
}

// SetFault makes f see every request first; when it returns true it has
// answered and the fake does nothing more. nil removes it.
func (s *Service) SetFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// Calls returns the requests received so far.
func (s *Service) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Count returns how many requests had method and path.
func (s *Service) Count(method, path string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Method == method && c.Path == path {
			n++
		}
	}
	return n
}

// Get returns a copy of a record.
func (s *Service) Get(id string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return Record{}, false
	}
	return *s.current(r), true
}

// Update lets f change a record in place (to tamper with answers).
func (s *Service) Update(id string, f func(*Record)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		s.t.Fatalf("approvaltest: no request %q", id)
	}
	f(r)
}

// Approve decides a PENDING request as approved by approver, with a
// receipt signed by the current signer, and returns the receipt.
func (s *Service) Approve(id, approver string) string { return s.decide(id, approver, Approved) }

// Deny decides a PENDING request as denied.
func (s *Service) Deny(id, approver string) string { return s.decide(id, approver, Denied) }

func (s *Service) decide(id, approver, decision string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok || s.current(r).Status != Pending {
		s.t.Fatalf("approvaltest: request %q is not PENDING", id)
	}
	now := s.now().UTC()
	r.Status, r.DecidedAt, r.Approver = decision, now, approver
	r.Receipt = s.sign(s.ReceiptFor(*r, decision))
	return r.Receipt
}

// Revoke turns an APPROVED request into REVOKED, as an operator would.
func (s *Service) Revoke(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok || r.Status != Approved {
		s.t.Fatalf("approvaltest: request %q is not APPROVED", id)
	}
	r.Status = Revoked
}

// ReceiptFor is the receipt payload the fake signs for r's decision
// (issued at r.DecidedAt).
func (s *Service) ReceiptFor(r Record, decision string) grant.ApprovalReceipt {
	return grant.ApprovalReceipt{Issuer: s.issuer, Audience: grant.AudApproval, ID: "rcpt_" + r.RequestID,
		RequestID: r.RequestID, OrgID: r.OrgID, IntentHash: r.IntentHash, Approver: r.Approver,
		Decision: decision, Presence: grant.PresenceWebAuthnUV, IssuedAt: r.DecidedAt.Unix()}
}

// Sign signs a receipt payload with the current signer.
func (s *Service) Sign(rc grant.ApprovalReceipt) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sign(rc)
}

func (s *Service) sign(rc grant.ApprovalReceipt) string {
	jws, err := grant.SignApprovalReceipt(s.signer, rc)
	if err != nil {
		s.t.Fatalf("approvaltest: signing a receipt: %v", err)
	}
	return jws
}

// current is r with a passed expiry applied. s.mu is held.
func (s *Service) current(r *Record) *Record {
	if r.Status == Pending && !s.now().Before(r.ExpiresAt) {
		r.Status = Expired
	}
	return r
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization")})
	fault := s.fault
	s.mu.Unlock()
	if fault != nil && fault(w, r) {
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/.well-known/jwks.json" {
		s.jwks(w)
		return
	}
	cred, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	org, known := s.orgs[cred]
	s.mu.Unlock()
	if !ok || !known {
		Problem(w, http.StatusUnauthorized, "UNAUTHENTICATED", "a valid bearer credential is required")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/approval-requests")
	switch {
	case ok && rest == "" && r.Method == http.MethodPost:
		s.open(w, r, org)
	case ok && strings.Count(rest, "/") == 1 && rest != "/" && (r.Method == http.MethodGet || r.Method == http.MethodDelete):
		s.one(w, r.Method, org, rest[1:])
	case ok && strings.Count(rest, "/") == 2 && strings.HasSuffix(rest, "/revoke") && r.Method == http.MethodPost:
		s.one(w, "REVOKE", org, strings.TrimSuffix(rest[1:], "/revoke"))
	default:
		Problem(w, http.StatusNotFound, "NOT_FOUND", "no such route")
	}
}

type openBody struct {
	OrgID        string `json:"org_id"`
	EscalationID string `json:"escalation_id"`
	IntentHash   string `json:"intent_hash"`
	Actor        struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	} `json:"actor"`
	Action struct {
		Type        string `json:"type"`
		Amount      string `json:"amount,omitempty"`
		Currency    string `json:"currency,omitempty"`
		Target      string `json:"target,omitempty"`
		WorkflowKey string `json:"workflow_key,omitempty"`
	} `json:"action"`
	ExpiresAt string `json:"expires_at"`
}

func (s *Service) open(w http.ResponseWriter, r *http.Request, org string) {
	var raw bytes.Buffer
	if _, err := raw.ReadFrom(http.MaxBytesReader(w, r.Body, 64<<10)); err != nil {
		Problem(w, http.StatusBadRequest, "INVALID_REQUEST", "unreadable body")
		return
	}
	var b openBody
	dec := json.NewDecoder(bytes.NewReader(raw.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		Problem(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
		return
	}
	expires, err := time.Parse(time.RFC3339, b.ExpiresAt)
	switch {
	case b.OrgID != org:
		Problem(w, http.StatusForbidden, "ORG_MISMATCH", "org_id is not the credential's org")
		return
	case b.EscalationID == "" || b.Actor.ID == "" || b.Actor.Type == "" || b.Action.Type == "":
		Problem(w, http.StatusBadRequest, "INVALID_REQUEST", "a required member is missing")
		return
	case err != nil || !strings.HasSuffix(b.ExpiresAt, "Z"):
		Problem(w, http.StatusBadRequest, "INVALID_REQUEST", "expires_at is not RFC 3339 UTC")
		return
	}
	if _, err := canon.ParseDigest(b.IntentHash); err != nil {
		Problem(w, http.StatusBadRequest, "INVALID_REQUEST", "intent_hash is not a digest")
		return
	}
	body, err := canon.Transform(raw.Bytes())
	if err != nil {
		Problem(w, http.StatusBadRequest, "INVALID_REQUEST", err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.byEsc[[2]string{org, b.EscalationID}]; ok {
		rec := s.current(s.records[id])
		if !bytes.Equal(rec.Body, body) {
			Problem(w, http.StatusConflict, "ESCALATION_CONFLICT", "this escalation was opened with another body")
			return
		}
		writeRecord(w, http.StatusOK, rec)
		return
	}
	s.next++
	id := fmt.Sprintf("apr_%04d", s.next)
	rec := &Record{RequestID: id, OrgID: org, EscalationID: b.EscalationID, IntentHash: b.IntentHash, Status: Pending,
		ExpiresAt: expires.UTC(), CreatedAt: s.now().UTC(), ApprovalURL: s.URL + "/approve/" + id + "?t=secret-invitation-" + id, Body: body}
	s.records[id] = rec
	s.byEsc[[2]string{org, b.EscalationID}] = id
	writeRecord(w, http.StatusCreated, rec)
}

func (s *Service) one(w http.ResponseWriter, op, org, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[id]
	if !ok || rec.OrgID != org {
		Problem(w, http.StatusNotFound, "APPROVAL_REQUEST_NOT_FOUND", "no such approval request")
		return
	}
	s.current(rec)
	switch {
	case op == http.MethodDelete && rec.Status == Pending:
		rec.Status = Cancelled
	case op == "REVOKE" && rec.Status == Approved:
		rec.Status = Revoked
	}
	writeRecord(w, http.StatusOK, rec)
}

func (s *Service) jwks(w http.ResponseWriter) {
	s.mu.Lock()
	keys := make([]any, 0, len(s.published))
	for _, k := range s.published {
		keys = append(keys, k.PublicJWK())
	}
	s.mu.Unlock()
	WriteJSON(w, http.StatusOK, map[string]any{"keys": keys})
}

// Answer is the wire form of a record.
func Answer(r *Record) map[string]any {
	a := map[string]any{
		"request_id": r.RequestID, "org_id": r.OrgID, "escalation_id": r.EscalationID, "intent_hash": r.IntentHash,
		"status": r.Status, "expires_at": r.ExpiresAt.UTC().Format(time.RFC3339Nano),
		"created_at": r.CreatedAt.UTC().Format(time.RFC3339Nano),
	}
	if !r.DecidedAt.IsZero() {
		a["decided_at"] = r.DecidedAt.UTC().Format(time.RFC3339Nano)
	}
	for k, v := range map[string]string{"approver": r.Approver, "receipt": r.Receipt, "approval_url": r.ApprovalURL} {
		if v != "" {
			a[k] = v
		}
	}
	return a
}

func writeRecord(w http.ResponseWriter, status int, r *Record) { WriteJSON(w, status, Answer(r)) }

// WriteJSON answers v as application/json.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Problem answers an RFC 9457 problem.
func Problem(w http.ResponseWriter, status int, code, detail string) {
	b, _ := json.Marshal(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "code": code, "detail": detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
