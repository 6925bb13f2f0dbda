import type { ClearanceClient } from "./client.js";
import { FinalizationError, IndeterminateError } from "./errors.js";
import { newIntent, signIntent } from "./intent.js";
import type { IntentFields, SignedIntent } from "./intent.js";
import type { AgentKey } from "./keys.js";
import type { AuthorityDecision, ClaimGranted, ClaimRefused, EffectEvidence, Finalization, FinalOutcome } from "./types.js";

/** What a guarded action receives. */
export interface GuardedContext {
  /**
   * Aborted when the caller's signal aborts or the deadline passes. Pass it
   * to whatever the action calls; once it fires the outcome is recorded
   * INDETERMINATE at once and the action's later result is ignored.
   */
  signal: AbortSignal;
  intent: SignedIntent;
  decision: AuthorityDecision;
  /** The live claim; forward `claim_attestation` to the downstream system. */
  claim: ClaimGranted;
}

/** What a guarded action may return: its value and evidence of the effect. */
export interface ActionOutcome<T> {
  value?: T;
  /** Digest-bound evidence; status CONFIRMED with the expected digest confirms the effect. */
  evidence?: EffectEvidence;
  /** A provider's signed effect receipt (VP-3). */
  effectReceipt?: string;
}

export type GuardedAction<T> = (ctx: GuardedContext) => Promise<ActionOutcome<T> | void> | ActionOutcome<T> | void;

export interface GuardedOptions {
  /** Aborting before the claim stops the cycle; after it, see GuardedContext.signal. */
  signal?: AbortSignal;
  /** The longest the action may run; it never runs past the claim lease minus leaseMarginMs. */
  timeoutMs?: number;
  /**
   * How long before the claim lease ends the action is cut off, leaving time
   * to finalize before the server's lease boundary. Default 3000 ms.
   */
  leaseMarginMs?: number;
  /** Sent as X-Correlation-Id and as the claim's correlation_id. */
  correlationId?: string;
}

/**
 * The result of a guarded cycle. `ran` says whether the action was called:
 * it is true only after a live claim (should_execute true).
 */
export type GuardedResult<T> =
  | { status: "NOT_AUTHORIZED"; ran: false; intent: SignedIntent; decision: AuthorityDecision }
  | { status: "CLAIM_REFUSED"; ran: false; intent: SignedIntent; decision: AuthorityDecision; claim: ClaimRefused }
  | {
      /** The outcome as the server recorded it (INDETERMINATE when the lease had ended). */
      status: FinalOutcome;
      ran: boolean;
      intent: SignedIntent;
      decision: AuthorityDecision;
      claim: ClaimGranted;
      finalization: Finalization;
      value?: T;
      /** Why the outcome is not COMMITTED: the action's error, the abort reason or the timeout. */
      error?: unknown;
    };

export interface AgentOptions {
  client: ClearanceClient;
  key: AgentKey;
  /** The org the agent acts for: the intents' org_id unless the fields name one. */
  orgId: string;
}

/**
 * An agent: a key, an org and a client. `runGuarded` runs an action only
 * under a live claim of a grant bound to exactly that action.
 */
export class ClearanceAgent {
  readonly client: ClearanceClient;
  readonly key: AgentKey;
  readonly orgId: string;

  constructor(options: AgentOptions) {
    this.client = options.client;
    this.key = options.key;
    this.orgId = options.orgId;
  }

  /** Builds (newIntent) and signs an intent; org_id defaults to the agent's org. */
  async signIntent(fields: Omit<IntentFields, "org_id"> & { org_id?: string }): Promise<SignedIntent> {
    return signIntent(this.key, newIntent({ ...fields, org_id: fields.org_id ?? this.orgId }));
  }

  /**
   * The guarded cycle: sign the intent → enforce-and-bind → claim → run
   * `action` → finalize. The action runs at most once, and only when the
   * claim answered should_execute true. The rule for the recorded outcome:
   *
   * - no grant (BLOCK, ESCALATE, REVIEW_REQUIRED, SHADOW): NOT_AUTHORIZED,
   *   nothing claimed, the action not run;
   * - the claim refused (409/503, should_execute false): CLAIM_REFUSED, not run;
   * - the action returns: COMMITTED, with the evidence it returned;
   * - the action throws IndeterminateError ("I may have acted"): INDETERMINATE;
   * - the action throws anything else: FAILED (it did not act);
   * - the caller's signal aborts or the deadline passes while the action
   *   runs: INDETERMINATE at once, because the process cannot know what the
   *   action did; its later result is ignored;
   * - the signal aborted, or the lease nearly over, after the claim but
   *   before the action starts: FAILED, the action not run.
   *
   * Errors of Clearance itself (network, problem answers) are thrown before
   * the claim; after a live claim a failed finalize is thrown as a
   * FinalizationError naming the outcome to record.
   */
  async runGuarded<T>(
    fields: SignedIntent | (Omit<IntentFields, "org_id"> & { org_id?: string }),
    action: GuardedAction<T>,
    options: GuardedOptions = {},
  ): Promise<GuardedResult<T>> {
    const intent = "jws" in fields && "intentHash" in fields ? fields : await this.signIntent(fields);
    const call = { ...(options.signal ? { signal: options.signal } : {}), ...(options.correlationId !== undefined ? { correlationId: options.correlationId } : {}) };

    const decision = await this.client.enforceAndBind(intent, call);
    if (decision.intent_hash !== intent.intentHash) {
      // The server hashed other bytes than we signed: do not act on it.
      throw new Error(`clearance: the server's intent_hash ${decision.intent_hash} is not the signed intent's ${intent.intentHash}`);
    }
    if (!decision.execution_token) {
      return { status: "NOT_AUTHORIZED", ran: false, intent, decision };
    }
    const executionToken = decision.execution_token;

    options.signal?.throwIfAborted();
    const claim = await this.client.claim(executionToken, decision.intent_hash, call);
    const claimedAt = Date.now();
    if (claim.should_execute !== true || !claim.claim_token) {
      return { status: "CLAIM_REFUSED", ran: false, intent, decision, claim: claim as ClaimRefused };
    }

    const deadline = Math.min(
      claimedAt + leaseMs(claim) - (options.leaseMarginMs ?? 3000),
      options.timeoutMs !== undefined ? claimedAt + options.timeoutMs : Infinity,
    );
    const run = await runUntil(action, { intent, decision, claim }, deadline, options.signal);

    let outcome: FinalOutcome;
    const request: { effect_evidence?: EffectEvidence; effect_receipt?: string } = {};
    switch (run.kind) {
      case "returned":
        outcome = "COMMITTED";
        if (run.outcome?.evidence) {
          request.effect_evidence = run.outcome.evidence;
        }
        if (run.outcome?.effectReceipt !== undefined) {
          request.effect_receipt = run.outcome.effectReceipt;
        }
        break;
      case "threw":
        outcome = run.error instanceof IndeterminateError ? "INDETERMINATE" : "FAILED";
        break;
      case "interrupted":
        outcome = "INDETERMINATE";
        break;
      case "not-started":
        outcome = "FAILED";
        break;
    }

    let finalization: Finalization;
    try {
      // Never with the caller's signal: an aborted cycle must still record its outcome.
      finalization = await this.client.finalize({ execution_token: executionToken, claim_token: claim.claim_token, outcome, ...request });
    } catch (err) {
      throw new FinalizationError(
        { outcome, grantId: claim.grant_id, executionToken, claimToken: claim.claim_token, ran: run.kind !== "not-started" },
        err,
      );
    }
    const result: GuardedResult<T> = {
      status: finalization.outcome,
      ran: run.kind !== "not-started",
      intent,
      decision,
      claim,
      finalization,
    };
    if (run.kind === "returned" && run.outcome?.value !== undefined) {
      result.value = run.outcome.value;
    }
    if (run.kind !== "returned") {
      result.error = run.error;
    }
    return result;
  }
}

type RunResult<T> =
  | { kind: "returned"; outcome: ActionOutcome<T> | void }
  | { kind: "threw"; error: unknown }
  | { kind: "interrupted"; error: unknown }
  | { kind: "not-started"; error: unknown };

/**
 * Runs action unless the signal has aborted or the deadline has passed, and
 * settles with whichever comes first: its result, the caller's abort or the
 * deadline.
 */
async function runUntil<T>(
  action: GuardedAction<T>,
  ctx: Omit<GuardedContext, "signal">,
  deadline: number,
  signal: AbortSignal | undefined,
): Promise<RunResult<T>> {
  if (signal?.aborted) {
    return { kind: "not-started", error: signal.reason };
  }
  const remaining = deadline - Date.now();
  if (remaining <= 0) {
    return { kind: "not-started", error: new DOMException("too little of the claim lease is left to run the action", "TimeoutError") };
  }
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  const timer = setTimeout(() => controller.abort(new DOMException("the guarded action's deadline passed", "TimeoutError")), remaining);
  const interrupted = new Promise<RunResult<T>>((resolve) => {
    controller.signal.addEventListener("abort", () => resolve({ kind: "interrupted", error: controller.signal.reason }), { once: true });
  });
  const running = (async (): Promise<RunResult<T>> => {
    try {
      return { kind: "returned", outcome: await action({ ...ctx, signal: controller.signal }) };
    } catch (error) {
      return { kind: "threw", error };
    }
  })();
  try {
    return await Promise.race([running, interrupted]);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

/** The claim lease's length as the attestation states it (exp − iat), else from the lease end. */
function leaseMs(claim: ClaimGranted): number {
  try {
    const payload: unknown = JSON.parse(Buffer.from(claim.claim_attestation.split(".")[1] ?? "", "base64url").toString("utf8"));
    if (typeof payload === "object" && payload !== null) {
      const { iat, exp } = payload as { iat?: unknown; exp?: unknown };
      if (typeof iat === "number" && typeof exp === "number" && exp > iat) {
        return (exp - iat) * 1000;
      }
    }
  } catch {
    // fall through: judge by the lease end and the local clock
  }
  return Date.parse(claim.claim_lease_expires_at) - Date.now();
}
