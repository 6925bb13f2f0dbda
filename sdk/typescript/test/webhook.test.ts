// Webhook signatures: deliveries a real `clearance serve` signs and sends,
// before and during a secret rotation, and the refusals of Go's webhook.Verify.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { IncomingHttpHeaders, Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { WebhookSignatureError, signWebhookPayload, verifyWebhookSignature } from "../src/index.js";
import { call, createEnforcingOrg, startServer } from "./server.js";
import type { TestServer } from "./server.js";

interface Delivery {
  headers: IncomingHttpHeaders;
  body: Buffer;
}

let server: TestServer;
let receiver: Server;
let receiverUrl: string;
let orgId: string;
let apiKey: string;
const waiting: ((d: Delivery) => void)[] = [];
const delivered: Delivery[] = [];

/** The next delivery the receiver gets (or one already waiting). */
function nextDelivery(): Promise<Delivery> {
  const ready = delivered.shift();
  if (ready) {
    return Promise.resolve(ready);
  }
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no webhook delivery within 30 s:\n${server.output()}`)), 30_000);
    waiting.push((d) => {
      clearTimeout(timer);
      resolve(d);
    });
  });
}

before(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      res.writeHead(200).end();
      const d = { headers: req.headers, body: Buffer.concat(chunks) };
      const w = waiting.shift();
      if (w) {
        w(d);
      } else {
        delivered.push(d);
      }
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/clearance-hook`;
  server = await startServer(["--allow-private-destinations"]);
  ({ orgId, apiKey } = await createEnforcingOrg(server, "SDK TS webhooks"));
});

after(async () => {
  await server?.stop();
  await new Promise((resolve) => receiver?.close(resolve));
});

async function connect(secret: string): Promise<void> {
  const r = await call(server.url, apiKey, "POST", `/v1/orgs/${orgId}/integrations/WEBHOOK/connect`, {
    config: { endpoint_url: receiverUrl },
    credentials: { webhook_secret: secret },
    subscriptions: [{ event_name: "decision.resolved", is_enabled: true }],
  });
  assert.ok(r.status === 200 || r.status === 201, JSON.stringify(r.body));
}

async function decide(amount: number): Promise<string> {
  const r = await call(server.url, apiKey, "POST", "/v1/protocol/evaluate-decision", { decision_type: "PAYMENT", amount });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return (r.body as { decision_id: string }).decision_id;
}

const refusal = (reason: string) => (err: unknown) => {
  assert.ok(err instanceof WebhookSignatureError, String(err));
  assert.equal(err.reason, reason);
  return true;
};

describe("webhook deliveries from a real server", () => {
  const first = "whsec-first-0123456789abcdef0123456789abcdef";
  const second = "whsec-second-0123456789abcdef0123456789abcdef";

  test("a delivery verifies with its secret; a tampered body, another secret or an old one do not", async () => {
    await connect(first);
    const decisionId = await decide(500);
    const d = await nextDelivery();
    assert.equal(d.headers["x-clearance-event"], "decision.resolved");
    const header = d.headers["x-clearance-signature"];
    assert.equal(typeof header, "string");
    const sig = header as string;
    assert.equal(JSON.parse(d.body.toString("utf8")).decision_id, decisionId);

    const signedAt = verifyWebhookSignature(sig, d.body, first);
    assert.ok(Math.abs(signedAt.getTime() - Date.now()) < 60_000);
    // Our signer writes exactly what the server wrote.
    assert.equal(signWebhookPayload(d.body, signedAt, first), sig);
    // A string body (the raw text) verifies the same.
    verifyWebhookSignature(sig, d.body.toString("utf8"), first);

    const tampered = Buffer.from(d.body.toString("utf8").replace('"PAYMENT"', '"PAYMENX"'));
    assert.notDeepEqual(tampered, d.body);
    assert.throws(() => verifyWebhookSignature(sig, tampered, first), refusal("MISMATCH"));
    assert.throws(() => verifyWebhookSignature(sig, d.body, second), refusal("MISMATCH"));
    const late = new Date(signedAt.getTime() + 301_000);
    assert.throws(() => verifyWebhookSignature(sig, d.body, first, { now: late }), refusal("TIMESTAMP"));
    verifyWebhookSignature(sig, d.body, first, { now: new Date(signedAt.getTime() + 300_000) });
    const early = new Date(signedAt.getTime() - 301_000);
    assert.throws(() => verifyWebhookSignature(sig, d.body, first, { now: early }), refusal("TIMESTAMP"));
  });

  test("during a rotation a delivery carries both secrets' signatures and either verifies", async () => {
    await connect(second);
    await decide(600);
    const d = await nextDelivery();
    const sig = d.headers["x-clearance-signature"] as string;
    assert.equal(sig.split(",").filter((p) => p.startsWith("v1=")).length, 2, sig);
    verifyWebhookSignature(sig, d.body, first);
    verifyWebhookSignature(sig, d.body, second);
    assert.throws(() => verifyWebhookSignature(sig, d.body, "whsec-neither"), refusal("MISMATCH"));
  });
});

describe("webhook signature format", () => {
  const body = '{"type":"decision.resolved"}';
  const now = new Date("2026-11-01T12:00:00Z");
  const good = signWebhookPayload(body, now, "s3cret");

  test("malformed headers are refused as Go refuses them", () => {
    for (const header of [
      "",
      "t=1",
      "v1=" + "a".repeat(64),
      good + ",t=1",
      "t=-1,v1=" + "a".repeat(64),
      "t=+1,v1=" + "a".repeat(64),
      "t=x,v1=" + "a".repeat(64),
      "t=1,v1=abc",
      "t=1,garbage",
      undefined,
      [good, good],
    ]) {
      assert.throws(() => verifyWebhookSignature(header, body, "s3cret", { now }), refusal("MALFORMED"), String(header));
    }
  });

  test("unknown schemes and spaces are ignored; the secret may be bytes", () => {
    const [t, v1] = good.split(",") as [string, string];
    verifyWebhookSignature(`${t}, v0=zz, ${v1}`, body, "s3cret", { now });
    verifyWebhookSignature(good, Buffer.from(body), new TextEncoder().encode("s3cret"), { now });
    verifyWebhookSignature([good], body, "s3cret", { now });
    assert.throws(() => verifyWebhookSignature(`${t},v0=${v1.slice(3)}`, body, "s3cret", { now }), refusal("MALFORMED"));
  });
});
