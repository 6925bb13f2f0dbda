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
