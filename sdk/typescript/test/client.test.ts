// Which calls the client repeats, and how it waits, against a local HTTP
// server that answers 503 and 429 on demand (Clearance cannot be made to).
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";
import { AgentKey, ClearanceClient, ClearanceError, canonicalIntent, newIntent, retryAfterMs, signIntent } from "../src/index.js";

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

let http: Server;
let baseUrl: string;
let seen: { method: string; url: string; headers: IncomingMessage["headers"]; body: string }[] = [];
let answers: Handler[] = [];

before(async () => {
  http = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (c: string) => (body += c));
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      const answer = answers.shift();
      if (answer) {
        answer(req, res, body);
      } else {
        res.writeHead(500).end();
      }
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
});

after(async () => {
  await new Promise((resolve) => http.close(resolve));
});

beforeEach(() => {
  seen = [];
  answers = [];
});

const problem = (status: number, code: string, headers: Record<string, string> = {}): Handler => (_req, res) => {
  res.writeHead(status, { "Content-Type": "application/problem+json", "X-Request-Id": "req-1", ...headers });
  res.end(JSON.stringify({ type: "about:blank", title: "Service Unavailable", status, code, detail: "try later" }));
};
const json = (status: number, body: unknown): Handler => (_req, res) => {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
};

function client(): ClearanceClient {
  return new ClearanceClient({ baseUrl: baseUrl + "/", apiKey: "clr_org_test", retry: { baseDelayMs: 1, maxDelayMs: 2000 } });
}

describe("retries", () => {
  test("a GET is retried on 503 and 429, honouring Retry-After", async () => {
    answers = [problem(503, "STORE_UNAVAILABLE"), problem(429, "RATE_LIMITED", { "Retry-After": "1" }), json(200, { keys: [] })];
    const started = Date.now();
    assert.deepEqual(await client().jwks(), { keys: [] });
    assert.equal(seen.length, 3);
    assert.ok(Date.now() - started >= 1000, "waited for Retry-After");
    assert.equal(seen[0]!.headers.authorization, "Bearer clr_org_test");
  });

  test("a Retry-After beyond the bound is not waited for: the answer is thrown", async () => {
    answers = [problem(429, "RATE_LIMITED", { "Retry-After": "3600" })];
    await assert.rejects(client().jwks(), (err: unknown) => {
      assert.ok(err instanceof ClearanceError);
      assert.equal(err.status, 429);
      assert.equal(err.code, "RATE_LIMITED");
      assert.equal(err.requestId, "req-1");
      return true;
    });
    assert.equal(seen.length, 1);
  });

  test("retries stop after maxRetries", async () => {
    answers = [problem(503, "STORE_UNAVAILABLE"), problem(503, "STORE_UNAVAILABLE"), problem(503, "STORE_UNAVAILABLE"), json(200, { keys: [] })];
    await assert.rejects(client().jwks(), (err: unknown) => err instanceof ClearanceError && err.code === "STORE_UNAVAILABLE");
    assert.equal(seen.length, 3);
  });

  test("enforce-and-bind is sent with Idempotency-Key = intent_id and retried", async () => {
    const key = await AgentKey.generate();
    const intent = await signIntent(key, newIntent({ org_id: "org", actor: { id: "a" }, action: { type: "refund" }, concurrency_scope: "s", intent_id: "refund-9" }));
    answers = [problem(503, "STORE_UNAVAILABLE"), json(200, { outcome: "BLOCK", intent_hash: intent.intentHash })];
    const d = await client().enforceAndBind(intent, { correlationId: "run-1" });
    assert.equal(d.outcome, "BLOCK");
    assert.equal(seen.length, 2);
    for (const r of seen) {
      assert.equal(r.url, "/v1/authority/enforce-and-bind");
      assert.equal(r.headers["idempotency-key"], "refund-9");
      assert.equal(r.headers["x-correlation-id"], "run-1");
      assert.deepEqual(JSON.parse(r.body), { signed_intent: intent.jws });
    }
  });

  test("claim, finalize and key registration are sent once", async () => {
    const c = client();
    answers = [problem(503, "STORE_UNAVAILABLE")];
    await assert.rejects(c.registerAgentKey(await AgentKey.generate()), (err: unknown) => err instanceof ClearanceError && err.status === 503);
    answers = [problem(503, "STORE_UNAVAILABLE")];
    await assert.rejects(c.finalize({ execution_token: "t", claim_token: "c", outcome: "FAILED" }), ClearanceError);
    const refused = {
      should_execute: false, claim_token: null, claim_lease_expires_at: null, valid: false, claim_attestation: null,
      grant_id: null, decision_id: null, code: "STORE_UNAVAILABLE", detail: "x", request_id: "r",
    };
    answers = [json(503, refused)];
    assert.deepEqual(await c.claim("t", "sha256:00"), refused);
    assert.equal(seen.length, 3);
    assert.ok(seen.every((r) => r.headers["idempotency-key"] === undefined));
  });

  test("a network failure of a GET is retried; of a POST without a key it is thrown", async () => {
    answers = [(req) => req.socket.destroy(), json(200, { keys: [] })];
    assert.deepEqual(await client().jwks(), { keys: [] });
    answers = [(req) => req.socket.destroy()];
    await assert.rejects(client().claim("t", "sha256:00"), TypeError);
    assert.equal(seen.length, 3);
  });

  test("a non-problem error body still becomes a ClearanceError", async () => {
    answers = [(_req, res) => res.writeHead(502, { "Content-Type": "text/html" }).end("<h1>bad gateway</h1>")];
    await assert.rejects(client().verifyToken("t", "sha256:00"), (err: unknown) => {
      assert.ok(err instanceof ClearanceError);
      assert.equal(err.code, "HTTP_502");
      assert.equal(err.body, "<h1>bad gateway</h1>");
      return true;
    });
  });
});

describe("helpers", () => {
  test("Retry-After as seconds or an HTTP date", () => {
    const now = Date.parse("2026-11-01T12:00:00Z");
    assert.equal(retryAfterMs("7", now), 7000);
    assert.equal(retryAfterMs("Sun, 01 Nov 2026 12:00:05 GMT", now), 5000);
    assert.equal(retryAfterMs(null, now), undefined);
    assert.equal(retryAfterMs("soon", now), undefined);
  });

  test("the intent's RFC 8785 bytes", () => {
    const intent = newIntent(
      {
        org_id: "0190a8c2-0000-7000-8000-000000000001",
        actor: { id: "agent-7", type: "agent" },
        action: { type: "refund", amount: 120.5, currency: "EUR", target: "é<1>&\u2028" },
        concurrency_scope: "order-1",
        intent_id: "refund-order-1",
        nonce: "n-1",
      },
      new Date("2026-11-01T12:00:00.987Z"),
    );
    assert.equal(
      new TextDecoder().decode(canonicalIntent(intent)),
      '{"action":{"amount":120.5,"currency":"EUR","target":"é<1>&\u2028","type":"refund"},"actor":{"id":"agent-7","type":"agent"},' +
        '"concurrency_scope":"order-1","escalation":{"mode":"NONE"},"intent_id":"refund-order-1","issued_at":"2026-11-01T12:00:00Z",' +
        '"nonce":"n-1","org_id":"0190a8c2-0000-7000-8000-000000000001"}',
    );
    assert.throws(() => canonicalIntent({ ...intent, action: { type: "refund", amount: Number.NaN } }), TypeError);
  });

  test("an intent's JWS header is exactly alg, kid, typ", async () => {
    const key = await AgentKey.generate();
    const signed = await signIntent(key, newIntent({ org_id: "o", actor: { id: "a" }, action: { type: "t" }, concurrency_scope: "s" }));
    const header = Buffer.from(signed.jws.split(".")[0]!, "base64url").toString("utf8");
    assert.equal(header, `{"alg":"EdDSA","kid":"${key.kid}","typ":"clearance-intent+jwt"}`);
    assert.deepEqual(new Uint8Array(Buffer.from(signed.jws.split(".")[1]!, "base64url")), signed.payload);
  });

  test("agent keys: RFC 8037 thumbprint, export and import, never printed", async () => {
    // RFC 8037 appendix A.1 and A.3.
    const rfc = await AgentKey.fromPrivateJwk({
      kty: "OKP", crv: "Ed25519",
      d: "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A",
      x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
    });
    assert.equal(rfc.kid, "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
    assert.deepEqual(rfc.registration(), {
      kid: rfc.kid,
      public_jwk: { kty: "OKP", crv: "Ed25519", x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", kid: rfc.kid, alg: "EdDSA", use: "sig" },
    });
    const key = await AgentKey.generate();
    const exported = await key.exportPrivateJwk();
    assert.equal((await AgentKey.fromPrivateJwk(exported)).kid, key.kid);
    for (const shown of [JSON.stringify(key), String(key), (await import("node:util")).inspect(key)]) {
      assert.ok(!shown.includes(exported.d), shown);
    }
    await assert.rejects(AgentKey.fromPrivateJwk({ ...exported, x: rfc.publicJwk.x, kid: undefined }), TypeError);
    await assert.rejects(AgentKey.fromPrivateJwk({ ...exported, kid: "not-the-thumbprint" }), TypeError);
    await assert.rejects(AgentKey.fromPrivateJwk({ kty: "EC", crv: "P-256", x: "a", d: "b" }), TypeError);
  });
});
