import { createHash, randomBytes, randomUUID } from "node:crypto";
import canonicalize from "canonicalize";
import type { AgentKey } from "./keys.js";
import type { ExecutionIntent } from "./types.js";

/** The JWS typ of an execution intent. */
export const TYP_INTENT = "clearance-intent+jwt";

/**
 * What the caller states about an intent; newIntent fills the rest.
 * `intent_id` (default: a random UUID) is the issuance boundary: the same
 * signed intent sent again answers the same decision. `nonce` defaults to
 * 128 random bits, `issued_at` to now, `escalation` to {mode: "NONE"}.
 */
export type IntentFields = Omit<ExecutionIntent, "intent_id" | "nonce" | "issued_at" | "escalation"> &
  Partial<Pick<ExecutionIntent, "intent_id" | "nonce" | "escalation">> & { issued_at?: string | Date };

/** A signed intent: the JWS to send and what the server will derive from it. */
export interface SignedIntent {
  /** The intent as signed. */
  intent: ExecutionIntent;
  /** The compact JWS, the `signed_intent` of enforce-and-bind. */
  jws: string;
  /** The RFC 8785 bytes that were signed. */
  payload: Uint8Array;
  /** `sha256:` + hex SHA-256 of payload: the intent_hash the server answers. */
  intentHash: string;
}

/** Builds an execution intent from fields, filling ids, nonce and time. */
export function newIntent(fields: IntentFields, now: Date = new Date()): ExecutionIntent {
  const { issued_at, intent_id, nonce, escalation, ...rest } = fields;
  return {
    ...rest,
    intent_id: intent_id ?? randomUUID(),
    nonce: nonce ?? randomBytes(16).toString("base64url"),
    escalation: escalation ?? { mode: "NONE" },
    issued_at: typeof issued_at === "string" ? issued_at : rfc3339Seconds(issued_at ?? now),
  };
}

/**
 * The RFC 8785 (JCS) bytes of an intent: what is signed and hashed. The
 * server refuses a payload that is not its own canonical form, so the bytes
 * are never produced any other way.
 */
export function canonicalIntent(intent: ExecutionIntent): Uint8Array {
  const amount = intent.action.amount;
  if (amount !== undefined && (typeof amount !== "number" || !Number.isFinite(amount) || amount < 0)) {
    throw new TypeError("intent: action.amount must be a finite, non-negative number");
  }
  const text = canonicalize(intent);
  if (text === undefined) {
    throw new TypeError("intent: not JSON-serializable");
  }
  return new TextEncoder().encode(text);
}

/**
 * Signs an intent with the agent's key: the RFC 8785 bytes as a compact JWS
 * with the protected header exactly {"alg":"EdDSA","kid":…,"typ":"clearance-intent+jwt"}.
 */
export async function signIntent(key: AgentKey, intent: ExecutionIntent): Promise<SignedIntent> {
  const payload = canonicalIntent(intent);
  const jws = await key.signCompact(payload, TYP_INTENT);
  return { intent, jws, payload, intentHash: sha256Digest(payload) };
}

/** `sha256:` + lowercase hex SHA-256, the digest form Clearance uses everywhere. */
export function sha256Digest(data: Uint8Array | string): string {
  return "sha256:" + createHash("sha256").update(data).digest("hex");
}

/** RFC 3339 in UTC with whole seconds, e.g. 2026-11-01T12:00:00Z. */
function rfc3339Seconds(t: Date): string {
  if (Number.isNaN(t.getTime())) {
    throw new TypeError("intent: issued_at is not a valid date");
  }
  return t.toISOString().replace(/\.\d{3}Z$/, "Z");
}
