// Package approver is the reference approval service of Clearance's
// managed escalation: when a policy says ESCALATE, Clearance opens an
// action-bound approval request here; a human approves or denies it with a
// passkey (a WebAuthn assertion whose authenticator verified the user, not
// a click); the service records the first decision and seals it in a
// receipt (grant.SignApprovalReceipt), and Clearance verifies the decision
// by asking the service directly. The binary is cmd/clearance-approver;
// docs/approver.md describes running it.
//
// # API for Clearance
//
// Every call carries Authorization: Bearer <credential>, and each
// credential is bound to one org (Options.Credentials). Bodies are decoded
// strictly (unknown or duplicate members, invalid UTF-8 and trailing data
// are refused) and capped; refusals are RFC 9457 problem bodies
// {type, title, status, code, detail} with the codes of errors.go.
//
//	POST   /v1/approval-requests                      OpenRequest → 201 ApprovalRequest (200 on a replay)
//	GET    /v1/approval-requests/{request_id}         → 200 ApprovalRequest
//	DELETE /v1/approval-requests/{request_id}         cancel a PENDING request → 200
//	POST   /v1/approval-requests/{request_id}/revoke  APPROVED → REVOKED → 200
//	POST   /v1/approvers                              EnrollApprover → 201 Enrollment
//	GET    /.well-known/jwks.json                     the receipt key (no authentication)
//
// # Pages for humans
//
// An approval request's ApprovalURL (/approve/{token}) shows the action,
// amount, target, workflow, actor, intent hash, expiry and status, with
// Approve and Deny buttons; an Enrollment's EnrollmentURL (/enroll/{token})
// registers a passkey. The pages are server-rendered, run one embedded
// script under a strict Content-Security-Policy, and load nothing from
// elsewhere. Their ceremonies use github.com/go-webauthn/webauthn:
//
//   - Registration: user verification required, a discoverable credential
//     preferred, attestation "none"; the link works once and expires.
//   - Approval: POST /approve/{token}/begin {"decision"} answers assertion
//     options with a fresh challenge that is bound to this request and this
//     decision, used once, and allows the passkeys of the org's approvers;
//     POST /approve/{token}/finish {"decision", "assertion"} verifies it
//     (user verified flag set, origin, relying party, signature, the
//     signature counter advancing) and records the decision. The first
//     decision wins; later ones, and any on an expired or cancelled
//     request, are refused with 409.
//
// # Receipts
//
// A decision's receipt is a compact JWS (typ clearance-approval-receipt+jwt)
// signed with Options.SigningKey, whose payload names the issuer
// (Options.Issuer), the request, org, intent hash, the approver_id whose
// passkey signed, the decision, presence webauthn-uv and the time. It never
// carries the assertion or the credential. grant.VerifyApprovalReceipt
// checks it against the JWKS.
//
// # State
//
// Requests, approvers and their passkeys' public keys and counters, and
// open enrollment links (as SHA-256 hashes) are kept in memory and, with
// Options.Store, written whole to durable storage on every change
// (FileStore: an atomically renamed, fsynced JSON file). Ceremonies in
// flight are memory only. The API never shows credentials, passkeys,
// assertions or enrollment tokens.
//
// Options.OnDecision observes decisions; CompletionNotifier.Notify sends
// Clearance a completion hint from it, in the background.
package approver
