package onboarding

// Codes of this feature's refusals.
const (
	CodeOTPInvalid          = "OTP_INVALID"
	CodeTooManyCodes        = "TOO_MANY_CODES"
	CodeMailNotConfigured   = "MAIL_NOT_CONFIGURED"
	CodeMailUnavailable     = "MAIL_UNAVAILABLE"
	CodeSessionNotFound     = "MAPPING_SESSION_NOT_FOUND"
	CodeSessionLimitReached = "MAPPING_SESSION_LIMIT_REACHED"
	CodeSignInRequired      = "SIGN_IN_REQUIRED"
	CodeWorkspaceNotFound   = "WORKSPACE_NOT_FOUND"
	CodeBundleAlreadyIssued = "BUNDLE_ALREADY_ISSUED"
)

// OAuth error codes (RFC 6749 §4.1.2.1 and §5.2) of the automation
// connector's authorization and token endpoints: they are the "error" of
// an OAuth answer, not problem codes.
const (
	OAuthInvalidRequest          = "invalid_request"
	OAuthUnsupportedResponseType = "unsupported_response_type"
	OAuthAccessDenied            = "access_denied"
	OAuthInvalidGrant            = "invalid_grant"
	OAuthUnsupportedGrantType    = "unsupported_grant_type"
)
