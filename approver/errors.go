package approver

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// The stable codes of the service's problem bodies. They are the approval
// service's own, not Clearance's: the Clearance API and its openapi.yaml do
// not list them (docs/approver.md does).
const (
	// CodeUnauthorized: no Bearer credential, or one the service does not know (401).
	CodeUnauthorized = "UNAUTHORIZED"
	// CodeOrgMismatch: the body names an org other than the credential's (403).
	CodeOrgMismatch = "ORG_MISMATCH"
	// CodeNotFound: no such request, or another org's (404); also unknown routes.
	CodeNotFound = "NOT_FOUND"
	// CodeLinkInvalid: an approval or enrollment link that is unknown, used or expired (404).
	CodeLinkInvalid = "LINK_INVALID"
	// CodeMethodNotAllowed: the path is known, the method is not (405).
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	// CodeBodyTooLarge: the request body is over the limit (413).
	CodeBodyTooLarge = "BODY_TOO_LARGE"
	// CodeMissingField: a required member is absent or empty (400).
	CodeMissingField = "MISSING_FIELD"
	// CodeInvalidField: a member's value is malformed: too long, control
	// characters, not a decimal amount (400).
	CodeInvalidField = "INVALID_FIELD"
	// CodeInvalidIntentHash: intent_hash is not sha256:<64 lowercase hex> (400).
	CodeInvalidIntentHash = "INVALID_INTENT_HASH"
	// CodeInvalidExpiresAt: expires_at is not an RFC 3339 time (400).
	CodeInvalidExpiresAt = "INVALID_EXPIRES_AT"
	// CodeExpiresAtPast: expires_at is not in the future (400).
	CodeExpiresAtPast = "EXPIRES_AT_PAST"
	// CodeExpiresAtTooFar: expires_at is beyond the longest lifetime the service allows (400).
	CodeExpiresAtTooFar = "EXPIRES_AT_TOO_FAR"
	// CodeEscalationConflict: the escalation id was opened before with another body (409).
	CodeEscalationConflict = "ESCALATION_CONFLICT"
	// CodeInvalidDecision: decision is neither APPROVED nor DENIED (400).
	CodeInvalidDecision = "INVALID_DECISION"
	// CodeAlreadyDecided: a decision was recorded before: the first one wins (409).
	CodeAlreadyDecided = "ALREADY_DECIDED"
	// CodeRequestExpired: the request reached its expires_at undecided (409).
	CodeRequestExpired = "REQUEST_EXPIRED"
	// CodeRequestCancelled: Clearance cancelled the request (409).
	CodeRequestCancelled = "REQUEST_CANCELLED"
	// CodeNoApprovers: the org has no approver with a passkey (409).
	CodeNoApprovers = "NO_APPROVERS"
	// CodeChallengeInvalid: the ceremony's challenge is unknown, used,
	// expired, or was issued for another request, decision or enrollment (400).
	CodeChallengeInvalid = "CHALLENGE_INVALID"
	// CodeCredentialInvalid: the WebAuthn response is malformed (400).
	CodeCredentialInvalid = "CREDENTIAL_INVALID"
	// CodeUnknownCredential: the passkey is not one of the org's approvers' (403).
	CodeUnknownCredential = "UNKNOWN_CREDENTIAL"
	// CodeUserVerificationRequired: the authenticator did not verify the
	// user (no PIN or biometric): a passkey approval, not a tap (403).
	CodeUserVerificationRequired = "USER_VERIFICATION_REQUIRED"
	// CodeCounterRegression: the signature counter did not advance: the
	// authenticator may be cloned (403).
	CodeCounterRegression = "COUNTER_REGRESSION"
	// CodeAssertionRefused: the WebAuthn response failed verification
	// (signature, origin, relying party, flags) (403).
	CodeAssertionRefused = "ASSERTION_REFUSED"
	// CodeCredentialExists: the passkey being enrolled is already enrolled (409).
	CodeCredentialExists = "CREDENTIAL_EXISTS"
	// CodeUnsupportedMediaType: a page's POST is not application/json (415).
	CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
	// CodeInternal: the service failed, for example writing its state (500).
	CodeInternal = "INTERNAL"
)

// problem is a refusal: an HTTP status, a stable code and detail for a
// human. Handlers return it; writeProblem renders it as RFC 9457 JSON.
type problem struct {
	status int
	code   string
	detail string
}

func (p *problem) Error() string { return p.code + ": " + p.detail }

func refuse(status int, code, format string, args ...any) *problem {
	return &problem{status: status, code: code, detail: fmt.Sprintf(format, args...)}
}

// problemBody is the wire form of a problem.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

func writeProblem(w http.ResponseWriter, p *problem) {
	body, _ := json.Marshal(problemBody{Type: "about:blank", Title: http.StatusText(p.status), Status: p.status, Code: p.code, Detail: p.detail})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="clearance-approver"`)
	}
	w.WriteHeader(p.status)
	_, _ = w.Write(append(body, '\n'))
}
