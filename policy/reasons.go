package policy

// Reason codes emitted by the evaluator itself, and the codes the starter
// policy uses. Rules may use any UPPER_SNAKE code except the reserved ones
// (PROTOCOL_OUTCOME_*, POLICY_MATCHED, NO_RULE_MATCHED, EVALUATION_ERROR),
// which only the evaluator emits.
const (
	ReasonPolicyMatched         = "POLICY_MATCHED"
	ReasonNoRuleMatched         = "NO_RULE_MATCHED"
	ReasonOutcomeAllow          = "PROTOCOL_OUTCOME_ALLOW"
	ReasonOutcomeEscalate       = "PROTOCOL_OUTCOME_ESCALATE"
	ReasonOutcomeReviewRequired = "PROTOCOL_OUTCOME_REVIEW_REQUIRED"
	ReasonOutcomeBlock          = "PROTOCOL_OUTCOME_BLOCK"
	ReasonApprovalVerified      = "APPROVAL_VERIFIED"
	ReasonEvaluationError       = "EVALUATION_ERROR"
	ReasonAmountMissing         = "AMOUNT_MISSING"
	ReasonAmountBelowEscalation = "AMOUNT_BELOW_ESCALATION_THRESHOLD"
	ReasonAmountEscalationBand  = "AMOUNT_IN_ESCALATION_BAND"
	ReasonAmountBlock           = "AMOUNT_AT_OR_ABOVE_BLOCK_THRESHOLD"
)

const (
	reasonOutcomePrefix = "PROTOCOL_OUTCOME_"
	maxReasonCodeLen    = 100

	reasonCategoryProtocol       = "protocol"
	reasonCategoryPolicy         = "policy"
	reasonCategoryEvaluation     = "evaluation"
	reasonCategoryStarterAmount  = "starter.amount"
	reasonCategoryStarterApprove = "starter.approval"
)

// ReasonCode documents one code of the vocabulary.
type ReasonCode struct {
	Code        string `json:"code"`
	Description string `json:"description"`
	Category    string `json:"category"`
}

var vocabulary = [...]ReasonCode{
	{ReasonOutcomeAllow, "The decision's outcome is ALLOW; always the first code.", reasonCategoryProtocol},
	{ReasonOutcomeEscalate, "The decision's outcome is ESCALATE; always the first code.", reasonCategoryProtocol},
	{ReasonOutcomeReviewRequired, "The decision's outcome is REVIEW_REQUIRED; always the first code.", reasonCategoryProtocol},
	{ReasonOutcomeBlock, "The decision's outcome is BLOCK; always the first code.", reasonCategoryProtocol},
	{ReasonPolicyMatched, "At least one rule matched; the codes that follow are those of the rules with the winning outcome, in rule order.", reasonCategoryPolicy},
	{ReasonNoRuleMatched, "No rule matched; the bundle default decided and its codes follow.", reasonCategoryPolicy},
	{ReasonEvaluationError, "Evaluation failed (CEL runtime error, cost limit, invalid input); the decision fails closed to BLOCK.", reasonCategoryEvaluation},
	{ReasonAmountMissing, "Starter policy: the request carries no amount.", reasonCategoryStarterAmount},
	{ReasonAmountBelowEscalation, "Starter policy: amount < 1,000.", reasonCategoryStarterAmount},
	{ReasonAmountEscalationBand, "Starter policy: 1,000 <= amount < 10,000.", reasonCategoryStarterAmount},
	{ReasonAmountBlock, "Starter policy: amount >= 10,000.", reasonCategoryStarterAmount},
	{ReasonApprovalVerified, "Verified approval evidence accompanied the request and a rule relied on it.", reasonCategoryStarterApprove},
}

// ReasonCodes returns the documented vocabulary: the codes the evaluator
// emits and those of the starter policy. Bundles may add their own codes.
// The slice is a fresh copy.
func ReasonCodes() []ReasonCode {
	out := make([]ReasonCode, len(vocabulary))
	copy(out, vocabulary[:])
	return out
}

// outcomeReason returns the PROTOCOL_OUTCOME_* code of o.
func outcomeReason(o Outcome) string {
	switch o {
	case OutcomeAllow:
		return ReasonOutcomeAllow
	case OutcomeEscalate:
		return ReasonOutcomeEscalate
	case OutcomeReviewRequired:
		return ReasonOutcomeReviewRequired
	}
	return ReasonOutcomeBlock
}

// reservedReason reports whether code may only be emitted by the evaluator.
func reservedReason(code string) bool {
	switch code {
	case ReasonPolicyMatched, ReasonNoRuleMatched, ReasonEvaluationError, ReasonSpendLimitExceeded, ReasonSpendCurrencyMismatch:
		return true
	}
	return len(code) >= len(reasonOutcomePrefix) && code[:len(reasonOutcomePrefix)] == reasonOutcomePrefix
}

// validReasonCode reports whether code matches ^[A-Z][A-Z0-9_]*$ and is at
// most maxReasonCodeLen bytes.
func validReasonCode(code string) bool {
	if code == "" || len(code) > maxReasonCodeLen || code[0] < 'A' || code[0] > 'Z' {
		return false
	}
	for i := 1; i < len(code); i++ {
		c := code[i]
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
