package decide

// Codes of decision requests and signed execution intents.
const (
	CodeInvalidParentDecision = "INVALID_PARENT_DECISION"
	CodeParentDecisionUnknown = "PARENT_DECISION_UNKNOWN"

	CodeIntentMalformed    = "INTENT_MALFORMED"
	CodeIntentSignature    = "INTENT_SIGNATURE_INVALID"
	CodeIntentNotCanonical = "INTENT_NOT_CANONICAL"
	CodeIntentIDMismatch   = "IDEMPOTENCY_KEY_NOT_INTENT_ID"
	CodeIntentAlreadyBound = "INTENT_ID_ALREADY_BOUND"
	CodeApprovalUnverified = "APPROVAL_EVIDENCE_UNVERIFIED"
	CodeIntentStale        = "INTENT_STALE"
	CodeIntentNotYetValid  = "INTENT_NOT_YET_VALID"
	// CodeClockSkew: the engine's clock is more than MaxClockSkew off the
	// store's, so no grant is issued (503).
	CodeClockSkew = "CLOCK_SKEW"
)
