// Package grant holds Clearance's signing keys and the tokens signed with
// them: execution grants, claim attestations and verification envelopes; and
// it verifies the tokens others sign: agents' execution intents, providers'
// effect receipts and approval services' sealed approval receipts.
//
// # Keys
//
// A Key is an Ed25519 signing key. Its kid is the RFC 7638 JWK thumbprint
// (SHA-256, base64url without padding) of its public OKP/Ed25519 JWK, so a
// kid names exactly one public key and anyone holding the JWKS can recompute
// it. The zero Key is not a key: it has no kid and refuses to sign.
//
// A KeyRing is the active Key plus previous keys, each kept until KeepUntil:
// the moment the last grant it could have signed has expired and the longest
// claim lease after it has run out. Rings are immutable values; Rotate,
// Revoke and Prune return new rings, so a *KeyRing may be shared between
// goroutines. JWKS publishes, and Lookup (hence every Verify) accepts, the
// active key and every previous key whose KeepUntil is still in the future;
// a revoked key (one that leaked) is neither published nor accepted from the
// moment the ring holding its revocation is in use. JWKS never holds a
// private member.
//
// # Registered public keys
//
// ParsePublicJWK and ValidatePublicKey are the only doors through which
// foreign Ed25519 public keys (provider and agent keys) enter. A key that
// passes is exactly 32 bytes, a canonical encoding of a point on the curve,
// and not one of the eight low-order points (the identity among them, which
// "verifies" forged signatures). A JWK that carries any private member is
// refused with ErrPrivateKeyMaterial before anything else is looked at.
//
// # Tokens
//
// Every token is a compact JWS signed with Ed25519 whose protected header is
// exactly {"alg":"EdDSA","kid":…,"typ":…}. Each kind has its own typ, its own
// audience and its own mint and verify functions, and one kind is never
// accepted as another:
//
//	kind                  typ                              aud                   functions
//	execution grant       clearance-grant+jwt              clearance-execution   Mint, Verify
//	claim attestation     clearance-claim-attestation+jwt  clearance-downstream  MintAttestation, VerifyAttestation
//	verification envelope clearance-decision+jwt           agent-safe-pipeline   MintEnvelope, VerifyEnvelope
//	execution intent      clearance-intent+jwt             (none)                SignIntent, VerifyIntent
//	effect receipt (VP-3) clearance-effect-receipt+jwt     (none)                SignReceipt, VerifyReceipt
//	approval receipt      clearance-approval-receipt+jwt   clearance-escalation  SignApprovalReceipt, VerifyApprovalReceipt
//
// Verification refuses, each with a *TokenError wrapping a sentinel: any
// serialization but the compact one, base64url that is padded or not
// canonical, an alg other than EdDSA (none and HS256 included), a missing or
// other typ, any header member besides alg, kid and typ (jku, x5u, jwk, x5c
// and crit above all: a token never chooses its own key), an unknown kid, a
// signature that does not verify, and only then (the payload is never read
// before its signature verifies) a payload with duplicate or unknown members,
// the wrong aud or iss, missing claims, or a lifetime that does not hold:
// valid iff nbf <= now < exp in Unix seconds, with no leeway, and iat no
// later than now plus the clock skew the verifier tolerates
// (VerifyOptions.MaxFutureIssuedAt, none by default; an issuer whose own
// records judge a token's use may skip these checks, IgnoreLifetime). Mint
// functions check the same claims, so they never sign what Verify would
// refuse.
//
// Intents and receipts are verified with keys the org registered, looked up
// by a function that returns an error wrapping ErrUnknownKey for an unknown
// or revoked kid; other lookup errors pass through unchanged. A receipt's
// iss must be the issuer registered with its key (ReceiptKey.Issuer).
//
// # Verifying offline with any JOSE library
//
// Downstream systems check claim attestations (and agent pipelines check
// verification envelopes) without calling Clearance:
//
//  1. Fetch the JWKS from /.well-known/clearance-execution-grant-jwks.json
//     (cache it; refetch when a kid is unknown). During a rotation the
//     previous key stays listed until the tokens it signed have expired.
//  2. Parse the token as compact JWS, allowing only alg EdDSA, and select the
//     key whose kid equals the header's kid; refuse a header that carries
//     jku, x5u, jwk, x5c or crit.
//  3. Require the kind's typ and, after the signature verifies, the kind's
//     aud (clearance-downstream for attestations, agent-safe-pipeline for
//     envelopes) and your expected iss.
//  4. Check exp with no leeway: the token is dead once now >= exp.
//  5. Check the request matches what the attestation describes (grant_id,
//     binding.intent_hash, act, …).
//
// With go-jose v4 alone (jwks is the fetched document, token the
// attestation; Example_offline runs this code):
//
//	var set jose.JSONWebKeySet
//	if err := json.Unmarshal(jwks, &set); err != nil {
//		return err
//	}
//	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
//	if err != nil || len(jws.Signatures) != 1 {
//		return errors.New("not one compact EdDSA JWS")
//	}
//	h := jws.Signatures[0].Protected // typ, jku, x5u and crit land in ExtraHeaders; an x5c is never used
//	keys := set.Key(h.KeyID)
//	if len(keys) != 1 || h.JSONWebKey != nil || len(h.ExtraHeaders) != 1 ||
//		h.ExtraHeaders[jose.HeaderType] != "clearance-claim-attestation+jwt" {
//		return errors.New("unknown kid or unexpected header")
//	}
//	payload, err := jws.Verify(keys[0].Key) // the key comes from the JWKS, never from the token
//	if err != nil {
//		return err
//	}
//	var c struct{ Aud, Iss string; Exp int64 } // add the members you match, e.g. grant_id
//	if err := json.Unmarshal(payload, &c); err != nil {
//		return err
//	}
//	if c.Aud != "clearance-downstream" || c.Iss != wantIssuer || time.Now().Unix() >= c.Exp {
//		return errors.New("wrong audience or issuer, or expired")
//	}
//
// # Purity
//
// The package does no file or network I/O and never reads the clock or
// crypto/rand: randomness is an io.Reader argument and time is a time.Time
// argument. Key files live in cmd/clearance/internal/keyfile.
package grant
