// Package escalation is Clearance's managed escalation: an ESCALATE in
// ENFORCEMENT of an intent with escalation.mode MANAGED becomes an
// action-bound approval request at the org's approval service, and only a
// human approval verified DIRECTLY with that service — the service's own
// record of the request and its sealed receipt, checked against the
// service's published keys — leads to a fresh evaluation of the original
// exact intent with the approval as evidence. Only ALLOW in ENFORCEMENT
// then issues a grant, exactly one per escalation. An approval is never
// authority by itself; a completion hint carries none either.
//
// States (State): PENDING_APPROVAL → VERIFYING (a completion arrived but
// the service could not be asked yet; retried) → GRANT_READY (the fresh
// evaluation allowed; the status carries the grant), or a terminal
// refusal: DENIED (the approver denied), EXPIRED (no approval by the
// deadline, or the service expired the request), CANCELLED (DELETE, or the
// service cancelled it), FAILED (the approval failed verification, was
// revoked, or the fresh evaluation did not allow). Every transition is
// stored with a ledger entry (escalation.opened, escalation.verifying,
// escalation.grant_ready, …) in the same unit as the change.
//
// The service also verifies approval evidence presented with an intent
// (decide.Approvals) and re-resolves, at claim time, the approval a grant
// was issued on (execution.Approvals). Its status never shows the approval
// page's locator, the service's credential, assertions or any biometric
// material. Failures never authorize: an unreachable approval service is
// a non-authorizing 503, evidence that does not verify a 409.
package escalation
