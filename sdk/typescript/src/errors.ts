import type { Problem } from "./types.js";

/**
 * An error answer from Clearance. For an `application/problem+json` body
 * `code`, `title` and `detail` are the problem's; for any other body `code`
 * is `HTTP_<status>`. `body` is the parsed JSON body (or the raw text when it
 * is not JSON), so nothing the server said is lost.
 */
export class ClearanceError extends Error {
  override readonly name = "ClearanceError";
  /** The HTTP status. */
  readonly status: number;
  /** The stable machine code, e.g. `INTENT_SIGNATURE_INVALID`. */
  readonly code: string;
  readonly title: string | undefined;
  readonly detail: string | undefined;
  /** The server's X-Request-Id, to quote when asking about this answer. */
  readonly requestId: string | undefined;
  /** The problem's offending fields, when known. */
  readonly fieldErrors: readonly { field: string; message: string }[];
  readonly body: unknown;

  constructor(status: number, body: unknown, requestId?: string) {
    const p: Problem = isObject(body) ? (body as Problem) : {};
    const code = typeof p.code === "string" && p.code !== "" ? p.code : `HTTP_${status}`;
    const detail = typeof p.detail === "string" ? p.detail : undefined;
    super(`clearance: ${status} ${code}${detail ? `: ${detail}` : ""}`);
    this.status = status;
    this.code = code;
    this.title = typeof p.title === "string" ? p.title : undefined;
    this.detail = detail;
    this.requestId = requestId ?? (typeof p.request_id === "string" ? p.request_id : undefined);
    this.fieldErrors = Array.isArray(p.errors) ? p.errors : [];
    this.body = body;
  }
}

/**
 * Thrown from inside a guarded action to say "I may have acted and cannot
 * tell": the cycle then finalizes INDETERMINATE instead of FAILED. Use it when
 * a request left for the downstream system and its answer was lost.
 */
export class IndeterminateError extends Error {
  override readonly name = "IndeterminateError";
  constructor(message = "the action's effect is unknown", options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Why a claim attestation was refused. */
export type AttestationRefusal =
  | "MALFORMED"
  | "HEADER"
  | "UNKNOWN_KEY"
  | "SIGNATURE"
  | "AUDIENCE"
  | "ISSUER"
  | "EXPIRED"
  | "NOT_YET_VALID"
  | "CLAIMS"
  | "BINDING";

/** A claim attestation that did not verify; `reason` says which check refused it. */
export class AttestationError extends Error {
  override readonly name = "AttestationError";
  readonly reason: AttestationRefusal;
  constructor(reason: AttestationRefusal, message: string, options?: { cause?: unknown }) {
    super(`attestation refused (${reason}): ${message}`, options);
    this.reason = reason;
  }
}

/** Why a webhook signature was refused, as Go's webhook.Verify tells them apart. */
export type WebhookRefusal = "MALFORMED" | "TIMESTAMP" | "MISMATCH";

/** A webhook delivery whose X-Clearance-Signature does not verify. */
export class WebhookSignatureError extends Error {
  override readonly name = "WebhookSignatureError";
  readonly reason: WebhookRefusal;
  constructor(reason: WebhookRefusal, message: string) {
    super(`webhook signature refused (${reason}): ${message}`);
    this.reason = reason;
  }
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * The guarded cycle claimed a grant (and may have run the action) but could
 * not record the outcome: finalize failed. `outcome` is what it tried to
 * record; finalize again with the claim's token, or reconcile the execution
 * (`/v1/execution/reconciliations`) if the claim lease has ended.
 */
export class FinalizationError extends Error {
  override readonly name = "FinalizationError";
  readonly outcome: "COMMITTED" | "FAILED" | "INDETERMINATE";
  readonly grantId: string;
  declare readonly executionToken: string;
  declare readonly claimToken: string;
  /** Whether the action was called. */
  readonly ran: boolean;
  constructor(
    fields: { outcome: "COMMITTED" | "FAILED" | "INDETERMINATE"; grantId: string; executionToken: string; claimToken: string; ran: boolean },
    cause: unknown,
  ) {
    super(`clearance: finalizing grant ${fields.grantId} as ${fields.outcome} failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.outcome = fields.outcome;
    this.grantId = fields.grantId;
    this.ran = fields.ran;
    // Not enumerable: logging the error must not print the tokens.
    Object.defineProperty(this, "executionToken", { value: fields.executionToken, enumerable: false });
    Object.defineProperty(this, "claimToken", { value: fields.claimToken, enumerable: false });
  }
}
