package federation

// Codes of federation.
const (
	// CodeFederatedDecisionInvalid: a presented federated decision does not
	// verify (errors[] names federated_decisions[i] and why); nothing was
	// recorded (400).
	CodeFederatedDecisionInvalid = "FEDERATED_DECISION_INVALID"
	// CodeFederationIssuerUnavailable: the JWKS of a trusted issuer could
	// not be fetched or read; nothing was recorded (503).
	CodeFederationIssuerUnavailable = "FEDERATION_ISSUER_UNAVAILABLE"
	// CodeInvalidTrustedIssuer: a trust list entry breaks a rule of its
	// members (errors[] names each field) (400).
	CodeInvalidTrustedIssuer = "INVALID_TRUSTED_ISSUER"
	// CodeInvalidIssuerID: the {issuerId} path segment is not 1 to 255
	// visible ASCII characters (400).
	CodeInvalidIssuerID = "INVALID_ISSUER_ID"
	// CodeTrustedIssuerNotFound: the org's trust list has no such issuer
	// (404).
	CodeTrustedIssuerNotFound = "TRUSTED_ISSUER_NOT_FOUND"
	// CodeTrustedIssuerLimitReached: the org trusts MaxTrustedIssuers
	// issuers already (409).
	CodeTrustedIssuerLimitReached = "TRUSTED_ISSUER_LIMIT_REACHED"
	// CodeInvalidEnvelopeRequest: an envelope request breaks a rule of its
	// members (400).
	CodeInvalidEnvelopeRequest = "INVALID_ENVELOPE_REQUEST"
	// CodeDecisionNotFederable: the recorded decision's intent cannot be
	// read back to compute its digest (409).
	CodeDecisionNotFederable = "DECISION_NOT_FEDERABLE"
	// CodePrivateKeyMaterial: an inline JWKS holds a private key member
	// (400).
	CodePrivateKeyMaterial = "PRIVATE_KEY_MATERIAL"
)
