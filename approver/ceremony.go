package approver

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/clearancehq/clearance/grant"
)

// waUser is an approver as go-webauthn sees it.
type waUser struct {
	id, name string
	handle   []byte
	creds    []webauthn.Credential
}

func (u waUser) WebAuthnID() []byte                         { return u.handle }
func (u waUser) WebAuthnName() string                       { return u.id }
func (u waUser) WebAuthnDisplayName() string                { return u.name }
func (u waUser) WebAuthnCredentials() []webauthn.Credential { return u.creds }

// userOf is a copy of a, detached from the state, for go-webauthn.
func userOf(a *approverRecord) waUser {
	u := waUser{id: a.ID, name: a.DisplayName, handle: slices.Clone(a.Handle)}
	for _, c := range a.Credentials {
		u.creds = append(u.creds, c.credential())
	}
	return u
}

func (c credentialRecord) credential() webauthn.Credential {
	cred := webauthn.Credential{
		ID:                slices.Clone(c.ID),
		PublicKey:         slices.Clone(c.PublicKey),
		AttestationType:   c.AttestationType,
		AttestationFormat: c.AttestationFormat,
		Flags: webauthn.CredentialFlags{UserPresent: c.UserPresent, UserVerified: c.UserVerified,
			BackupEligible: c.BackupEligible, BackupState: c.BackupState},
		Authenticator: webauthn.Authenticator{AAGUID: slices.Clone(c.AAGUID), SignCount: c.SignCount},
	}
	for _, t := range c.Transports {
		cred.Transport = append(cred.Transport, protocol.AuthenticatorTransport(t))
	}
	return cred
}

func recordOf(c *webauthn.Credential, now time.Time) credentialRecord {
	r := credentialRecord{
		ID: slices.Clone(c.ID), PublicKey: slices.Clone(c.PublicKey),
		AttestationType: c.AttestationType, AttestationFormat: c.AttestationFormat,
		UserPresent: c.Flags.UserPresent, UserVerified: c.Flags.UserVerified,
		BackupEligible: c.Flags.BackupEligible, BackupState: c.Flags.BackupState,
		AAGUID: slices.Clone(c.Authenticator.AAGUID), SignCount: c.Authenticator.SignCount, CreatedAt: now.UTC(),
	}
	for _, t := range c.Transport {
		r.Transports = append(r.Transports, string(t))
	}
	return r
}

// refusedBy turns a go-webauthn verification error into a refusal that
// shows the library's public detail, never its developer information.
func (s *Service) refusedBy(what string, err error) *problem {
	detail := "the passkey response did not verify"
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Details != "" {
		detail = pe.Details
		s.log.Info("approver: "+what+" refused", "detail", pe.Details, "info", pe.DevInfo)
	} else {
		s.log.Info("approver: "+what+" refused", "error", err.Error())
	}
	return refuse(http.StatusForbidden, CodeAssertionRefused, "%s", detail)
}

// notPending is the refusal of a ceremony on a request that is no longer
// PENDING.
func notPending(st Status) *problem {
	switch st {
	case StatusExpired:
		return refuse(http.StatusConflict, CodeRequestExpired, "the request expired before a decision")
	case StatusCancelled:
		return refuse(http.StatusConflict, CodeRequestCancelled, "the request was cancelled")
	}
	return refuse(http.StatusConflict, CodeAlreadyDecided, "the request was decided before: %s", st)
}

func linkInvalid() *problem {
	return refuse(http.StatusNotFound, CodeLinkInvalid, "this link is not valid: it is unknown, used or expired")
}

// enrollmentLocked is the open enrollment of token with its approver.
func (s *Service) enrollmentLocked(token string, now time.Time) (*enrollmentRecord, *approverRecord, *problem) {
	e := s.st.enrollment[tokenHashHex(token)]
	if e == nil || !now.Before(e.ExpiresAt) {
		return nil, nil, linkInvalid()
	}
	a := s.st.approvers[e.Org][e.ApproverID]
	if a == nil {
		return nil, nil, linkInvalid()
	}
	return e, a, nil
}

// enrollBegin is POST /enroll/{token}/begin: the options of a registration
// ceremony (user verification required, a discoverable credential
// preferred, no attestation). A new begin replaces the previous one.
func (s *Service) enrollBegin(_ *http.Request, token string, body []byte) (any, *problem) {
	if p := decodeEmpty(body); p != nil {
		return nil, p
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e, a, p := s.enrollmentLocked(token, now)
	if p != nil {
		return nil, p
	}
	u := userOf(a)
	var exclude []protocol.CredentialDescriptor
	for i := range u.creds {
		exclude = append(exclude, u.creds[i].Descriptor())
	}
	creation, session, err := s.wa.BeginRegistration(u, webauthn.WithExclusions(exclude))
	if err != nil {
		return nil, s.internalError("beginning a registration", err)
	}
	s.st.regSessions[e.TokenHash] = &regSession{session: *session, expires: now.Add(s.opts.ChallengeTTL)}
	return creation, nil
}

type enrollFinishBody struct {
	Credential jsontext.Value `json:"credential"`
}

// enrollFinish is POST /enroll/{token}/finish: verifies the registration
// (user verification required, the challenge of the last begin, used
// once), adds the passkey to the approver and closes the link.
func (s *Service) enrollFinish(_ *http.Request, token string, body []byte) (any, *problem) {
	var in enrollFinishBody
	if p := decode(body, &in); p != nil {
		return nil, p
	}
	if len(in.Credential) == 0 {
		return nil, refuse(http.StatusBadRequest, CodeMissingField, "credential is required")
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(in.Credential)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, CodeCredentialInvalid, "the credential is not a WebAuthn registration response")
	}
	s.mu.Lock()
	now := s.now()
	e, a, p := s.enrollmentLocked(token, now)
	if p != nil {
		s.mu.Unlock()
		return nil, p
	}
	rs := s.st.regSessions[e.TokenHash]
	delete(s.st.regSessions, e.TokenHash) // a challenge is used once
	if rs == nil || !now.Before(rs.expires) || parsed.Response.CollectedClientData.Challenge != rs.session.Challenge {
		s.mu.Unlock()
		return nil, refuse(http.StatusBadRequest, CodeChallengeInvalid, "the registration's challenge is unknown, used or expired: begin again")
	}
	user := userOf(a)
	s.mu.Unlock()

	if !parsed.Response.AttestationObject.AuthData.Flags.HasUserVerified() {
		return nil, refuse(http.StatusForbidden, CodeUserVerificationRequired, "the authenticator did not verify the user (PIN or biometrics)")
	}
	cred, err := s.wa.CreateCredential(user, rs.session, parsed)
	if err != nil {
		return nil, s.refusedBy("registration", err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now = s.now()
	if e2, a2, p := s.enrollmentLocked(token, now); p != nil || e2 != e || a2 != a {
		return nil, linkInvalid() // used by a concurrent finish
	}
	if s.st.byCred[string(cred.ID)] != nil {
		return nil, refuse(http.StatusConflict, CodeCredentialExists, "this passkey is already enrolled")
	}
	a.Credentials = append(a.Credentials, recordOf(cred, now))
	s.st.byCred[string(cred.ID)] = a
	delete(s.st.enrollment, e.TokenHash)
	if p := s.persistLocked(func() {
		a.Credentials = a.Credentials[:len(a.Credentials)-1]
		delete(s.st.byCred, string(cred.ID))
		s.st.enrollment[e.TokenHash] = e
	}); p != nil {
		return nil, p
	}
	s.log.Info("passkey enrolled", "org", a.Org, "approver", a.ID)
	return struct {
		ApproverID string `json:"approver_id"`
		Status     string `json:"status"`
	}{a.ID, "ENROLLED"}, nil
}

type decisionBody struct {
	Decision Status `json:"decision"`
}

func checkDecision(d Status) *problem {
	if d != StatusApproved && d != StatusDenied {
		return refuse(http.StatusBadRequest, CodeInvalidDecision, "decision must be %q or %q", StatusApproved, StatusDenied)
	}
	return nil
}

// approveBegin is POST /approve/{token}/begin: the options of an
// assertion ceremony for one decision: a fresh challenge bound to this
// request and this decision, user verification required, and the
// passkeys of the org's approvers allowed.
func (s *Service) approveBegin(_ *http.Request, token string, body []byte) (any, *problem) {
	var in decisionBody
	if p := decode(body, &in); p != nil {
		return nil, p
	}
	if p := checkDecision(in.Decision); p != nil {
		return nil, p
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	rec := s.st.byToken[tokenHash(token)]
	if rec == nil {
		return nil, linkInvalid()
	}
	if st := rec.status(now); st != StatusPending {
		return nil, notPending(st)
	}
	var allow []protocol.CredentialDescriptor
	for _, a := range s.st.approvers[rec.Org] {
		for _, c := range a.Credentials {
			cred := c.credential()
			allow = append(allow, cred.Descriptor())
		}
	}
	if len(allow) == 0 {
		return nil, refuse(http.StatusConflict, CodeNoApprovers, "no approver of this organization has enrolled a passkey")
	}
	assertion, session, err := s.wa.BeginDiscoverableLogin(webauthn.WithAllowedCredentials(allow),
		webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return nil, s.internalError("beginning an assertion", err)
	}
	s.st.prune(now, s.opts.Retention)
	list := s.st.perRequest[rec.ID]
	for len(list) >= maxChallengesPerRequest {
		s.st.dropChallenge(list[0], rec.ID)
		list = s.st.perRequest[rec.ID]
	}
	s.st.challenges[session.Challenge] = &assertChallenge{requestID: rec.ID, decision: in.Decision, session: *session, expires: now.Add(s.opts.ChallengeTTL)}
	s.st.perRequest[rec.ID] = append(list, session.Challenge)
	return assertion, nil
}

type approveFinishBody struct {
	Decision  Status         `json:"decision"`
	Assertion jsontext.Value `json:"assertion"`
}

// decided is what the approval page learns of a recorded decision.
type decided struct {
	Status    Status    `json:"status"`
	Approver  string    `json:"approver_id"`
	DecidedAt time.Time `json:"decided_at"`
}

// approveFinish is POST /approve/{token}/finish: verifies the assertion
// and records the decision. The challenge must be one begun for this
// request and this decision, and is used once whatever the outcome; the
// passkey must be an approver's of the request's org; the authenticator
// must have verified the user; its signature counter must advance. The
// first decision wins.
func (s *Service) approveFinish(_ *http.Request, token string, body []byte) (any, *problem) {
	var in approveFinishBody
	if p := decode(body, &in); p != nil {
		return nil, p
	}
	if p := checkDecision(in.Decision); p != nil {
		return nil, p
	}
	if len(in.Assertion) == 0 {
		return nil, refuse(http.StatusBadRequest, CodeMissingField, "assertion is required")
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(in.Assertion)
	if err != nil {
		return nil, refuse(http.StatusBadRequest, CodeCredentialInvalid, "the assertion is not a WebAuthn assertion response")
	}

	// Phase 1, locked: the challenge (consumed), the request, the approver.
	s.mu.Lock()
	now := s.now()
	rec := s.st.byToken[tokenHash(token)]
	if rec == nil {
		s.mu.Unlock()
		return nil, linkInvalid()
	}
	if st := rec.status(now); st != StatusPending {
		s.mu.Unlock()
		return nil, notPending(st)
	}
	challenge := parsed.Response.CollectedClientData.Challenge
	ch := s.st.challenges[challenge]
	if ch != nil {
		s.st.dropChallenge(challenge, ch.requestID)
	}
	if ch == nil || !now.Before(ch.expires) || ch.requestID != rec.ID || ch.decision != in.Decision {
		s.mu.Unlock()
		return nil, refuse(http.StatusBadRequest, CodeChallengeInvalid,
			"the challenge is unknown, used, expired, or was issued for another request or decision: begin again")
	}
	a := s.st.byCred[string(parsed.RawID)]
	if a == nil || a.Org != rec.Org {
		s.mu.Unlock()
		return nil, refuse(http.StatusForbidden, CodeUnknownCredential, "this passkey is not enrolled for this organization")
	}
	user := userOf(a)
	session := ch.session
	session.UserID = user.handle
	session.AllowedCredentialIDs = nil
	for _, id := range ch.session.AllowedCredentialIDs {
		if slices.ContainsFunc(user.creds, func(c webauthn.Credential) bool { return bytes.Equal(c.ID, id) }) {
			session.AllowedCredentialIDs = append(session.AllowedCredentialIDs, id)
		}
	}
	if !slices.ContainsFunc(session.AllowedCredentialIDs, func(id []byte) bool { return bytes.Equal(id, parsed.RawID) }) {
		s.mu.Unlock()
		return nil, refuse(http.StatusForbidden, CodeUnknownCredential, "this passkey was not allowed for this ceremony: begin again")
	}
	s.mu.Unlock()

	// Phase 2, unlocked: the WebAuthn verification.
	if !parsed.Response.AuthenticatorData.Flags.HasUserVerified() {
		return nil, refuse(http.StatusForbidden, CodeUserVerificationRequired, "the authenticator did not verify the user (PIN or biometrics): a passkey approval is required")
	}
	cred, err := s.wa.ValidateLogin(user, session, parsed)
	if err != nil {
		return nil, s.refusedBy("assertion", err)
	}
	if cred.Authenticator.CloneWarning {
		return nil, counterRegression()
	}
	count := parsed.Response.AuthenticatorData.Counter
	if s.afterVerify != nil {
		s.afterVerify()
	}

	// Phase 3, locked: the first decision wins.
	v, p := s.recordDecision(rec, a, in.Decision, parsed.RawID, count)
	if p != nil {
		return nil, p
	}
	s.log.Info("approval decided", "request_id", v.RequestID, "org", v.OrgID, "decision", string(v.Status), "approver", v.Approver)
	if s.opts.OnDecision != nil {
		s.opts.OnDecision(v)
	}
	return decided{Status: v.Status, Approver: v.Approver, DecidedAt: *v.DecidedAt}, nil
}

// recordDecision records decision on rec, made with approver a's passkey
// credID whose counter is now count, unless rec is no longer PENDING; it
// signs the receipt and saves the state.
func (s *Service) recordDecision(rec *requestRecord, a *approverRecord, decision Status, credID []byte, count uint32) (ApprovalRequest, *problem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if st := rec.status(now); st != StatusPending {
		return ApprovalRequest{}, notPending(st)
	}
	if s.st.requests[rec.ID] != rec {
		return ApprovalRequest{}, linkInvalid()
	}
	i := slices.IndexFunc(a.Credentials, func(c credentialRecord) bool { return bytes.Equal(c.ID, credID) })
	if i < 0 {
		return ApprovalRequest{}, refuse(http.StatusForbidden, CodeUnknownCredential, "this passkey is not enrolled for this organization")
	}
	stored := a.Credentials[i].SignCount
	if (count != 0 || stored != 0) && count <= stored {
		return ApprovalRequest{}, counterRegression()
	}
	receipt, err := grant.SignApprovalReceipt(s.opts.SigningKey, grant.ApprovalReceipt{
		Issuer: s.issuer, Audience: grant.AudApproval, ID: newID("rcp_"), RequestID: rec.ID, OrgID: rec.Org,
		IntentHash: rec.IntentHash, Approver: a.ID, Decision: string(decision), Presence: grant.PresenceWebAuthnUV,
		IssuedAt: now.Unix(),
	})
	if err != nil {
		return ApprovalRequest{}, s.internalError("signing the receipt", err)
	}
	rec.Status, rec.DecidedAt, rec.Approver, rec.Receipt = decision, now.UTC(), a.ID, receipt
	a.Credentials[i].SignCount = count
	if p := s.persistLocked(func() {
		rec.Status, rec.DecidedAt, rec.Approver, rec.Receipt = StatusPending, time.Time{}, "", ""
		a.Credentials[i].SignCount = stored
	}); p != nil {
		return ApprovalRequest{}, p
	}
	for _, c := range s.st.perRequest[rec.ID] {
		delete(s.st.challenges, c)
	}
	delete(s.st.perRequest, rec.ID)
	return s.view(rec, now), nil
}

func counterRegression() *problem {
	return refuse(http.StatusForbidden, CodeCounterRegression, "the passkey's signature counter did not advance: the authenticator may be cloned")
}
