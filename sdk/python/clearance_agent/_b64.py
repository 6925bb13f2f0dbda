"""Unpadded base64url, decoded strictly: one encoding per byte string."""

from __future__ import annotations

import base64
import re

_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(seg: str) -> bytes:
    """Decode unpadded base64url; ValueError for padding, other characters or
    non-zero trailing bits (the segment must be the canonical encoding)."""
    if not isinstance(seg, str) or not _ALPHABET.fullmatch(seg) or len(seg) % 4 == 1:
        raise ValueError("not unpadded base64url")
    data = base64.urlsafe_b64decode(seg + "=" * (-len(seg) % 4))
    if b64url_encode(data) != seg:
        raise ValueError("not canonical base64url")
    return data
