"""Checking Clearance's webhook deliveries (and signing them, for tests).

Every delivery carries ``X-Clearance-Signature: t=<unix seconds>,v1=<hex>``
where each v1 is HMAC-SHA256(secret, "<t>." + raw body); while a secret is
being rotated there is one v1 per secret. Check the raw body before parsing
it, then process each ``X-Clearance-Delivery-Id`` once.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

from .errors import WebhookSignatureError

__all__ = ["verify_webhook", "sign_webhook", "SIGNATURE_HEADER", "DEFAULT_TOLERANCE"]

SIGNATURE_HEADER = "X-Clearance-Signature"
DEFAULT_TOLERANCE = 300  # seconds either way, as the Go receiver's default
_DIGITS = re.compile(r"[0-9]+")
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def sign_webhook(body: bytes, t: int, *secrets: bytes | str) -> str:
    """The X-Clearance-Signature value of body sent at unix time t, one v1
    per secret (what Clearance sends)."""
    ts = str(int(t))
    return "t=" + ts + "".join(",v1=" + _mac(_secret(s), ts, body).hex() for s in secrets)


def verify_webhook(
    header: str | None, body: bytes, secret: bytes | str, *, now: float | None = None, tolerance: float = 0
) -> None:
    """Accept a delivery when any v1 of header is the HMAC of the raw body
    under secret and t is within tolerance seconds of now (0 means
    DEFAULT_TOLERANCE); otherwise raise WebhookSignatureError. Schemes other
    than v1 are ignored, as receivers should."""
    if tolerance <= 0:
        tolerance = DEFAULT_TOLERANCE
    now = time.time() if now is None else now
    ts = None
    sigs: list[bytes] = []
    for part in (header or "").split(","):
        key, eq, value = part.strip().partition("=")
        if not eq:
            raise WebhookSignatureError("MALFORMED_SIGNATURE", f"{part!r} has no '='")
        if key == "t":
            if ts is not None:
                raise WebhookSignatureError("MALFORMED_SIGNATURE", "t twice")
            ts = value
        elif key == "v1":
            if not _HEX64.fullmatch(value):
                raise WebhookSignatureError("MALFORMED_SIGNATURE", "v1 is not 64 hex digits")
            sigs.append(bytes.fromhex(value))
    if ts is None or not _DIGITS.fullmatch(ts) or int(ts) >= 2**63:
        raise WebhookSignatureError("MALFORMED_SIGNATURE", "t is not unix seconds")
    if not sigs:
        raise WebhookSignatureError("MALFORMED_SIGNATURE", "no v1")
    if abs(now - int(ts)) > tolerance:
        raise WebhookSignatureError("SIGNATURE_TIMESTAMP", f"t is {now - int(ts):.0f} s from now")
    want = _mac(_secret(secret), ts, body)
    # compare_digest against every v1, no early exit on the first match.
    if not any([hmac.compare_digest(sig, want) for sig in sigs]):
        raise WebhookSignatureError("SIGNATURE_MISMATCH", "no v1 matches the body under this secret")


def _mac(secret: bytes, ts: str, body: bytes) -> bytes:
    return hmac.new(secret, ts.encode("ascii") + b"." + body, hashlib.sha256).digest()


def _secret(s: bytes | str) -> bytes:
    return s.encode("utf-8") if isinstance(s, str) else bytes(s)
