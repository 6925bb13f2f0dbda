package execution

// Codes of the execution lifecycle.
const (
	CodeGrantInvalid        = "GRANT_INVALID"
	CodeGrantExpired        = "GRANT_EXPIRED"
	CodeGrantNotBound       = "GRANT_NOT_BOUND"
	CodeBindingMismatch     = "BINDING_MISMATCH"
	CodeGrantAlreadyClaimed = "GRANT_ALREADY_CLAIMED"
	CodeDossierMismatch     = "DOSSIER_SIGNATURE_MISMATCH"
	CodeInvalidFinalization = "INVALID_FINALIZATION"
	CodeInvalidEvidence     = "INVALID_EFFECT_EVIDENCE"
	// CodeInvalidDispatch: a dispatch with a missing or malformed field.
	CodeInvalidDispatch = "INVALID_DISPATCH"
)
