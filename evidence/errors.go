package evidence

// Codes of the evidence that follows a decision.
const (
	CodeChainNotFound         = "CHAIN_NOT_FOUND"
	CodeInvalidOverride       = "INVALID_OVERRIDE"
	CodeOverrideNotApplicable = "OVERRIDE_NOT_APPLICABLE"
)

// KindOverride is the artifact kind of a human resolution of a dossier (Ref
// the dossier id).
const KindOverride = "override"
