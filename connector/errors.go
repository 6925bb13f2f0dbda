package connector

// OAuth error codes (RFC 6749 §4.1.2.1 and §5.2) of the authorization and
// token endpoints: they are the "error" of an OAuth answer, not problem
// codes.
const (
	OAuthInvalidRequest          = "invalid_request"
	OAuthUnsupportedResponseType = "unsupported_response_type"
	OAuthAccessDenied            = "access_denied"
	OAuthInvalidGrant            = "invalid_grant"
	OAuthUnsupportedGrantType    = "unsupported_grant_type"
)
