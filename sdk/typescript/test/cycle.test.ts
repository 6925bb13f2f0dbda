// The guarded cycle, the client and offline attestation checks against a real
// `clearance serve`.
import assert from "node:assert/strict";
import { readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import {
  AgentKey,
  AttestationError,
  ClearanceAgent,
  ClearanceClient,
  ClearanceError,
  IndeterminateError,
  TYP_ATTESTATION,
  fetchJwks,
  sha256Digest,
  verifyClaimAttestation,
} from "../src/index.js";
import type { ClaimGranted, Jwks } from "../src/index.js";
import { createEnforcingOrg, startServer } from "./server.js";
import type { TestServer } from "./server.js";

let server: TestServer;
let client: ClearanceClient;
let agent: ClearanceAgent;
let orgId: string;
let orgKey: string;

before(async () => {
  server = await startServer();
  const org = await createEnforcingOrg(server, "SDK TS");
  orgId = org.orgId;
  orgKey = org.apiKey;
  client = new ClearanceClient({ baseUrl: server.url, apiKey: org.apiKey });
  const key = await AgentKey.generate();
  const registered = await client.registerAgentKey(key);
  assert.equal(registered.kid, key.kid);
  assert.equal(registered.status, "ACTIVE");
  // The same key again is answered unchanged.
  assert.equal((await client.registerAgentKey(key)).kid, key.kid);
  agent = new ClearanceAgent({ client, key, orgId });
});

after(async () => {
  await server?.stop();
});

/** A refund intent with its own concurrency scope, so tests never contend. */
function refund(amount: number, scope: string) {
  return {
    actor: { id: "agent-7", type: "agent" },
    // Non-ASCII, <, > and & and a fractional amount: the RFC 8785 bytes must be exactly the server's.
    action: { type: "refund", amount, currency: "EUR", target: `commande-é<${scope}>&` },
    workflow_key: "refunds",
    decision_type: "REFUND",
    concurrency_scope: scope,
    expected_effect_digest: sha256Digest(`psp refund ${scope} ${amount} EUR`),
  };
}

describe("guarded cycle", () => {
  test("an ALLOW runs the action exactly once and finalizes COMMITTED with confirmed evidence", async () => {
    const fields = refund(120.5, "order-1");
    let calls = 0;
    let attestationGrant = "";
    const result = await agent.runGuarded(fields, async (ctx) => {
      calls++;
      assert.equal(ctx.signal.aborted, false);
      // What the downstream system does before it commits.
      const claims = await verifyClaimAttestation(ctx.claim.claim_attestation, await fetchJwks(server.url), {
        issuer: "clearance",
        intentHash: ctx.intent.intentHash,
        grantId: ctx.claim.grant_id,
        orgId,
      });
      attestationGrant = claims.grant_id;
      return { value: "psp-refund-1", evidence: { kind: "psp.refund", status: "CONFIRMED", effect_digest: fields.expected_effect_digest } };
    });
    assert.equal(calls, 1);
    assert.equal(result.status, "COMMITTED");
    assert.equal(result.ran, true);
    assert.equal(result.value, "psp-refund-1");
    assert.equal(result.decision.outcome, "ALLOW");
    assert.equal(result.decision.mode, "ENFORCEMENT");
    assert.deepEqual(result.decision.reason_codes, ["PROTOCOL_OUTCOME_ALLOW", "NO_RULE_MATCHED", "WITHIN_LIMIT"]);
    assert.equal(result.decision.intent_hash, result.intent.intentHash);
    assert.equal(attestationGrant, result.decision.grant_id);
    assert.equal(result.finalization.outcome, "COMMITTED");
    assert.equal(result.finalization.effect_confirmed, true);
    assert.equal(result.finalization.grant_id, result.decision.grant_id);
    assert.deepEqual(result.finalization.evidence, {
      kind: "psp.refund",
      status: "CONFIRMED",
      effect_digest: fields.expected_effect_digest,
      source: "effect_evidence",
    });
    const dossier = await client.dossier(result.decision.dossier_id);
    assert.equal(dossier["dossier_id"], result.decision.dossier_id);
  });

  test("a BLOCK never runs the action and claims nothing", async () => {
    let calls = 0;
    const result = await agent.runGuarded(refund(1000, "order-blocked"), () => {
      calls++;
    });
    assert.equal(calls, 0);
    assert.equal(result.status, "NOT_AUTHORIZED");
    assert.equal(result.ran, false);
    assert.equal(result.decision.outcome, "BLOCK");
    assert.deepEqual(result.decision.reason_codes, ["PROTOCOL_OUTCOME_BLOCK", "POLICY_MATCHED", "TOO_LARGE"]);
    assert.equal(result.decision.execution_token, undefined);
  });

  test("an action that throws is finalized FAILED and its error returned", async () => {
    const boom = new Error("the PSP refused the refund");
    let calls = 0;
    const result = await agent.runGuarded(refund(10, "order-failed"), () => {
      calls++;
      throw boom;
    });
    assert.equal(calls, 1);
    assert.equal(result.status, "FAILED");
    assert.equal(result.error, boom);
    assert.equal(result.finalization.outcome, "FAILED");
    assert.equal(result.finalization.effect_confirmed, false);
  });

  test("IndeterminateError from the action is finalized INDETERMINATE", async () => {
    const result = await agent.runGuarded(refund(11, "order-lost-answer"), () => {
      throw new IndeterminateError("the PSP's answer was lost");
    });
    assert.equal(result.status, "INDETERMINATE");
    assert.ok(result.error instanceof IndeterminateError);
    assert.equal(result.finalization.outcome, "INDETERMINATE");
  });

  test("an abort while the action runs is finalized INDETERMINATE at once", async () => {
    const controller = new AbortController();
    let sawAbort = false;
    const result = await agent.runGuarded(
      refund(12, "order-aborted"),
      (ctx) =>
        new Promise<void>((_, reject) => {
          ctx.signal.addEventListener("abort", () => {
            sawAbort = true;
            reject(ctx.signal.reason);
          });
          controller.abort(new Error("operator stopped the agent"));
        }),
      { signal: controller.signal },
    );
    assert.equal(sawAbort, true);
    assert.equal(result.status, "INDETERMINATE");
    assert.equal(result.ran, true);
    assert.equal((result.error as Error).message, "operator stopped the agent");
    assert.equal(result.finalization.outcome, "INDETERMINATE");
  });

  test("an action past its timeout is finalized INDETERMINATE and its late result ignored", async () => {
    let finish: () => void = () => {};
    const result = await agent.runGuarded(refund(13, "order-slow"), () => new Promise<void>((resolve) => (finish = resolve)), {
      timeoutMs: 100,
    });
    finish();
    assert.equal(result.status, "INDETERMINATE");
    assert.equal((result.error as DOMException).name, "TimeoutError");
  });

  test("a signal aborted before the cycle claims nothing and never runs the action", async () => {
    let calls = 0;
    await assert.rejects(
      agent.runGuarded(refund(14, "order-never"), () => void calls++, { signal: AbortSignal.abort(new Error("stop")) }),
      /stop/,
    );
    assert.equal(calls, 0);
  });
});

describe("client", () => {
  test("verify-token, a second claim refused, a replayed finalization", async () => {
    const intent = await agent.signIntent(refund(20, "order-manual"));
    const decision = await client.enforceAndBind(intent);
    assert.ok(decision.execution_token);
    // The same signed intent again answers the same decision (intent_id is the idempotency key).
    const again = await client.enforceAndBind(intent);
    assert.equal(again.grant_id, decision.grant_id);

    const status = await client.verifyToken(decision.execution_token, decision.intent_hash);
    assert.equal(status.valid, true);
    assert.equal(status.grant_id, decision.grant_id);
    assert.equal(status.act.target, intent.intent.action.target);

    const first = await client.claim(decision.execution_token, decision.intent_hash);
    assert.equal(first.should_execute, true);
    const second = await client.claim(decision.execution_token, decision.intent_hash);
    assert.equal(second.should_execute, false);
    assert.ok(second.should_execute === false);
    assert.equal(second.code, "CLAIM_REPLAY");
    assert.equal(second.claim_token, null);

    await assert.rejects(client.verifyToken(decision.execution_token, decision.intent_hash), (err: unknown) => {
      assert.ok(err instanceof ClearanceError);
      assert.equal(err.status, 409);
      assert.equal(err.code, "GRANT_ALREADY_CLAIMED");
      return true;
    });

    const granted = first as ClaimGranted;
    const fin = await client.finalize({ execution_token: decision.execution_token, claim_token: granted.claim_token, outcome: "FAILED" });
    assert.equal(fin.outcome, "FAILED");
    await assert.rejects(
      client.finalize({ execution_token: decision.execution_token, claim_token: granted.claim_token, outcome: "COMMITTED" }),
      (err: unknown) => {
        assert.ok(err instanceof ClearanceError);
        assert.equal(err.status, 409);
        assert.equal(err.code, "ALREADY_FINALIZED");
        assert.equal(err.title, "Conflict");
        assert.ok(err.requestId);
        assert.equal((err.body as { code: string }).code, "ALREADY_FINALIZED");
        return true;
      },
    );
  });

  test("the cycle stops at a refused claim without running the action", async () => {
    const intent = await agent.signIntent(refund(21, "order-claimed-elsewhere"));
    const decision = await client.enforceAndBind(intent);
    assert.ok(decision.execution_token);
    const elsewhere = await client.claim(decision.execution_token, decision.intent_hash);
    assert.equal(elsewhere.should_execute, true);
    let calls = 0;
    const result = await agent.runGuarded(intent, () => void calls++);
    assert.equal(calls, 0);
    assert.equal(result.status, "CLAIM_REFUSED");
    assert.ok(result.status === "CLAIM_REFUSED");
    assert.equal(result.claim.code, "CLAIM_REPLAY");
  });

  test("problem answers are ClearanceErrors with status, code and detail", async () => {
    await assert.rejects(client.escalation("00000000-0000-4000-8000-000000000000"), (err: unknown) => {
      assert.ok(err instanceof ClearanceError);
      assert.equal(err.status, 404);
      assert.equal(err.code, "ESCALATION_NOT_FOUND");
      assert.ok(err.detail);
      return true;
    });
    // An intent signed by a key the org never registered.
    const stranger = new ClearanceAgent({ client, key: await AgentKey.generate(), orgId });
    await assert.rejects(client.enforceAndBind(await stranger.signIntent(refund(1, "order-stranger"))), (err: unknown) => {
      assert.ok(err instanceof ClearanceError);
      assert.equal(err.status, 403);
      assert.equal(err.code, "INTENT_SIGNATURE_INVALID");
      return true;
    });
  });
});

describe("claim attestation, offline", () => {
  let attestation: string;
  let grantToken: string;
  let intentHash: string;
  let grantId: string;
  let jwks: Jwks;

  before(async () => {
    const intent = await agent.signIntent(refund(30, "order-attested"));
    const decision = await client.enforceAndBind(intent);
    assert.ok(decision.execution_token && decision.grant_id);
    const claim = await client.claim(decision.execution_token, decision.intent_hash);
    assert.ok(claim.should_execute === true);
    attestation = claim.claim_attestation;
    grantToken = decision.execution_token;
    intentHash = decision.intent_hash;
    grantId = decision.grant_id;
    jwks = await client.jwks();
  });

  const refusal = (reason: string) => (err: unknown) => {
    assert.ok(err instanceof AttestationError, String(err));
    assert.equal(err.reason, reason);
    return true;
  };

  test("verifies against the JWKS and states the grant and binding", async () => {
    const claims = await verifyClaimAttestation(attestation, jwks, { issuer: "clearance", intentHash, grantId, orgId });
    assert.equal(claims.aud, "clearance-downstream");
    assert.equal(claims.grant_id, grantId);
    assert.equal(claims.binding.intent_hash, intentHash);
    assert.equal(claims.binding.scope, "order-attested");
    assert.equal(claims.act.amount, 30);
  });

  test("a tampered payload fails the signature", async () => {
    const [h, p, s] = attestation.split(".") as [string, string, string];
    const claims = JSON.parse(Buffer.from(p, "base64url").toString("utf8"));
    claims.act.amount = 30000;
    const forged = [h, Buffer.from(JSON.stringify(claims)).toString("base64url"), s].join(".");
    await assert.rejects(verifyClaimAttestation(forged, jwks, { issuer: "clearance", intentHash }), refusal("SIGNATURE"));
  });

  test("an unknown kid, another intent, another issuer and an ended lease are refused", async () => {
    const other = await AgentKey.generate();
    await assert.rejects(verifyClaimAttestation(attestation, { keys: [other.publicJwk] }, { issuer: "clearance", intentHash }), refusal("UNKNOWN_KEY"));
    await assert.rejects(
      verifyClaimAttestation(attestation, jwks, { issuer: "clearance", intentHash: sha256Digest("another intent") }),
      refusal("BINDING"),
    );
    await assert.rejects(verifyClaimAttestation(attestation, jwks, { issuer: "clearance", intentHash, grantId: "another" }), refusal("BINDING"));
    await assert.rejects(verifyClaimAttestation(attestation, jwks, { issuer: "https://other.example", intentHash }), refusal("ISSUER"));
    const exp = (JSON.parse(Buffer.from(attestation.split(".")[1]!, "base64url").toString("utf8")) as { exp: number }).exp;
    await assert.rejects(verifyClaimAttestation(attestation, jwks, { issuer: "clearance", intentHash, now: new Date(exp * 1000) }), refusal("EXPIRED"));
  });

  test("the grant itself is not accepted as an attestation", async () => {
    await assert.rejects(verifyClaimAttestation(grantToken, jwks, { issuer: "clearance", intentHash }), refusal("HEADER"));
  });

  test("a wrong audience or an extra header member is refused even when the signature verifies", async () => {
    const signer = await AgentKey.generate();
    const set = { keys: [signer.publicJwk] };
    const claims = JSON.parse(Buffer.from(attestation.split(".")[1]!, "base64url").toString("utf8"));
    const payload = (c: unknown) => new TextEncoder().encode(JSON.stringify(c));
    const wrongAud = await signer.signCompact(payload({ ...claims, aud: "clearance-execution" }), TYP_ATTESTATION);
    await assert.rejects(verifyClaimAttestation(wrongAud, set, { issuer: "clearance", intentHash }), refusal("AUDIENCE"));
    // The same claims with the right audience verify under this JWKS: only aud made the difference.
    const rightAud = await signer.signCompact(payload(claims), TYP_ATTESTATION);
    await verifyClaimAttestation(rightAud, set, { issuer: "clearance", intentHash });

    const header = Buffer.from(JSON.stringify({ alg: "EdDSA", kid: signer.kid, typ: TYP_ATTESTATION, jwk: signer.publicJwk })).toString("base64url");
    const [, p, s] = rightAud.split(".");
    await assert.rejects(verifyClaimAttestation([header, p, s].join("."), set, { issuer: "clearance", intentHash }), refusal("HEADER"));
  });
});

describe("README", () => {
  test("the cycle example runs as printed", async () => {
    const here = dirname(fileURLToPath(import.meta.url)); // dist/test
    const readme = await readFile(join(here, "../../README.md"), "utf8");
    const block = /## The guarded cycle[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    assert.ok(block, "README has the cycle example");
    const js = ts.transpileModule(block, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
    // Inside the package, so "@clearance/agent-sdk" resolves to this build.
    const file = join(here, "readme-cycle.mjs");
    await writeFile(file, js);

    const refunds: { order: string; attestation: string; aborted: boolean }[] = [];
    const globals = globalThis as unknown as { psp?: unknown };
    globals.psp = {
      refund: async (order: string, _amount: number, o: { signal: AbortSignal; attestation: string }) => {
        refunds.push({ order, attestation: o.attestation, aborted: o.signal.aborted });
        return { id: "psp-refund-1" };
      },
    };
    Object.assign(process.env, { CLEARANCE_URL: server.url, CLEARANCE_KEY: orgKey, CLEARANCE_ORG: orgId });
    const printed: unknown[] = [];
    const log = console.log;
    console.log = (...args: unknown[]) => void printed.push(...args);
    try {
      await import(pathToFileURL(file).href);
    } finally {
      console.log = log;
      delete globals.psp;
      await rm(file, { force: true });
    }
    assert.deepEqual(printed, ["COMMITTED"]);
    assert.equal(refunds.length, 1);
    assert.equal(refunds[0]!.order, "order-1");
    assert.equal(refunds[0]!.aborted, false);
    const jwks = await client.jwks();
    const claims = await verifyClaimAttestation(refunds[0]!.attestation, jwks, {
      issuer: "clearance",
      intentHash: JSON.parse(Buffer.from(refunds[0]!.attestation.split(".")[1]!, "base64url").toString("utf8")).binding.intent_hash,
    });
    assert.equal(claims.act.target, "order-1");
  });
});
