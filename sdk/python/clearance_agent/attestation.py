"""Offline verification of claim attestations, for the downstream system.

A downstream system (the payment provider's adapter, the database writer)
runs ``verify_attestation`` before it commits an agent's action. It needs no
Clearance credentials: only the JWKS published at
``/.well-known/clearance-execution-grant-jwks.json`` (cache it; fetch it
again when a token names a kid it does not hold).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ._b64 import b64url_decode
from .errors import AttestationError

__all__ = ["verify_attestation", "TYP_ATTESTATION", "AUD_ATTESTATION"]

TYP_ATTESTATION = "clearance-claim-attestation+jwt"
AUD_ATTESTATION = "clearance-downstream"
_MAX_TOKEN = 1 << 20
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def verify_attestation(
    token: str,
    jwks: Mapping[str, Any] | str | bytes,
    *,
    intent_hash: str,
    issuer: str = "clearance",
    grant_id: str | None = None,
    now: float | None = None,
    max_future_iat: int = 60,
) -> dict[str, Any]:
    """Verify a claim attestation and return its claims.

    Accepted only if: it is a compact JWS whose protected header is exactly
    {alg, kid, typ} with alg EdDSA and typ clearance-claim-attestation+jwt; its
    kid names exactly one Ed25519 key of jwks (the key is never taken from
    the token); the signature verifies; the payload is a JSON object without
    repeated members whose aud is clearance-downstream and iss is issuer;
    ``now < exp`` with no leeway and iat at most max_future_iat seconds ahead;
    the claims a grant binds are present and well formed; and it binds
    intent_hash, the hash of the request about to execute (required: the
    JWKS signs for every org of the deployment, so a signature alone says
    nothing about which action was granted). When grant_id is given, the
    attestation must name exactly it too.

    Raises AttestationError with a code saying which check failed.
    """
    now = time.time() if now is None else now
    if not isinstance(token, str) or len(token) > _MAX_TOKEN:
        raise AttestationError("TOKEN_MALFORMED", "not a token of at most 1 MiB")
    parts = token.split(".")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise AttestationError("TOKEN_MALFORMED", "not a compact JWS")
    try:
        header = _strict_object(b64url_decode(parts[0]))
        payload_bytes = b64url_decode(parts[1])
        signature = b64url_decode(parts[2])
    except ValueError as e:
        raise AttestationError("TOKEN_MALFORMED", f"segment: {e}") from None
    if set(header) - {"alg", "kid", "typ"}:
        raise AttestationError("TOKEN_HEADER_FORBIDDEN", "header members other than alg, kid and typ")
    if header.get("alg") != "EdDSA":
        raise AttestationError("TOKEN_ALGORITHM", f"alg {header.get('alg')!r}, want 'EdDSA'")
    if header.get("typ") != TYP_ATTESTATION:
        raise AttestationError("TOKEN_TYPE", f"typ {header.get('typ')!r}, want {TYP_ATTESTATION!r}")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise AttestationError("TOKEN_HEADER_FORBIDDEN", "the header has no kid")
    if len(signature) != 64:
        raise AttestationError("TOKEN_SIGNATURE", "the signature is not 64 bytes")
    public = _key_for(jwks, kid)
    try:
        public.verify(signature, (parts[0] + "." + parts[1]).encode("ascii"))
    except InvalidSignature:
        raise AttestationError("TOKEN_SIGNATURE", f"the signature does not verify with kid {kid!r}") from None

    try:
        claims = _strict_object(payload_bytes)
    except ValueError as e:
        raise AttestationError("TOKEN_MALFORMED", f"payload: {e}") from None
    if claims.get("aud") != AUD_ATTESTATION:
        raise AttestationError("TOKEN_AUDIENCE", f"aud {claims.get('aud')!r}, want {AUD_ATTESTATION!r}")
    binding = claims.get("binding")
    if not isinstance(binding, dict):
        raise AttestationError("TOKEN_CLAIMS_INVALID", "binding is required")
    for name, value in (("jti", claims.get("jti")), ("org", claims.get("org")), ("grant_id", claims.get("grant_id")),
                        ("claim_token_digest", claims.get("claim_token_digest")),
                        ("binding.intent_hash", binding.get("intent_hash"))):
        if not isinstance(value, str) or not value:
            raise AttestationError("TOKEN_CLAIMS_INVALID", f"{name} is required")
    for name, value in (("claim_token_digest", claims.get("claim_token_digest")),
                        ("binding.intent_hash", binding.get("intent_hash")),
                        ("binding.payload_digest", binding.get("payload_digest")),
                        ("binding.expected_effect_digest", binding.get("expected_effect_digest"))):
        if value is not None and not (isinstance(value, str) and _DIGEST.fullmatch(value)):
            raise AttestationError("TOKEN_CLAIMS_INVALID", f"{name} is not a sha256 digest")
    if binding.get("payload_profile") != "JCS-SHA256":
        raise AttestationError("TOKEN_CLAIMS_INVALID", "binding.payload_profile is not JCS-SHA256")
    iat, exp = claims.get("iat"), claims.get("exp")
    if not _is_int(iat) or not _is_int(exp) or iat <= 0 or exp <= 0 or iat >= exp:
        raise AttestationError("TOKEN_CLAIMS_INVALID", "iat and exp must be integers with 0 < iat < exp")
    if claims.get("iss") != issuer:
        raise AttestationError("TOKEN_ISSUER", f"iss {claims.get('iss')!r}, want {issuer!r}")
    if iat > int(now) + max_future_iat:
        raise AttestationError("TOKEN_NOT_YET_VALID", f"iat {iat} is after now plus {max_future_iat} s")
    if int(now) >= exp:
        raise AttestationError("TOKEN_EXPIRED", f"the claim lease ended at {exp}")
    if grant_id is not None and claims["grant_id"] != grant_id:
        raise AttestationError("BINDING_MISMATCH", "the attestation names another grant")
    if not isinstance(intent_hash, str) or not intent_hash:
        raise AttestationError("BINDING_MISMATCH", "the intent hash of the request about to execute is required")
    if binding["intent_hash"] != intent_hash:
        raise AttestationError("BINDING_MISMATCH", "the attestation is bound to another intent")
    return claims


def _key_for(jwks: Mapping[str, Any] | str | bytes, kid: str) -> Ed25519PublicKey:
    if isinstance(jwks, (str, bytes)):
        try:
            jwks = json.loads(jwks)
        except ValueError as e:
            raise AttestationError("TOKEN_UNKNOWN_KEY", f"the JWKS is not JSON: {e}") from None
    keys = jwks.get("keys") if isinstance(jwks, Mapping) else None
    if not isinstance(keys, list):
        raise AttestationError("TOKEN_UNKNOWN_KEY", "the JWKS has no keys")
    found = [k for k in keys if isinstance(k, Mapping) and k.get("kid") == kid]
    if len(found) != 1:
        raise AttestationError("TOKEN_UNKNOWN_KEY", f"kid {kid!r} names {len(found)} keys of the JWKS, want 1")
    k = found[0]
    if k.get("kty") != "OKP" or k.get("crv") != "Ed25519" or k.get("alg", "EdDSA") != "EdDSA" \
            or k.get("use", "sig") != "sig":
        raise AttestationError("TOKEN_UNKNOWN_KEY", f"kid {kid!r} is not an Ed25519 signing key")
    try:
        raw = b64url_decode(k.get("x", ""))
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise AttestationError("TOKEN_UNKNOWN_KEY", f"kid {kid!r} has no 32-byte x")
    return Ed25519PublicKey.from_public_bytes(raw)


def _strict_object(raw: bytes) -> dict[str, Any]:
    """Decode one JSON object, refusing repeated member names (a parser that
    keeps the last would read another value than one that keeps the first)."""

    def no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise ValueError(f"member {k!r} appears twice")
            out[k] = v
        return out

    v = json.loads(raw.decode("utf-8"), object_pairs_hook=no_repeats, parse_constant=_refuse_constant)
    if not isinstance(v, dict):
        raise ValueError("not a JSON object")
    return v


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
