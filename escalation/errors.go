package escalation

// Codes of the escalation routes.
const (
	// CodeEscalationNotFound: no escalation of the org has the id.
	CodeEscalationNotFound = "ESCALATION_NOT_FOUND"
	// CodeInvalidEscalationID: the id is not a canonical UUID.
	CodeInvalidEscalationID = "INVALID_ESCALATION_ID"
	// CodeCompletionMismatch: the completion names another approval
	// request than the escalation's.
	CodeCompletionMismatch = "COMPLETION_REQUEST_MISMATCH"
	// CodeEscalationConcluded: a completion for an escalation that ended
	// without a grant (denied, expired, cancelled, failed).
	CodeEscalationConcluded = "ESCALATION_CONCLUDED"
	// CodeApprovalRevoked: the approval a grant was issued on was revoked
	// (or is otherwise no longer an approval) at the approval service.
	CodeApprovalRevoked = "APPROVAL_REVOKED"
	// CodeApprovalReceiptReused: the receipt was already evidence for
	// another intent or escalation.
	CodeApprovalReceiptReused = "APPROVAL_RECEIPT_REUSED"
	// CodeInvalidEvidence: approval_evidence is not {request_id, receipt}.
	CodeInvalidEvidence = "INVALID_APPROVAL_EVIDENCE"
)

// Reasons an escalation ended, recorded with its terminal state.
const (
	ReasonApproverDenied      = "APPROVER_DENIED"
	ReasonDeadlinePassed      = "DEADLINE_PASSED"
	ReasonRequestExpired      = "APPROVAL_REQUEST_EXPIRED"
	ReasonCancelled           = "CANCELLED_BY_CALLER"
	ReasonServiceCancelled    = "APPROVAL_REQUEST_CANCELLED"
	ReasonApprovalRevoked     = "APPROVAL_REVOKED"
	ReasonEvidenceInvalid     = "APPROVAL_EVIDENCE_INVALID"
	ReasonReceiptReused       = "APPROVAL_RECEIPT_REUSED"
	ReasonNotAllowedOnReentry = "REEVALUATION_NOT_ALLOWED"
	// ReasonSubjectErased: the escalation's data subject was erased before
	// its approval concluded it; its intent is gone, so it cannot be
	// evaluated again into a grant.
	ReasonSubjectErased = "SUBJECT_ERASED"
)
