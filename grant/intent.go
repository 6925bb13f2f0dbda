package grant

import (
	"crypto/ed25519"
)

// SignIntent signs payload as an execution intent with k: a compact JWS with
// the header {"alg":"EdDSA","kid":k.KID(),"typ":TypIntent}. payload is signed
// as given; Clearance accepts only RFC 8785 canonical JSON, so pass the JCS
// bytes of the intent. Agents sign their own intents; this is for tests,
// examples and the load tool.
func SignIntent(k Key, payload []byte) (string, error) {
	if len(payload) == 0 {
		return "", tokenError(ErrTokenClaims, "empty intent payload")
	}
	return signCompact(k, TypIntent, payload)
}

// VerifyIntent checks an agent-signed execution intent and returns its
// payload bytes exactly as signed, and the header's kid. The header must be
// exactly {alg EdDSA, kid, typ TypIntent}, under the same rules as Verify;
// the payload is not interpreted here: the caller requires it to be canonical
// JSON, decodes it strictly and hashes it.
//
// lookup returns the registered public key for a kid. For an unknown or
// revoked kid it must return an error wrapping ErrUnknownKey (VerifyIntent
// then returns a *TokenError with code TOKEN_UNKNOWN_KEY); any other error
// is returned wrapped as is, not as a *TokenError, so that "the store could
// not answer" stays distinguishable from "no such key". lookup should only
// return keys that passed ValidatePublicKey when they were registered.
//
// kid is returned whenever the header decoded, also with an error, so a
// caller can record which key a refused intent named.
func VerifyIntent(jws string, lookup func(kid string) (ed25519.PublicKey, error)) (payload []byte, kid string, err error) {
	j, err := parseCompact(jws, TypIntent)
	if err != nil {
		return nil, j.kid, err
	}
	pub, err := lookupPublic(j, lookup)
	if err != nil {
		return nil, j.kid, err
	}
	if err := verifySignature(j, pub); err != nil {
		return nil, j.kid, err
	}
	return j.payload, j.kid, nil
}
