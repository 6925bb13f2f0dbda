"""The SDK's exceptions. Every one derives from ClearanceError."""

from __future__ import annotations

from typing import Any

__all__ = [
    "ClearanceError",
    "ProblemError",
    "TransportError",
    "AttestationError",
    "WebhookSignatureError",
    "FinalizeError",
    "OutcomeUnknown",
]


class ClearanceError(Exception):
    """Base class of the SDK's errors."""


class ProblemError(ClearanceError):
    """An error answer of the Clearance API (application/problem+json, or any
    other non-2xx answer the route does not turn into a result).

    ``status`` is the HTTP status; ``code`` the stable machine code (None when
    the body was not a problem); ``title``, ``detail`` and ``request_id`` as
    the server sent them; ``body`` the decoded JSON (or the raw text);
    ``retry_after`` the Retry-After seconds when given.
    """

    def __init__(
        self,
        status: int,
        code: str | None,
        title: str | None,
        detail: str | None,
        body: Any,
        request_id: str | None = None,
        retry_after: float | None = None,
    ):
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.body = body
        self.request_id = request_id
        self.retry_after = retry_after
        super().__init__(f"{status} {code or title or 'error'}: {detail or ''}".rstrip(": "))


class TransportError(ClearanceError):
    """The request got no HTTP answer (connection refused or reset, timeout).
    For a request that changes state, whether the server acted is unknown."""


class AttestationError(ClearanceError):
    """A claim attestation refused by verify_attestation. ``code`` is one of
    the grant package's token reasons (TOKEN_MALFORMED, TOKEN_ALGORITHM,
    TOKEN_TYPE, TOKEN_HEADER_FORBIDDEN, TOKEN_UNKNOWN_KEY, TOKEN_SIGNATURE,
    TOKEN_AUDIENCE, TOKEN_ISSUER, TOKEN_EXPIRED, TOKEN_NOT_YET_VALID,
    TOKEN_CLAIMS_INVALID) or BINDING_MISMATCH (another grant or intent than
    the one about to execute)."""

    def __init__(self, code: str, message: str):
        self.code = code
        super().__init__(f"{code}: {message}")


class WebhookSignatureError(ClearanceError):
    """A webhook delivery refused by verify_webhook. ``code`` is
    MALFORMED_SIGNATURE, SIGNATURE_TIMESTAMP or SIGNATURE_MISMATCH."""

    def __init__(self, code: str, message: str):
        self.code = code
        super().__init__(f"{code}: {message}")


class FinalizeError(ClearanceError):
    """The guarded function ran but its outcome could not be recorded.

    ``outcome`` is what the SDK tried to record, ``grant_id`` the grant,
    ``value`` what the function returned (None when it raised); the cause is
    chained. The execution must be settled through the reconciliation routes:
    when the lease ends unfinalized Clearance records it INDETERMINATE.
    """

    def __init__(self, outcome: str, grant_id: str | None, value: Any, message: str):
        self.outcome = outcome
        self.grant_id = grant_id
        self.value = value
        super().__init__(message)


class OutcomeUnknown(ClearanceError):
    """Raise it from a guarded function that cannot tell whether its effect
    happened (a provider that timed out mid-commit): the execution is
    finalized INDETERMINATE instead of FAILED."""
