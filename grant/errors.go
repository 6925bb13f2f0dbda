package grant

import (
	"errors"
	"github.com/clearancehq/clearance/internal/coded"
)

// Sentinel errors. Functions wrap them with detail; compare with errors.Is.
var (
	// ErrInvalidKey: a key is malformed (wrong type, curve or length, not a
	// canonical point on Ed25519, malformed JWK) or is the zero Key.
	ErrInvalidKey = errors.New("grant: invalid key")

	// ErrWeakKey: an Ed25519 public key is a low-order point.
	ErrWeakKey = errors.New("grant: weak key (low-order point)")

	// ErrPrivateKeyMaterial: a key offered as public carries private material.
	ErrPrivateKeyMaterial = errors.New("grant: private key material")
)

// Token sentinel errors. Every token verification failure is a *TokenError
// that wraps exactly one of them; compare with errors.Is and read the stable
// machine code with (*TokenError).Code.
var (
	// ErrTokenMalformed: not one compact JWS of strict base64url segments
	// with a strict JSON header and payload (duplicate members, invalid UTF-8
	// and trailing data are malformed).
	ErrTokenMalformed = errors.New("grant: malformed token")

	// ErrTokenAlgorithm: the header's alg is missing or is not EdDSA.
	ErrTokenAlgorithm = errors.New("grant: token algorithm not allowed")

	// ErrTokenType: the header's typ is missing or names another kind of
	// token.
	ErrTokenType = errors.New("grant: wrong token type")

	// ErrTokenHeader: the header has a member other than alg, kid and typ
	// (jku, x5u, jwk, x5c and crit above all), or has no kid.
	ErrTokenHeader = errors.New("grant: forbidden token header")

	// ErrUnknownKey: no verification key has the header's kid. Key lookup
	// functions passed to VerifyIntent and VerifyReceipt return an error
	// wrapping it for an unknown or revoked kid.
	ErrUnknownKey = errors.New("grant: unknown signing key")

	// ErrTokenSignature: the signature does not verify.
	ErrTokenSignature = errors.New("grant: invalid token signature")

	// ErrTokenAudience: aud is not the audience of the token's kind.
	ErrTokenAudience = errors.New("grant: wrong token audience")

	// ErrTokenIssuer: iss is not the expected issuer.
	ErrTokenIssuer = errors.New("grant: wrong token issuer")

	// ErrTokenExpired: now is at or after exp.
	ErrTokenExpired = errors.New("grant: token expired")

	// ErrTokenNotYetValid: now is before nbf, or iat is later than now plus
	// the tolerated clock skew (VerifyOptions.MaxFutureIssuedAt).
	ErrTokenNotYetValid = errors.New("grant: token not yet valid")

	// ErrTokenClaims: a required claim is missing or a claim has the wrong
	// type, an unknown name or a malformed value.
	ErrTokenClaims = errors.New("grant: invalid token claims")
)

// Stable machine codes of the token sentinels, as (*TokenError).Code
// reports them.
const (
	CodeTokenMalformed     = "TOKEN_MALFORMED"
	CodeTokenAlgorithm     = "TOKEN_ALGORITHM"
	CodeTokenType          = "TOKEN_TYPE"
	CodeTokenHeader        = "TOKEN_HEADER_FORBIDDEN"
	CodeUnknownKey         = "TOKEN_UNKNOWN_KEY"
	CodeTokenSignature     = "TOKEN_SIGNATURE"
	CodeTokenAudience      = "TOKEN_AUDIENCE"
	CodeTokenIssuer        = "TOKEN_ISSUER"
	CodeTokenExpired       = "TOKEN_EXPIRED"
	CodeTokenNotYetValid   = "TOKEN_NOT_YET_VALID"
	CodeTokenClaimsInvalid = "TOKEN_CLAIMS_INVALID"
)

var tokenCodes = map[error]string{
	ErrTokenMalformed:   CodeTokenMalformed,
	ErrTokenAlgorithm:   CodeTokenAlgorithm,
	ErrTokenType:        CodeTokenType,
	ErrTokenHeader:      CodeTokenHeader,
	ErrUnknownKey:       CodeUnknownKey,
	ErrTokenSignature:   CodeTokenSignature,
	ErrTokenAudience:    CodeTokenAudience,
	ErrTokenIssuer:      CodeTokenIssuer,
	ErrTokenExpired:     CodeTokenExpired,
	ErrTokenNotYetValid: CodeTokenNotYetValid,
	ErrTokenClaims:      CodeTokenClaimsInvalid,
}

// TokenError is a refusal: Err wraps one sentinel with detail; Code() is its
// stable machine code.
type TokenError = coded.Error

// tokenError wraps sentinel with detail formatted from format and args (which may
// contain more %w verbs for causes).
func tokenError(sentinel error, format string, args ...any) *TokenError {
	return coded.New(tokenCodes[sentinel], sentinel, format, args...)
}
