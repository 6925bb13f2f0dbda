import { ClearanceError, isObject } from "./errors.js";
import type { AgentKey } from "./keys.js";
import type { SignedIntent } from "./intent.js";
import type {
  AuthorityDecision,
  ClaimResult,
  EffectEvidence,
  EscalationStatus,
  Finalization,
  FinalOutcome,
  GrantStatus,
  Jwks,
  PublicJwk,
  RegisteredKey,
} from "./types.js";

/** How requests that are safe to repeat are retried. */
export interface RetryOptions {
  /** Retries after the first attempt; 0 turns retrying off. Default 2. */
  maxRetries?: number;
  /** First backoff; doubled on each retry, with jitter. Default 200 ms. */
  baseDelayMs?: number;
  /**
   * The longest wait before a retry. A Retry-After asking for longer is not
   * waited for: the answer is returned (thrown) as it is. Default 5000 ms.
   */
  maxDelayMs?: number;
}

export interface ClientOptions {
  /** The server's origin (and path prefix, if any), e.g. https://clearance.example.com. */
  baseUrl: string;
  /** An org API key (`clr_org_…`) with decision:write, and policy:write to register keys. */
  apiKey: string;
  /** Per-attempt timeout. Default 10000 ms. */
  timeoutMs?: number;
  retry?: RetryOptions;
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
  /** Sent as User-Agent. */
  userAgent?: string;
}

/** Per-call options. */
export interface CallOptions {
  /** Aborts the call, retries included. */
  signal?: AbortSignal;
}

export interface CorrelatedCallOptions extends CallOptions {
  /** Sent as X-Correlation-Id (enforce-and-bind) or correlation_id (claim). */
  correlationId?: string;
}

export interface FinalizeRequest {
  execution_token: string;
  claim_token: string;
  outcome: FinalOutcome;
  effect_evidence?: EffectEvidence;
  /** A provider's signed effect receipt (VP-3), recorded as presented. */
  effect_receipt?: string;
}

interface RequestSpec {
  method: "GET" | "POST";
  path: string;
  body?: unknown;
  /** Set only where the route makes a repeat harmless; makes the call retryable. */
  idempotencyKey?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
}

interface Answer {
  status: number;
  contentType: string;
  body: unknown;
  requestId: string | undefined;
}

const DEFAULT_USER_AGENT = "clearance-agent-sdk-typescript/0.1.0";

/**
 * A small client for the routes an agent uses. Error answers are thrown as
 * ClearanceError, except the two refusals that are answers in their own
 * right: a refused claim (ClaimRefused, `should_execute: false`) and a
 * finalization recorded INDETERMINATE after the lease ended.
 *
 * Retries: only GETs and enforce-and-bind (sent with `Idempotency-Key` equal
 * to the signed `intent_id`, which the server treats as the issuance
 * boundary) are retried, on network errors, timeouts, 503 and 429, honouring
 * Retry-After up to `retry.maxDelayMs`. Claim, finalize, verify-token and key
 * registration are sent once: a lost answer is the caller's to resolve.
 */
export class ClearanceClient {
  readonly baseUrl: string;
  readonly #apiKey: string;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #retry: Required<RetryOptions>;
  readonly #userAgent: string;

  constructor(options: ClientOptions) {
    if (!options.baseUrl) {
      throw new TypeError("clearance: baseUrl is required");
    }
    if (!options.apiKey) {
      throw new TypeError("clearance: apiKey is required");
    }
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#apiKey = options.apiKey;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#retry = {
      maxRetries: options.retry?.maxRetries ?? 2,
      baseDelayMs: options.retry?.baseDelayMs ?? 200,
      maxDelayMs: options.retry?.maxDelayMs ?? 5_000,
    };
    this.#userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
  }

  /** POST /v1/execution/agent-keys: registers the agent's public key (201, or 200 if unchanged). */
  async registerAgentKey(key: AgentKey | { kid: string; public_jwk: PublicJwk }, options: CallOptions = {}): Promise<RegisteredKey> {
    const body = "registration" in key ? key.registration() : key;
    const a = await this.#send({ method: "POST", path: "/v1/execution/agent-keys", body, signal: options.signal });
    return this.#expect<RegisteredKey>(a, 200, 201);
  }

  /**
   * POST /v1/authority/enforce-and-bind: decides on a signed intent. The
   * answer carries `execution_token` only for ALLOW in ENFORCEMENT.
   */
  async enforceAndBind(intent: SignedIntent | string, options: CorrelatedCallOptions = {}): Promise<AuthorityDecision> {
    const jws = typeof intent === "string" ? intent : intent.jws;
    const intentId = typeof intent === "string" ? intentIdOf(intent) : intent.intent.intent_id;
    const headers: Record<string, string> = {};
    if (options.correlationId !== undefined) {
      headers["X-Correlation-Id"] = options.correlationId;
    }
    const spec: RequestSpec = { method: "POST", path: "/v1/authority/enforce-and-bind", body: { signed_intent: jws }, headers, signal: options.signal };
    if (intentId !== undefined) {
      spec.idempotencyKey = intentId;
    }
    return this.#expect<AuthorityDecision>(await this.#send(spec), 200);
  }

  /**
   * POST /v1/execution/claim-token: claims a grant immediately before the
   * downstream commit. Resolves to the refusal (should_execute false, `code`)
   * for a 409 or 503 FailedClaim body; execute only on should_execute true.
   */
  async claim(executionToken: string, intentHash: string, options: CorrelatedCallOptions = {}): Promise<ClaimResult> {
    const body: Record<string, string> = { execution_token: executionToken, intent_hash: intentHash };
    if (options.correlationId !== undefined) {
      body["correlation_id"] = options.correlationId;
    }
    const a = await this.#send({ method: "POST", path: "/v1/execution/claim-token", body, signal: options.signal });
    if (a.status === 200 && isObject(a.body) && a.body["should_execute"] === true) {
      return a.body as unknown as ClaimResult;
    }
    if ((a.status === 409 || a.status === 503) && isJson(a) && isObject(a.body) && a.body["should_execute"] === false) {
      return a.body as unknown as ClaimResult;
    }
    throw new ClearanceError(a.status, a.body, a.requestId);
  }

  /**
   * POST /v1/execution/finalize-token: records the attempt's outcome. A 409
   * whose body is a finalization (recorded INDETERMINATE: the lease had
   * ended) resolves to it, `code` set; every other refusal is thrown.
   */
  async finalize(request: FinalizeRequest, options: CallOptions = {}): Promise<Finalization> {
    const a = await this.#send({ method: "POST", path: "/v1/execution/finalize-token", body: request, signal: options.signal });
    if (a.status === 409 && isJson(a) && isObject(a.body) && typeof a.body["outcome"] === "string") {
      return a.body as unknown as Finalization;
    }
    return this.#expect<Finalization>(a, 200);
  }

  /** POST /v1/execution/verify-token: checks an unclaimed grant without consuming it. */
  async verifyToken(executionToken: string, intentHash: string, options: CallOptions = {}): Promise<GrantStatus> {
    const body = { execution_token: executionToken, intent_hash: intentHash };
    return this.#expect<GrantStatus>(await this.#send({ method: "POST", path: "/v1/execution/verify-token", body, signal: options.signal }), 200);
  }

  /** GET /v1/authority/escalations/{id}: a managed escalation's status; the grant at GRANT_READY. */
  async escalation(escalationId: string, options: CallOptions = {}): Promise<EscalationStatus> {
    const path = `/v1/authority/escalations/${encodeURIComponent(escalationId)}`;
    return this.#expect<EscalationStatus>(await this.#send({ method: "GET", path, signal: options.signal }), 200);
  }

  /** GET /v1/protocol/dossiers/{id}: the decision's dossier (canonical JSON). */
  async dossier(dossierId: string, options: CallOptions = {}): Promise<Record<string, unknown>> {
    const path = `/v1/protocol/dossiers/${encodeURIComponent(dossierId)}`;
    return this.#expect<Record<string, unknown>>(await this.#send({ method: "GET", path, signal: options.signal }), 200);
  }

  /** GET /.well-known/clearance-execution-grant-jwks.json: the keys that sign grants and attestations. */
  async jwks(options: CallOptions = {}): Promise<Jwks> {
    const a = await this.#send({ method: "GET", path: "/.well-known/clearance-execution-grant-jwks.json", signal: options.signal });
    return this.#expect<Jwks>(a, 200);
  }

  #expect<T>(a: Answer, ...ok: number[]): T {
    if (ok.includes(a.status) && isJson(a)) {
      return a.body as T;
    }
    throw new ClearanceError(a.status, a.body, a.requestId);
  }

  async #send(spec: RequestSpec): Promise<Answer> {
    const retryable = spec.method === "GET" || spec.idempotencyKey !== undefined;
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#apiKey}`,
      Accept: "application/json, application/problem+json",
      "User-Agent": this.#userAgent,
      ...spec.headers,
    };
    let payload: string | undefined;
    if (spec.body !== undefined) {
      headers["Content-Type"] = "application/json";
      payload = JSON.stringify(spec.body);
    }
    if (spec.idempotencyKey !== undefined) {
      headers["Idempotency-Key"] = spec.idempotencyKey;
    }
    const url = this.baseUrl + spec.path;
    for (let attempt = 0; ; attempt++) {
      const signals = [AbortSignal.timeout(this.#timeoutMs)];
      if (spec.signal) {
        signals.push(spec.signal);
      }
      let res: Response;
      try {
        const init: RequestInit = { method: spec.method, headers, signal: AbortSignal.any(signals) };
        if (payload !== undefined) {
          init.body = payload;
        }
        res = await this.#fetch(url, init);
      } catch (err) {
        if (spec.signal?.aborted || !retryable || attempt >= this.#retry.maxRetries || !isTransient(err)) {
          throw err;
        }
        await sleep(this.#backoff(attempt), spec.signal);
        continue;
      }
      if (retryable && (res.status === 503 || res.status === 429) && attempt < this.#retry.maxRetries) {
        const wait = retryAfterMs(res.headers.get("Retry-After")) ?? this.#backoff(attempt);
        if (wait <= this.#retry.maxDelayMs) {
          await res.body?.cancel();
          await sleep(wait, spec.signal);
          continue;
        }
      }
      return readAnswer(res);
    }
  }

  /** Exponential backoff with jitter in [d/2, d], capped. */
  #backoff(attempt: number): number {
    const d = Math.min(this.#retry.baseDelayMs * 2 ** attempt, this.#retry.maxDelayMs);
    return d / 2 + Math.random() * (d / 2);
  }
}

async function readAnswer(res: Response): Promise<Answer> {
  const contentType = (res.headers.get("Content-Type") ?? "").split(";")[0]!.trim().toLowerCase();
  const text = await res.text();
  let body: unknown = text;
  if (contentType.endsWith("json") && text !== "") {
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
  }
  return { status: res.status, contentType, body, requestId: res.headers.get("X-Request-Id") ?? undefined };
}

/** Whether a's body is JSON (application/json, problem+json, jwk-set+json, …) that parsed. */
function isJson(a: Answer): boolean {
  return a.contentType.endsWith("json") && typeof a.body !== "string";
}

/** Network failures (fetch's TypeError) and per-attempt timeouts; never the caller's abort. */
function isTransient(err: unknown): boolean {
  return err instanceof TypeError || (err instanceof DOMException && err.name === "TimeoutError");
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) {
    return undefined;
  }
  const v = value.trim();
  if (/^\d+$/.test(v)) {
    return Number(v) * 1000;
  }
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The intent_id inside a compact JWS intent, read without verifying (it only names the idempotency key). */
function intentIdOf(jws: string): string | undefined {
  const parts = jws.split(".");
  if (parts.length !== 3 || parts[1] === undefined) {
    return undefined;
  }
  try {
    const payload: unknown = JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8"));
    return isObject(payload) && typeof payload["intent_id"] === "string" ? payload["intent_id"] : undefined;
  } catch {
    return undefined;
  }
}
