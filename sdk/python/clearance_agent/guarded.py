"""The guarded cycle: sign → enforce-and-bind → claim → run → finalize.

The rule ``Agent.run_guarded`` keeps:

* the function runs at most once, and only after a claim answered
  ``should_execute: true`` with a claim token and a lease still running;
  every other answer (no grant, a refused claim, an error) returns or raises
  without calling it;
* it returns normally: COMMITTED (with the evidence it reported, if any);
* it raises an ordinary exception: FAILED — it did not happen;
* it raises ``OutcomeUnknown`` or ``TimeoutError``, or is interrupted
  (``KeyboardInterrupt``, ``SystemExit``, ``asyncio.CancelledError``,
  ``concurrent.futures.CancelledError``, any other BaseException): the
  process cannot know whether the effect happened, so INDETERMINATE — to be
  settled through Clearance's reconciliation routes, never retried blindly;
* the exception is re-raised after the finalization, with a note naming it.
"""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

from .client import Client
from .errors import ClearanceError, FinalizeError, OutcomeUnknown
from .intent import new_intent, sign_intent
from .keys import AgentKey

__all__ = ["Agent", "Execution", "GuardedResult", "COMMITTED", "FAILED", "INDETERMINATE"]

COMMITTED = "COMMITTED"
FAILED = "FAILED"
INDETERMINATE = "INDETERMINATE"


@dataclass
class Execution:
    """What the guarded function gets: the live claim, and a place to report
    evidence of the effect."""

    grant_id: str
    intent_hash: str
    claim_attestation: str
    """Forward it to the downstream system; it verifies it offline."""
    lease_expires_at: str
    claim: dict[str, Any]
    evidence: dict[str, Any] | None = None

    def report_effect(self, effect_digest: str, *, kind: str = "effect", status: str = "CONFIRMED") -> None:
        """Evidence finalized with COMMITTED. CONFIRMED with the intent's
        expected_effect_digest makes Clearance record the effect confirmed."""
        self.evidence = {"kind": kind, "status": status, "effect_digest": effect_digest}


@dataclass
class GuardedResult:
    """How a guarded cycle ended without an exception."""

    executed: bool
    """Whether the function ran (then it returned and was finalized COMMITTED)."""
    decision: dict[str, Any]
    """The enforce-and-bind answer (``outcome``, ``reason_codes``, …)."""
    claim: dict[str, Any] | None = None
    """The claim answer; a refused one has ``should_execute`` false and ``code``."""
    finalization: dict[str, Any] | None = None
    value: Any = None
    """What the function returned."""
    refusal: str | None = field(default=None)
    """Why the function did not run: the decision's outcome or the claim's code."""

    @property
    def outcome(self) -> str | None:
        return self.decision.get("outcome")


# Exceptions after which the effect may or may not have happened.
_UNKNOWN_EFFECT = (OutcomeUnknown, TimeoutError, concurrent.futures.CancelledError)


class Agent:
    """An agent that signs its intents with key and acts through client."""

    def __init__(self, client: Client, key: AgentKey, org_id: str, *, actor_id: str = "agent"):
        self.client = client
        self.key = key
        self.org_id = org_id
        self.actor_id = actor_id

    def intent(self, action_type: str, *, concurrency_scope: str, **members: Any) -> dict[str, Any]:
        """new_intent with this agent's org and actor filled in."""
        members.setdefault("actor_id", self.actor_id)
        return new_intent(self.org_id, action_type, concurrency_scope=concurrency_scope, **members)

    def run_guarded(self, intent: Mapping[str, Any], fn: Callable[[Execution], Any]) -> GuardedResult:
        """Run fn(execution) only under a live claim of a grant for intent,
        and record its outcome (see the module's rule)."""
        decision = self.client.enforce_and_bind(sign_intent(self.key, intent))
        token = decision.get("execution_token")
        if not token:
            return GuardedResult(executed=False, decision=decision, refusal=decision.get("outcome"))
        intent_hash = decision["intent_hash"]
        claim = self.client.claim(token, intent_hash)
        if claim.get("should_execute") is not True:
            return GuardedResult(executed=False, decision=decision, claim=claim, refusal=claim.get("code"))
        claim_token = claim.get("claim_token")
        lease = claim.get("claim_lease_expires_at")
        if not isinstance(claim_token, str) or not claim_token or not _in_future(lease):
            # Claimed but not safe to run: it did not run, so it FAILED.
            finalization = None
            if isinstance(claim_token, str) and claim_token:
                finalization = self.client.finalize(token, claim_token, FAILED)
            return GuardedResult(executed=False, decision=decision, claim=claim, finalization=finalization,
                                 refusal="CLAIM_LEASE_EXPIRED")

        execution = Execution(grant_id=claim.get("grant_id") or decision.get("grant_id"), intent_hash=intent_hash,
                              claim_attestation=claim.get("claim_attestation"), lease_expires_at=lease, claim=claim)
        try:
            value = fn(execution)
        except _UNKNOWN_EFFECT as e:
            self._finalize_after(e, token, claim_token, INDETERMINATE, execution.grant_id)
            raise
        except Exception as e:
            self._finalize_after(e, token, claim_token, FAILED, execution.grant_id)
            raise
        except BaseException as e:  # interrupted or cancelled mid-effect
            self._finalize_after(e, token, claim_token, INDETERMINATE, execution.grant_id)
            raise
        try:
            finalization = self.client.finalize(token, claim_token, COMMITTED, effect_evidence=execution.evidence)
        except ClearanceError as e:
            raise FinalizeError(COMMITTED, execution.grant_id, value,
                                f"the function ran but COMMITTED was not recorded for grant {execution.grant_id}: {e}") from e
        return GuardedResult(executed=True, decision=decision, claim=claim, finalization=finalization, value=value)

    def _finalize_after(self, exc: BaseException, token: str, claim_token: str, outcome: str, grant_id: str) -> None:
        """Finalize after fn raised exc, and note on exc what was recorded."""
        try:
            f = self.client.finalize(token, claim_token, outcome)
            exc.add_note(f"clearance: grant {grant_id} finalized {f.get('outcome', outcome)}")
        except ClearanceError as e:
            exc.add_note(f"clearance: grant {grant_id}: finalizing {outcome} failed ({e}); reconcile it")


def _in_future(lease: Any) -> bool:
    if not isinstance(lease, str):
        return False
    try:
        end = datetime.fromisoformat(lease.replace("Z", "+00:00"))
    except ValueError:
        return False
    if end.tzinfo is None:
        return False
    return end > datetime.now(timezone.utc)
