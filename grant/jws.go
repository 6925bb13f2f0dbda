package grant

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/clearancehq/clearance/internal/strictjson"
)

// MaxTokenSize is the longest token (grant, attestation, envelope, intent or
// receipt) any verify function reads; longer input is ErrTokenMalformed.
const MaxTokenSize = 1 << 20

// AlgEdDSA is the only JWS algorithm Clearance signs with or accepts.
const AlgEdDSA = "EdDSA"

// b64url is unpadded base64url that refuses non-zero trailing bits, so every
// token has exactly one encoding. It still skips CR and LF, which
// validSegment rules out first.
var b64url = base64.RawURLEncoding.Strict()

// jwsHeader is the whole protected header Clearance writes and accepts:
// every other member is refused. Pointers tell absent from empty.
type jwsHeader struct {
	Alg *string `json:"alg"`
	Kid *string `json:"kid"`
	Typ *string `json:"typ"`
}

// compactJWS is a parsed compact JWS whose header has passed its checks.
// Nothing in payload may be trusted before verifySignature succeeds.
type compactJWS struct {
	kid          string
	signingInput string // "<header>.<payload>" exactly as received
	payload      []byte
	sig          []byte
}

// signCompact returns the compact JWS of payload with the protected header
// {"alg":"EdDSA","kid":<s.KeyID()>,"typ":<typ>}.
func signCompact(s Signer, typ string, payload []byte) (string, error) {
	kid := s.KeyID()
	if kid == "" {
		return "", fmt.Errorf("%w: signer has no kid", ErrInvalidKey)
	}
	alg := AlgEdDSA
	h, err := json.Marshal(jwsHeader{Alg: &alg, Kid: &kid, Typ: &typ})
	if err != nil {
		return "", fmt.Errorf("grant: encoding JWS header: %w", err)
	}
	hl, pl := b64url.EncodedLen(len(h)), b64url.EncodedLen(len(payload))
	buf := make([]byte, hl+1+pl, hl+1+pl+1+b64url.EncodedLen(ed25519.SignatureSize))
	b64url.Encode(buf, h)
	buf[hl] = '.'
	b64url.Encode(buf[hl+1:], payload)
	sig, err := s.Sign(buf)
	if err != nil {
		return "", err
	}
	if len(sig) != ed25519.SignatureSize {
		return "", fmt.Errorf("%w: signer returned a %d-byte signature", ErrInvalidKey, len(sig))
	}
	buf = append(buf, '.')
	buf = b64url.AppendEncode(buf, sig)
	return string(buf), nil
}

// parseCompact splits token into its three segments, decodes them and checks
// the header: only alg, kid and typ; alg EdDSA; typ equal to typ; a kid; a
// 64-byte signature. The kid is returned whenever the header decoded, even
// with an error, so a caller can record which key a refused token named.
func parseCompact(token, typ string) (compactJWS, error) {
	var j compactJWS
	if len(token) > MaxTokenSize {
		return j, tokenError(ErrTokenMalformed, "token is longer than %d bytes", MaxTokenSize)
	}
	if strings.Count(token, ".") != 2 {
		return j, tokenError(ErrTokenMalformed, "not a compact JWS (want three dot-separated segments)")
	}
	first := strings.IndexByte(token, '.')
	last := strings.LastIndexByte(token, '.')
	hSeg, pSeg, sSeg := token[:first], token[first+1:last], token[last+1:]
	if hSeg == "" || pSeg == "" {
		return j, tokenError(ErrTokenMalformed, "empty header or payload segment")
	}
	hb, err := decodeSegment(hSeg, "header")
	if err != nil {
		return j, err
	}
	var h jwsHeader
	if err := strictjson.Decode(hb, &h, strictjson.Options{RejectUnknown: true}); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && se.Code == strictjson.CodeUnknownMember {
			return j, tokenError(ErrTokenHeader, "header member %s is not allowed (only alg, kid and typ)", strings.TrimPrefix(se.Field, "/"))
		}
		return j, tokenError(ErrTokenMalformed, "header: %v", err)
	}
	if h.Kid != nil {
		j.kid = *h.Kid
	}
	if h.Alg == nil || *h.Alg != AlgEdDSA {
		alg := "none given"
		if h.Alg != nil {
			alg = fmt.Sprintf("%q", *h.Alg)
		}
		return j, tokenError(ErrTokenAlgorithm, "alg %s, want %q", alg, AlgEdDSA)
	}
	if h.Typ == nil || *h.Typ != typ {
		got := "none given"
		if h.Typ != nil {
			got = fmt.Sprintf("%q", *h.Typ)
		}
		return j, tokenError(ErrTokenType, "typ %s, want %q", got, typ)
	}
	if j.kid == "" {
		return j, tokenError(ErrTokenHeader, "the header has no kid")
	}
	if j.payload, err = decodeSegment(pSeg, "payload"); err != nil {
		return j, err
	}
	if j.sig, err = decodeSegment(sSeg, "signature"); err != nil {
		return j, err
	}
	if len(j.sig) != ed25519.SignatureSize {
		return j, tokenError(ErrTokenSignature, "signature is %d bytes, want %d", len(j.sig), ed25519.SignatureSize)
	}
	j.signingInput = token[:last]
	return j, nil
}

// decodeSegment decodes one unpadded base64url segment, refusing any byte
// outside the base64url alphabet (the decoder would skip CR and LF).
func decodeSegment(seg, name string) ([]byte, error) {
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, tokenError(ErrTokenMalformed, "%s segment is not unpadded base64url", name)
		}
	}
	b, err := b64url.DecodeString(seg)
	if err != nil {
		return nil, tokenError(ErrTokenMalformed, "%s segment is not canonical base64url", name)
	}
	return b, nil
}

// verifySignature checks j's signature with pub, checking pub's length first
// (ed25519.Verify panics on a wrong-length key).
func verifySignature(j compactJWS, pub ed25519.PublicKey) error {
	if len(pub) != ed25519.PublicKeySize {
		return tokenError(ErrUnknownKey, "the key for kid %q is not a %d-byte Ed25519 public key", j.kid, ed25519.PublicKeySize)
	}
	if !ed25519.Verify(pub, []byte(j.signingInput), j.sig) {
		return tokenError(ErrTokenSignature, "signature does not verify with kid %q", j.kid)
	}
	return nil
}

// lookupPublic resolves j's kid through lookup. An error wrapping
// ErrUnknownKey becomes a *TokenError with that code; any other error (a
// store that cannot answer) is returned wrapped, not as a *TokenError, so the
// caller can tell "no such key" from "could not look".
func lookupPublic(j compactJWS, lookup func(kid string) (ed25519.PublicKey, error)) (ed25519.PublicKey, error) {
	if lookup == nil {
		return nil, tokenError(ErrUnknownKey, "no key lookup for kid %q", j.kid)
	}
	pub, err := lookup(j.kid)
	if errors.Is(err, ErrUnknownKey) {
		return nil, tokenError(ErrUnknownKey, "kid %q: %w", j.kid, err)
	}
	if err != nil {
		return nil, fmt.Errorf("grant: looking up key %q: %w", j.kid, err)
	}
	if pub == nil {
		return nil, tokenError(ErrUnknownKey, "kid %q", j.kid)
	}
	return pub, nil
}

// decodePayload decodes a verified payload strictly into v: duplicate or
// unknown members, invalid UTF-8 and trailing data are refused.
func decodePayload(payload []byte, v any) error {
	err := strictjson.Decode(payload, v, strictjson.Options{RejectUnknown: true})
	if err == nil {
		return nil
	}
	var se *strictjson.Error
	if errors.As(err, &se) && (se.Code == strictjson.CodeUnknownMember || se.Code == strictjson.CodeWrongType) {
		return tokenError(ErrTokenClaims, "payload: %v", err)
	}
	return tokenError(ErrTokenMalformed, "payload: %v", err)
}
