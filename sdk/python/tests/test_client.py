"""The client's retry rule and error mapping, against a scripted HTTP server
on 127.0.0.1 (the real server never answers 503 on demand)."""

import json
import socket
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from clearance_agent import Client, ProblemError, TransportError


class Scripted(ThreadingHTTPServer):
    """Answers each request with the next scripted (status, headers, body)."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.script: list[tuple[int, dict, bytes]] = []
        self.hits: list[tuple[str, str, dict]] = []
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self.server.hits.append((self.command, self.path, dict(self.headers)))
        status, headers, body = self.server.script.pop(0) if self.server.script else (500, {}, b"")
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = answer


def problem(status, code, **headers):
    body = json.dumps({"type": "about:blank", "title": "T", "status": status, "detail": "d", "code": code,
                       "request_id": "r-1"}).encode()
    return status, {"Content-Type": "application/problem+json", **headers}, body


OK = (200, {"Content-Type": "application/json"}, b'{"keys":[]}')


class Retries(unittest.TestCase):
    def setUp(self):
        self.srv = Scripted()
        self.addCleanup(self.srv.server_close)
        self.addCleanup(self.srv.shutdown)
        self.client = Client(self.srv.url, "clr_org_test", max_retries=2, max_retry_wait=1.0)

    def test_a_get_is_retried_after_503_and_429_honouring_retry_after(self):
        self.srv.script = [problem(503, "STORE_UNAVAILABLE", **{"Retry-After": "0"}),
                           problem(429, "RATE_LIMITED", **{"Retry-After": "1"}), OK]
        start = time.monotonic()
        self.assertEqual(self.client.jwks(), {"keys": []})
        self.assertGreaterEqual(time.monotonic() - start, 1.0)  # waited the second it was told to
        self.assertEqual(len(self.srv.hits), 3)

    def test_retries_are_bounded(self):
        self.srv.script = [problem(503, "STORE_UNAVAILABLE", **{"Retry-After": "0"})] * 5
        with self.assertRaises(ProblemError) as cm:
            self.client.jwks()
        self.assertEqual((cm.exception.status, cm.exception.code), (503, "STORE_UNAVAILABLE"))
        self.assertEqual(len(self.srv.hits), 3)

    def test_a_retry_after_beyond_the_bound_is_not_waited_for(self):
        self.srv.script = [problem(429, "RATE_LIMITED", **{"Retry-After": "30"})]
        with self.assertRaises(ProblemError) as cm:
            self.client.jwks()
        self.assertEqual(cm.exception.retry_after, 30.0)
        self.assertEqual(len(self.srv.hits), 1)

    def test_a_post_without_idempotency_key_is_sent_once(self):
        self.srv.script = [problem(503, "STORE_UNAVAILABLE", **{"Retry-After": "0"}), OK]
        with self.assertRaises(ProblemError):
            self.client.verify_token("t", "sha256:" + "0" * 64)
        self.assertEqual(len(self.srv.hits), 1)

    def test_enforce_and_bind_sends_the_intent_id_as_idempotency_key_and_retries(self):
        self.srv.script = [problem(503, "STORE_UNAVAILABLE", **{"Retry-After": "0"}),
                           (200, {"Content-Type": "application/json"}, b'{"outcome":"BLOCK"}')]
        # A JWS whose payload is {"intent_id":"i-1"} (the signature does not matter here).
        jws = "e30.eyJpbnRlbnRfaWQiOiJpLTEifQ.AA"
        self.assertEqual(self.client.enforce_and_bind(jws), {"outcome": "BLOCK"})
        self.assertEqual([h[2].get("Idempotency-Key") for h in self.srv.hits], ["i-1", "i-1"])

    def test_a_refused_claim_is_a_result_and_other_errors_raise(self):
        failed = {"should_execute": False, "claim_token": None, "claim_lease_expires_at": None, "valid": False,
                  "claim_attestation": None, "grant_id": None, "decision_id": None, "code": "CLAIM_REPLAY",
                  "detail": "d", "request_id": "r"}
        self.srv.script = [(409, {"Content-Type": "application/json"}, json.dumps(failed).encode()),
                           problem(400, "INVALID_REQUEST")]
        self.assertEqual(self.client.claim("t", "h")["code"], "CLAIM_REPLAY")
        with self.assertRaises(ProblemError) as cm:
            self.client.claim("t", "h")
        e = cm.exception
        self.assertEqual((e.status, e.code, e.title, e.detail, e.request_id), (400, "INVALID_REQUEST", "T", "d", "r-1"))
        self.assertEqual(e.body["code"], "INVALID_REQUEST")
        self.assertEqual(len(self.srv.hits), 2)

    def test_the_key_is_sent_as_bearer_and_redirects_are_not_followed(self):
        self.srv.script = [(302, {"Location": "http://example.invalid/"}, b"")]
        with self.assertRaises(ProblemError) as cm:
            self.client.escalation_status("e-1")
        self.assertEqual(cm.exception.status, 302)
        self.assertEqual(self.srv.hits[0][2]["Authorization"], "Bearer clr_org_test")


class ConnectionErrors(unittest.TestCase):
    def test_a_refused_connection_is_retried_for_a_get_then_raised(self):
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        client = Client(f"http://127.0.0.1:{port}", "k", max_retries=1)
        with self.assertRaises(TransportError):
            client.jwks()


if __name__ == "__main__":
    unittest.main()
