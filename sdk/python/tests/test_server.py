"""The SDK against a real `clearance serve`: the guarded cycle, offline
attestation checks of real attestations, real webhook deliveries, and an
intent whose canonical form only agrees if both canonicalizers do."""

import asyncio
import contextlib
import io
import json
import os
import queue
import re
import threading
import unittest
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from unittest import mock

from clearance_agent import (
    Agent,
    AgentKey,
    AttestationError,
    Client,
    OutcomeUnknown,
    ProblemError,
    WebhookSignatureError,
    canonicalize,
    digest,
    sign_compact,
    sign_intent,
    verify_attestation,
    verify_webhook,
)
from clearance_agent._b64 import b64url_decode, b64url_encode

from .server import ClearanceServer

SERVER: ClearanceServer
ORG: dict
CLIENT: Client
AGENT: Agent

POLICY = {
    "bundle_id": "sdk-python", "version": "v1", "mode": "ENFORCEMENT",
    "rules": [
        {"id": "small", "match": [{"field": "amount", "op": "lt", "value": 1000}],
         "outcome": "ALLOW", "reason_codes": ["AMOUNT_BELOW_LIMIT"]},
        {"id": "large", "match": [{"field": "amount", "op": "ge", "value": 1000}],
         "outcome": "BLOCK", "reason_codes": ["AMOUNT_AT_OR_ABOVE_LIMIT"]},
    ],
    "default": {"outcome": "BLOCK", "reason_codes": ["NO_AMOUNT"]},
}


def setUpModule():
    global SERVER, ORG, CLIENT, AGENT
    # Webhook deliveries go to a receiver on 127.0.0.1.
    SERVER = ClearanceServer("--allow-private-destinations").start()
    try:
        ORG = SERVER.create_org("SDK Python")
        CLIENT = Client(SERVER.url, ORG["api_key"])
        key = AgentKey.generate()
        registered = CLIENT.register_agent_key(key)
        assert registered["kid"] == key.kid, registered
        CLIENT.request("POST", "/v1/protocol/policies/bundles", POLICY)
        AGENT = Agent(CLIENT, key, ORG["org_id"], actor_id="refund-bot")
    except BaseException:
        SERVER.stop()
        raise


def tearDownModule():
    SERVER.stop()


def scope() -> str:
    # A concurrency scope per test: an INDETERMINATE one stays held.
    return "order-" + uuid.uuid4().hex[:12]


def reconciliations() -> list[str]:
    """Grant ids of the org's INDETERMINATE executions."""
    body = CLIENT._json("GET", "/v1/execution/reconciliations")
    return [e["grant_id"] for e in body["executions"]]


class GuardedCycle(unittest.TestCase):
    def test_allow_runs_once_and_commits_with_evidence(self):
        effect = digest("psp refund order-1 999.99 EUR")
        intent = AGENT.intent("refund", concurrency_scope=scope(), amount=999.99, currency="EUR",
                              target="Bestellung Müller — 東京 😀", decision_type="REFUND", workflow_key="refunds",
                              expected_effect_digest=effect)
        calls = []

        def refund(execution):
            calls.append(execution)
            execution.report_effect(effect, kind="psp.refund")
            return "refund-42"

        r = AGENT.run_guarded(intent, refund)
        self.assertEqual(len(calls), 1)
        self.assertTrue(r.executed)
        self.assertEqual(r.outcome, "ALLOW")
        self.assertEqual(r.value, "refund-42")
        self.assertEqual(r.finalization["outcome"], "COMMITTED")
        self.assertIs(r.finalization["effect_confirmed"], True)
        self.assertEqual(r.decision["intent_hash"], digest(canonicalize(intent)))
        self.assertEqual(calls[0].grant_id, r.decision["grant_id"])

        # The grant is spent: a second claim is refused, fail closed.
        again = CLIENT.claim(r.decision["execution_token"], r.decision["intent_hash"])
        self.assertIs(again["should_execute"], False)
        self.assertEqual(again["code"], "CLAIM_REPLAY")
        self.assertIsNone(again["claim_token"])

    def test_block_never_runs_the_function(self):
        calls = []
        r = AGENT.run_guarded(AGENT.intent("refund", concurrency_scope=scope(), amount=1000, currency="EUR"),
                              calls.append)
        self.assertEqual(calls, [])
        self.assertFalse(r.executed)
        self.assertEqual((r.outcome, r.refusal), ("BLOCK", "BLOCK"))
        self.assertNotIn("execution_token", r.decision)
        self.assertIsNone(r.claim)

    def test_an_ordinary_exception_finalizes_failed(self):
        calls = []

        def declined(execution):
            calls.append(execution)
            raise ValueError("the provider declined")

        with self.assertRaises(ValueError) as cm:
            AGENT.run_guarded(AGENT.intent("refund", concurrency_scope=scope(), amount=10), declined)
        self.assertEqual(len(calls), 1)
        self.assertIn(f"clearance: grant {calls[0].grant_id} finalized FAILED", cm.exception.__notes__)
        self.assertNotIn(calls[0].grant_id, reconciliations())

    def test_an_interruption_finalizes_indeterminate(self):
        for interruption in (KeyboardInterrupt(), asyncio.CancelledError(), TimeoutError("provider timed out"),
                             OutcomeUnknown("no answer from the provider")):
            with self.subTest(interruption=type(interruption).__name__):
                calls = []

                def interrupted(execution):
                    calls.append(execution)
                    raise interruption

                with self.assertRaises(type(interruption)) as cm:
                    AGENT.run_guarded(AGENT.intent("refund", concurrency_scope=scope(), amount=10), interrupted)
                self.assertEqual(len(calls), 1)
                self.assertIn(f"clearance: grant {calls[0].grant_id} finalized INDETERMINATE", cm.exception.__notes__)
                self.assertIn(calls[0].grant_id, reconciliations())

    def test_a_grant_is_verified_without_being_spent(self):
        d = CLIENT.enforce_and_bind(sign_intent(AGENT.key, AGENT.intent("refund", concurrency_scope=scope(), amount=5)))
        status = CLIENT.verify_token(d["execution_token"], d["intent_hash"])
        self.assertIs(status["valid"], True)
        self.assertEqual(status["grant_id"], d["grant_id"])
        self.assertIs(CLIENT.claim(d["execution_token"], d["intent_hash"])["should_execute"], True)

    def test_errors_are_problems_with_their_code(self):
        with self.assertRaises(ProblemError) as cm:
            CLIENT.enforce_and_bind("not-a-jws")
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "INTENT_MALFORMED"))
        self.assertEqual(cm.exception.title, "Bad Request")
        self.assertTrue(cm.exception.detail)
        with self.assertRaises(ProblemError) as cm:
            CLIENT.escalation_status(str(uuid.uuid4()))
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "ESCALATION_NOT_FOUND"))
        with self.assertRaises(ProblemError) as cm:
            Client(SERVER.url, "clr_org_wrong").escalation_status(str(uuid.uuid4()))
        self.assertEqual(cm.exception.status, 401)


class Readme(unittest.TestCase):
    def test_the_cycle_example_runs_as_printed(self):
        readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
        section = readme.split("## A guarded cycle", 1)[1]
        example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
        env = {"CLEARANCE_URL": SERVER.url, "CLEARANCE_API_KEY": ORG["api_key"], "CLEARANCE_ORG_ID": ORG["org_id"]}
        out = io.StringIO()
        with mock.patch.dict(os.environ, env), contextlib.redirect_stdout(out):
            exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
        self.assertEqual(out.getvalue(), "ALLOW True COMMITTED\n")


class Canonicalization(unittest.TestCase):
    def test_the_server_accepts_a_python_signed_intent_with_non_ascii_and_a_fraction(self):
        intent = AGENT.intent("payout", concurrency_scope=scope(), amount=1234567.89, currency="EUR",
                              target="Zahlung an Jürgen Groß — 東京 😀 \"quoted\" \\ back",
                              context={"note": "ÆØÅ\u2028\u0007\n", "€": 1, "\r": 2, "\ufb33": 3, "😀": 4,
                                       "rate": 0.1 + 0.2, "tiny": 1e-7, "big": 1e21, "n": -0.0})
        d = CLIENT.enforce_and_bind(sign_intent(AGENT.key, intent))
        self.assertEqual(d["outcome"], "BLOCK")  # heard and decided: 1234567.89 ≥ 1000
        self.assertEqual(d["intent_hash"], digest(canonicalize(intent)))

    def test_the_server_refuses_what_is_not_canonical(self):
        # The control: the same kind of intent, ASCII-escaped, is refused, so
        # the acceptance above means the two canonical forms are equal.
        intent = AGENT.intent("payout", concurrency_scope=scope(), amount=12.5, target="Jürgen")
        payload = json.dumps(intent, sort_keys=True, separators=(",", ":")).encode()
        with self.assertRaises(ProblemError) as cm:
            CLIENT.enforce_and_bind(sign_compact(AGENT.key, "clearance-intent+jwt", payload))
        self.assertEqual(cm.exception.code, "INTENT_NOT_CANONICAL")


class Attestations(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        seen = []
        cls.result = AGENT.run_guarded(AGENT.intent("refund", concurrency_scope=scope(), amount=50), seen.append)
        cls.execution = seen[0]
        cls.jwks = CLIENT.jwks()

    def refused(self, code, token, jwks=None, **kw):
        kw.setdefault("intent_hash", self.result.decision["intent_hash"])
        with self.assertRaises(AttestationError) as cm:
            verify_attestation(token, jwks or self.jwks, **kw)
        self.assertEqual(cm.exception.code, code, str(cm.exception))

    def test_a_real_attestation_verifies_offline(self):
        d = self.result.decision
        claims = verify_attestation(self.execution.claim_attestation, self.jwks, grant_id=d["grant_id"],
                                    intent_hash=d["intent_hash"])
        self.assertEqual(claims["org"], ORG["org_id"])
        self.assertEqual(claims["sub"], "refund-bot")
        self.assertEqual(claims["act"]["type"], "refund")

    def test_tampered_misbound_foreign_or_stale_attestations_fail(self):
        token = self.execution.claim_attestation
        d = self.result.decision
        h, p, s = token.split(".")
        claims = json.loads(b64url_decode(p))
        self.refused("TOKEN_SIGNATURE", h + "." + b64url_encode(canonicalize({**claims, "grant_id": "other"})) + "." + s)
        self.refused("TOKEN_SIGNATURE", h + "." + b64url_encode(canonicalize({**claims, "aud": "x"})) + "." + s)
        self.refused("BINDING_MISMATCH", token, intent_hash=digest("another intent"))
        self.refused("BINDING_MISMATCH", token, grant_id=str(uuid.uuid4()))
        self.refused("TOKEN_ISSUER", token, issuer="another-deployment")
        self.refused("TOKEN_EXPIRED", token, now=claims["exp"])
        self.refused("TOKEN_UNKNOWN_KEY", token, jwks={"keys": [AGENT.key.public_jwk()]})
        # The grant itself is signed by the same key but is not an attestation.
        self.refused("TOKEN_TYPE", d["execution_token"])
        # An attestation-shaped token with the wrong aud, signed by a key the JWKS holds.
        own = {"keys": [AGENT.key.public_jwk()]}
        forged = sign_compact(AGENT.key, "clearance-claim-attestation+jwt",
                              canonicalize({**claims, "aud": "clearance-execution"}))
        self.refused("TOKEN_AUDIENCE", forged, jwks=own)


class Receiver(ThreadingHTTPServer):
    """Collects webhook deliveries: (headers, raw body)."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _ReceiverHandler)
        self.deliveries: queue.Queue = queue.Queue()
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()


class _ReceiverHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.deliveries.put((dict(self.headers), body))
        self.send_response(204)
        self.end_headers()


class WebhookDeliveries(unittest.TestCase):
    def delivery_of(self, rx, evaluation_id):
        while True:
            headers, body = rx.deliveries.get(timeout=30)
            if json.loads(body).get("evaluation_id") == evaluation_id:
                return headers, body

    def decide(self):
        r = CLIENT.request("POST", "/v1/protocol/evaluate-decision", {"decision_type": "PAYMENT", "amount": 42})
        self.assertEqual(r.status, 200, r.body)
        return r.body["evaluation_id"]

    def test_real_deliveries_verify_and_tampered_or_old_ones_do_not(self):
        rx = Receiver()
        self.addCleanup(rx.server_close)
        self.addCleanup(rx.shutdown)
        first, second = "sdk-python-secret-" + uuid.uuid4().hex, "sdk-python-rotated-" + uuid.uuid4().hex
        connect = f"/v1/orgs/{ORG['org_id']}/integrations/WEBHOOK/connect"
        body = {"config": {"endpoint_url": f"http://127.0.0.1:{rx.server_address[1]}/hook"},
                "credentials": {"webhook_secret": first}}
        self.assertEqual(CLIENT.request("POST", connect, body).status, 201)

        headers, raw = self.delivery_of(rx, self.decide())
        header = headers["X-Clearance-Signature"]
        verify_webhook(header, raw, first)
        t = int(header.split(",")[0].removeprefix("t="))
        for code, args in [
            ("SIGNATURE_MISMATCH", dict(body=raw.replace(b"PAYMENT", b"PAYMENX"), secret=first)),
            ("SIGNATURE_MISMATCH", dict(body=raw, secret=second)),
            ("SIGNATURE_TIMESTAMP", dict(body=raw, secret=first, now=t + 301)),
        ]:
            with self.subTest(code=code), self.assertRaises(WebhookSignatureError) as cm:
                verify_webhook(header, args["body"], args["secret"], now=args.get("now"))
            self.assertEqual(cm.exception.code, code)

        # Rotation: a new secret, and both sign while the old one drains.
        body["credentials"]["webhook_secret"] = second
        self.assertEqual(CLIENT.request("POST", connect, body).status // 100, 2)
        headers, raw = self.delivery_of(rx, self.decide())
        header = headers["X-Clearance-Signature"]
        self.assertEqual(header.count("v1="), 2, header)
        verify_webhook(header, raw, first)
        verify_webhook(header, raw, second)


if __name__ == "__main__":
    unittest.main()
