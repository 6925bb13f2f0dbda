package approver

import (
	"crypto/rand"
	"net/http"
	"regexp"
	"time"
)

var (
	intentHashRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	amountRE     = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?$`)
)

// Field limits, in characters.
const (
	maxIDLen     = 200
	maxTextLen   = 1000
	maxAmountLen = 64
)

// view is r as the API answers it, at now.
func (s *Service) view(r *requestRecord, now time.Time) ApprovalRequest {
	v := ApprovalRequest{
		RequestID:    r.ID,
		OrgID:        r.Org,
		EscalationID: r.EscalationID,
		IntentHash:   r.IntentHash,
		Status:       r.status(now),
		ExpiresAt:    r.ExpiresAt.UTC(),
		CreatedAt:    r.CreatedAt.UTC(),
		Approver:     r.Approver,
		Receipt:      r.Receipt,
		ApprovalURL:  s.publicURL + "/approve/" + r.Token,
	}
	if !r.DecidedAt.IsZero() {
		t := r.DecidedAt.UTC()
		v.DecidedAt = &t
	}
	return v
}

// openBody is OpenRequest validated: what a replay is compared on.
type openBody struct {
	escalationID, intentHash string
	actor                    Actor
	action                   Action
	expiresAt                time.Time
}

func validateOpen(in OpenRequest) (openBody, *problem) {
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"escalation_id", in.EscalationID, maxIDLen},
		{"actor.id", in.Actor.ID, maxIDLen},
		{"actor.type", in.Actor.Type, maxIDLen},
		{"action.type", in.Action.Type, maxIDLen},
	} {
		if p := checkText(f.name, f.v, f.max); p != nil {
			return openBody{}, p
		}
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"action.currency", in.Action.Currency, maxIDLen},
		{"action.target", in.Action.Target, maxTextLen},
		{"action.workflow_key", in.Action.WorkflowKey, maxIDLen},
	} {
		if p := checkOptionalText(f.name, f.v, f.max); p != nil {
			return openBody{}, p
		}
	}
	if in.Action.Amount != "" && (len(in.Action.Amount) > maxAmountLen || !amountRE.MatchString(in.Action.Amount)) {
		return openBody{}, refuse(http.StatusBadRequest, CodeInvalidField, "action.amount must be a decimal string such as \"1250.00\"")
	}
	if in.IntentHash == "" {
		return openBody{}, refuse(http.StatusBadRequest, CodeMissingField, "intent_hash is required")
	}
	if !intentHashRE.MatchString(in.IntentHash) {
		return openBody{}, refuse(http.StatusBadRequest, CodeInvalidIntentHash, "intent_hash must be sha256:<64 lowercase hex digits>")
	}
	if in.ExpiresAt == "" {
		return openBody{}, refuse(http.StatusBadRequest, CodeMissingField, "expires_at is required")
	}
	exp, err := time.Parse(time.RFC3339Nano, in.ExpiresAt)
	if err != nil {
		return openBody{}, refuse(http.StatusBadRequest, CodeInvalidExpiresAt, "expires_at must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
	}
	return openBody{in.EscalationID, in.IntentHash, in.Actor, in.Action, exp.UTC()}, nil
}

func (b openBody) sameAs(r *requestRecord) bool {
	return b.escalationID == r.EscalationID && b.intentHash == r.IntentHash && b.actor == r.Actor &&
		b.action == r.Action && b.expiresAt.Equal(r.ExpiresAt)
}

// openRequest is POST /v1/approval-requests.
func (s *Service) openRequest(r *http.Request, org string, raw []byte) (int, any, *problem) {
	var in OpenRequest
	if p := decode(raw, &in); p != nil {
		return 0, nil, p
	}
	if in.OrgID == "" {
		return 0, nil, refuse(http.StatusBadRequest, CodeMissingField, "org_id is required")
	}
	if in.OrgID != org {
		return 0, nil, refuse(http.StatusForbidden, CodeOrgMismatch, "org_id is not the org of the credential")
	}
	body, p := validateOpen(in)
	if p != nil {
		return 0, nil, p
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if prev := s.st.byEsc[escKey{org, body.escalationID}]; prev != nil {
		if !body.sameAs(prev) {
			return 0, nil, refuse(http.StatusConflict, CodeEscalationConflict, "escalation_id %q was opened before with another body", body.escalationID)
		}
		return http.StatusOK, s.view(prev, now), nil
	}
	if !body.expiresAt.After(now) {
		return 0, nil, refuse(http.StatusBadRequest, CodeExpiresAtPast, "expires_at must be in the future")
	}
	if body.expiresAt.Sub(now) > s.opts.MaxLifetime {
		return 0, nil, refuse(http.StatusBadRequest, CodeExpiresAtTooFar, "expires_at must be within %s from now", s.opts.MaxLifetime)
	}
	s.st.prune(now, s.opts.Retention)
	rec := &requestRecord{
		ID: newID("apr_"), Org: org, EscalationID: body.escalationID, IntentHash: body.intentHash,
		Actor: body.actor, Action: body.action, ExpiresAt: body.expiresAt, CreatedAt: now.UTC(),
		Status: StatusPending, Token: randomToken(),
	}
	s.st.addRequest(rec)
	if p := s.persistLocked(func() { s.st.removeRequest(rec) }); p != nil {
		return 0, nil, p
	}
	s.log.Info("approval request opened", "request_id", rec.ID, "org", org, "escalation_id", rec.EscalationID, "expires_at", rec.ExpiresAt)
	return http.StatusCreated, s.view(rec, now), nil
}

// lookupLocked returns org's request id; another org's is not found.
func (s *Service) lookupLocked(org, id string) (*requestRecord, *problem) {
	rec := s.st.requests[id]
	if rec == nil || rec.Org != org {
		return nil, refuse(http.StatusNotFound, CodeNotFound, "no approval request %q", id)
	}
	return rec, nil
}

// getRequest is GET /v1/approval-requests/{request_id}.
func (s *Service) getRequest(r *http.Request, org string, _ []byte) (int, any, *problem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, p := s.lookupLocked(org, r.PathValue("request_id"))
	if p != nil {
		return 0, nil, p
	}
	return http.StatusOK, s.view(rec, s.now()), nil
}

// cancelRequest is DELETE /v1/approval-requests/{request_id}: a PENDING
// request becomes CANCELLED; any other is answered as it stands.
func (s *Service) cancelRequest(r *http.Request, org string, _ []byte) (int, any, *problem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, p := s.lookupLocked(org, r.PathValue("request_id"))
	if p != nil {
		return 0, nil, p
	}
	now := s.now()
	if rec.status(now) != StatusPending {
		return http.StatusOK, s.view(rec, now), nil
	}
	rec.Status, rec.CancelledAt = StatusCancelled, now.UTC()
	if p := s.persistLocked(func() { rec.Status, rec.CancelledAt = StatusPending, time.Time{} }); p != nil {
		return 0, nil, p
	}
	for _, c := range s.st.perRequest[rec.ID] {
		delete(s.st.challenges, c)
	}
	delete(s.st.perRequest, rec.ID)
	s.log.Info("approval request cancelled", "request_id", rec.ID, "org", org)
	return http.StatusOK, s.view(rec, now), nil
}

// revokeRequest is POST /v1/approval-requests/{request_id}/revoke: an
// APPROVED request becomes REVOKED; any other is answered as it stands.
func (s *Service) revokeRequest(r *http.Request, org string, raw []byte) (int, any, *problem) {
	if p := decodeEmpty(raw); p != nil {
		return 0, nil, p
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, p := s.lookupLocked(org, r.PathValue("request_id"))
	if p != nil {
		return 0, nil, p
	}
	now := s.now()
	if rec.Status != StatusApproved {
		return http.StatusOK, s.view(rec, now), nil
	}
	rec.Status, rec.RevokedAt = StatusRevoked, now.UTC()
	if p := s.persistLocked(func() { rec.Status, rec.RevokedAt = StatusApproved, time.Time{} }); p != nil {
		return 0, nil, p
	}
	s.log.Info("approval revoked", "request_id", rec.ID, "org", org)
	return http.StatusOK, s.view(rec, now), nil
}

// enrollApprover is POST /v1/approvers: it registers the approver (or
// updates its display name) and opens a one-time enrollment link at which
// the approver registers a passkey. Each call opens a new link; an
// approver may hold several passkeys.
func (s *Service) enrollApprover(r *http.Request, org string, raw []byte) (int, any, *problem) {
	var in EnrollApprover
	if p := decode(raw, &in); p != nil {
		return 0, nil, p
	}
	if p := checkText("approver_id", in.ApproverID, maxIDLen); p != nil {
		return 0, nil, p
	}
	if in.DisplayName == "" {
		in.DisplayName = in.ApproverID
	}
	if p := checkText("display_name", in.DisplayName, maxIDLen); p != nil {
		return 0, nil, p
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.st.prune(now, s.opts.Retention)
	a := s.st.approvers[org][in.ApproverID]
	var undo func()
	if a == nil {
		handle := make([]byte, 32)
		if _, err := rand.Read(handle); err != nil {
			return 0, nil, s.internalError("drawing a user handle", err)
		}
		a = &approverRecord{Org: org, ID: in.ApproverID, DisplayName: in.DisplayName, Handle: handle, CreatedAt: now.UTC()}
		s.st.putApprover(a)
		undo = func() { delete(s.st.approvers[org], a.ID) }
	} else {
		old := a.DisplayName
		a.DisplayName = in.DisplayName
		undo = func() { a.DisplayName = old }
	}
	token := randomToken()
	e := &enrollmentRecord{TokenHash: tokenHashHex(token), Org: org, ApproverID: a.ID, ExpiresAt: now.Add(s.opts.EnrollmentTTL).UTC()}
	s.st.enrollment[e.TokenHash] = e
	if p := s.persistLocked(func() { delete(s.st.enrollment, e.TokenHash); undo() }); p != nil {
		return 0, nil, p
	}
	s.log.Info("enrollment link opened", "org", org, "approver", a.ID, "expires_at", e.ExpiresAt)
	return http.StatusCreated, Enrollment{ApproverID: a.ID, EnrollmentURL: s.publicURL + "/enroll/" + token}, nil
}

// serveJWKS is GET /.well-known/jwks.json: the receipt key, public only.
func (s *Service) serveJWKS(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(append(append([]byte(nil), s.jwks...), '\n'))
}
