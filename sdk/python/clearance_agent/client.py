"""A small HTTP client for the routes an agent and its executor use."""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from typing import Any, Mapping

from .errors import ProblemError, TransportError
from .intent import intent_payload
from .keys import AgentKey

__all__ = ["Client", "Response"]

_RETRY_STATUSES = (429, 503)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # urllib would resend the Authorization header to wherever a redirect
    # points; Clearance never redirects an API call, so none is followed.
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D401
        return None


class Response:
    """One HTTP answer: status, headers and the decoded JSON body."""

    __slots__ = ("status", "headers", "body", "content_type")

    def __init__(self, status: int, headers: Mapping[str, str], body: Any, content_type: str):
        self.status = status
        self.headers = headers
        self.body = body
        self.content_type = content_type


class Client:
    """The Clearance API with one key.

    Retries are safe by construction: only GETs and POSTs that carry an
    Idempotency-Key (enforce-and-bind always sends its intent_id as one) are
    retried, at most ``max_retries`` times, after a connection error, 429 or
    503. A Retry-After longer than ``max_retry_wait`` seconds is not waited
    for: the answer is raised. Claims, finalizations and key registrations are
    sent once: a second attempt could act twice or hide what the first did.

    ``org_id`` is sent as the ``org_id`` query parameter; only the platform
    key needs it.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        org_id: str | None = None,
        timeout: float = 10.0,
        max_retries: int = 2,
        max_retry_wait: float = 5.0,
        user_agent: str = "clearance-agent-python/0.1.0",
    ):
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.org_id = org_id
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.user_agent = user_agent
        self._opener = urllib.request.build_opener(_NoRedirect())

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    # The agent's routes.

    def register_agent_key(self, key: AgentKey, iss: str | None = None) -> dict[str, Any]:
        """Register key's public JWK under its kid (201 new, 200 unchanged)."""
        body: dict[str, Any] = {"kid": key.kid, "public_jwk": key.public_jwk()}
        if iss is not None:
            body["iss"] = iss
        return self._json("POST", "/v1/execution/agent-keys", body)

    def enforce_and_bind(self, signed_intent: str, *, correlation_id: str | None = None) -> dict[str, Any]:
        """Decide the signed intent and, for ALLOW in ENFORCEMENT, bind a grant
        (``execution_token``, ``intent_hash``). Retried safely: the intent_id is
        sent as the Idempotency-Key and the server answers a replay with the
        stored decision."""
        headers = {}
        try:
            intent_id = json.loads(intent_payload(signed_intent)).get("intent_id")
        except (ValueError, AttributeError):
            intent_id = None  # the server names the defect
        # The header must be 1 to 255 visible ASCII characters; any other
        # intent_id is left for the server to refuse as the intent's defect.
        if isinstance(intent_id, str) and 0 < len(intent_id) <= 255 and all("!" <= c <= "~" for c in intent_id):
            headers["Idempotency-Key"] = intent_id
        if correlation_id is not None:
            headers["X-Correlation-Id"] = correlation_id
        return self._json("POST", "/v1/authority/enforce-and-bind", {"signed_intent": signed_intent}, headers)

    def claim(self, execution_token: str, intent_hash: str) -> dict[str, Any]:
        """Claim the grant right before the downstream commit. A refused claim
        (409 or 503 with the fail-closed body) is returned, not raised: its
        ``should_execute`` is false and ``code`` says why. Sent once."""
        r = self.request(
            "POST", "/v1/execution/claim-token", {"execution_token": execution_token, "intent_hash": intent_hash}
        )
        if r.status == 200 or (r.status in (409, 503) and _is_json(r.content_type) and isinstance(r.body, dict)
                               and r.body.get("should_execute") is False):
            return r.body
        raise _problem(r)

    def finalize(
        self,
        execution_token: str,
        claim_token: str,
        outcome: str,
        *,
        effect_evidence: Mapping[str, Any] | None = None,
        effect_receipt: str | None = None,
    ) -> dict[str, Any]:
        """Record the attempt's outcome: COMMITTED, FAILED or INDETERMINATE. A
        finalization recorded as INDETERMINATE after the lease (409 with
        ``code`` CLAIM_LEASE_EXPIRED) is returned, not raised. Sent once."""
        body: dict[str, Any] = {"execution_token": execution_token, "claim_token": claim_token, "outcome": outcome}
        if effect_evidence is not None:
            body["effect_evidence"] = dict(effect_evidence)
        if effect_receipt is not None:
            body["effect_receipt"] = effect_receipt
        r = self.request("POST", "/v1/execution/finalize-token", body)
        if r.status == 200 or (r.status == 409 and _is_json(r.content_type) and isinstance(r.body, dict)
                               and "outcome" in r.body):
            return r.body
        raise _problem(r)

    def verify_token(self, execution_token: str, intent_hash: str) -> dict[str, Any]:
        """Check an unclaimed grant without consuming it (authorizes nothing)."""
        return self._json(
            "POST", "/v1/execution/verify-token", {"execution_token": execution_token, "intent_hash": intent_hash}
        )

    def escalation_status(self, escalation_id: str) -> dict[str, Any]:
        """A managed escalation; its grant appears only at GRANT_READY."""
        return self._json("GET", "/v1/authority/escalations/" + urllib.parse.quote(escalation_id, safe=""))

    def jwks(self) -> dict[str, Any]:
        """The public keys of grants and claim attestations (no key needed)."""
        return self._json("GET", "/.well-known/clearance-execution-grant-jwks.json", auth=False)

    # The wire.

    def _json(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        *,
        auth: bool = True,
    ) -> Any:
        r = self.request(method, path, body, headers, auth=auth)
        if 200 <= r.status < 300:
            return r.body
        raise _problem(r)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        *,
        query: Mapping[str, str] | None = None,
        auth: bool = True,
    ) -> Response:
        """Send one API request (with the retries described on the class) and
        return the answer whatever its status; raise TransportError when no
        answer came. For routes this class has no method for."""
        params = dict(query or {})
        if self.org_id and "org_id" not in params:
            params["org_id"] = self.org_id
        url = self.base_url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        hdrs = {"Accept": "application/json, application/problem+json", "User-Agent": self.user_agent}
        if auth:
            hdrs["Authorization"] = "Bearer " + self._api_key
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        retryable = method == "GET" or "Idempotency-Key" in hdrs
        attempt = 0
        while True:
            try:
                r = self._send(urllib.request.Request(url, data=data, headers=hdrs, method=method))
            except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
                if retryable and attempt < self.max_retries:
                    time.sleep(_backoff(attempt))
                    attempt += 1
                    continue
                raise TransportError(f"{method} {path}: {_reason(e)}") from e
            if r.status in _RETRY_STATUSES and retryable and attempt < self.max_retries:
                wait = _retry_after(r.headers.get("Retry-After"))
                wait = _backoff(attempt) if wait is None else wait
                if wait <= self.max_retry_wait:
                    time.sleep(wait)
                    attempt += 1
                    continue
            return r

    def _send(self, req: urllib.request.Request) -> Response:
        try:
            resp = self._opener.open(req, timeout=self.timeout)
        except urllib.error.HTTPError as e:  # a non-2xx answer is still an answer
            resp = e
        with resp:
            raw = resp.read()
            status = resp.status if hasattr(resp, "status") else resp.code
            headers = {k: v for k, v in resp.headers.items()}
        content_type = (resp.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        body: Any = raw.decode("utf-8", "replace")
        if _is_json(content_type) and raw:
            try:
                body = json.loads(raw)
            except ValueError:
                pass
        return Response(status, _Headers(headers), body, content_type)


class _Headers(dict):
    """Case-insensitive get over the answer's headers."""

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        for k, v in self.items():
            if k.lower() == name.lower():
                return v
        return default


def _is_json(content_type: str) -> bool:
    return content_type in ("application/json", "application/problem+json", "application/jwk-set+json")


def _problem(r: Response) -> ProblemError:
    b = r.body if isinstance(r.body, dict) else {}
    return ProblemError(
        status=r.status,
        code=b.get("code") if isinstance(b.get("code"), str) else None,
        title=b.get("title") if isinstance(b.get("title"), str) else None,
        detail=b.get("detail") if isinstance(b.get("detail"), str) else None,
        body=r.body,
        request_id=b.get("request_id") or r.headers.get("X-Request-Id"),
        retry_after=_retry_after(r.headers.get("Retry-After")),
    )


def _retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _backoff(attempt: int) -> float:
    # 0.2 s, 0.4 s, 0.8 s … with full jitter, so retrying agents spread out.
    return random.uniform(0, 0.2 * 2**attempt)


def _reason(e: BaseException) -> str:
    if isinstance(e, urllib.error.URLError) and not isinstance(e, urllib.error.HTTPError):
        return str(e.reason)
    if isinstance(e, socket.timeout):
        return "timed out"
    return str(e) or type(e).__name__
