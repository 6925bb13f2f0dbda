"""Execution intents: building one and signing it as Clearance requires."""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Mapping

from ._b64 import b64url_decode, b64url_encode
from .jcs import canonicalize
from .keys import AgentKey

__all__ = ["TYP_INTENT", "new_intent", "sign_intent", "intent_hash", "digest", "intent_payload"]

TYP_INTENT = "clearance-intent+jwt"


def digest(data: bytes | str) -> str:
    """``"sha256:"`` + lowercase hex SHA-256 of data (str as UTF-8): the form of
    ``intent_hash``, ``expected_effect_digest`` and every Clearance digest."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return "sha256:" + hashlib.sha256(data).hexdigest()


def new_intent(
    org_id: str,
    action_type: str,
    *,
    concurrency_scope: str,
    actor_id: str,
    actor_type: str = "agent",
    amount: int | float | Decimal | None = None,
    currency: str | None = None,
    target: str | None = None,
    workflow_key: str | None = None,
    decision_type: str | None = None,
    expected_effect_digest: str | None = None,
    escalation_mode: str = "NONE",
    context: Mapping[str, Any] | None = None,
    intent_id: str | None = None,
    nonce: str | None = None,
    issued_at: datetime | None = None,
) -> dict[str, Any]:
    """An intent payload with a fresh intent_id, nonce and issued_at (now, UTC).

    ``concurrency_scope`` names what at most one live claim may act on (an
    order, an account): choose it, there is no safe default. Members left at
    None are omitted. The result is a plain dict: add members the API knows
    (``surface``, ``parent_decision_id``) before signing.
    """
    action: dict[str, Any] = {"type": action_type}
    if amount is not None:
        action["amount"] = amount
    if currency is not None:
        action["currency"] = currency
    if target is not None:
        action["target"] = target
    when = issued_at or datetime.now(timezone.utc)
    intent: dict[str, Any] = {
        "intent_id": intent_id or str(uuid.uuid4()),
        "org_id": org_id,
        "actor": {"id": actor_id, "type": actor_type},
        "action": action,
        "nonce": nonce or secrets.token_urlsafe(16),
        "concurrency_scope": concurrency_scope,
        "escalation": {"mode": escalation_mode},
        "issued_at": when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    optional = {
        "workflow_key": workflow_key,
        "decision_type": decision_type,
        "expected_effect_digest": expected_effect_digest,
        "context": dict(context) if context is not None else None,
    }
    intent.update({k: v for k, v in optional.items() if v is not None})
    return intent


def sign_compact(key: AgentKey, typ: str, payload: bytes) -> str:
    """A compact JWS of payload with the protected header exactly
    ``{"alg":"EdDSA","kid":<key.kid>,"typ":<typ>}`` (the only members
    Clearance accepts), unpadded base64url throughout."""
    header = json.dumps({"alg": "EdDSA", "kid": key.kid, "typ": typ}, separators=(",", ":")).encode("utf-8")
    signing_input = b64url_encode(header) + "." + b64url_encode(payload)
    return signing_input + "." + b64url_encode(key.sign(signing_input.encode("ascii")))


def sign_intent(key: AgentKey, intent: Mapping[str, Any]) -> str:
    """Sign the RFC 8785 form of intent as a ``clearance-intent+jwt``."""
    return sign_compact(key, TYP_INTENT, canonicalize(dict(intent)))


def intent_payload(signed_intent: str) -> bytes:
    """The payload bytes of a compact JWS (not verified)."""
    parts = signed_intent.split(".")
    if len(parts) != 3:
        raise ValueError("not a compact JWS")
    return b64url_decode(parts[1])


def intent_hash(signed_intent: str) -> str:
    """The ``intent_hash`` Clearance computes: the digest of the signed
    payload bytes."""
    return digest(intent_payload(signed_intent))
