import { createHmac, timingSafeEqual } from "node:crypto";
import { WebhookSignatureError } from "./errors.js";

/** The header that carries a delivery's signature. */
export const SIGNATURE_HEADER = "X-Clearance-Signature";
/** How far a signature's t may be from the receiver's clock, either way (Go: webhook.DefaultTolerance). */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export interface VerifyWebhookOptions {
  /** The receiver's clock; default now. */
  now?: Date;
  /** Default 300 (five minutes). */
  toleranceSeconds?: number;
}

/**
 * Verifies a Clearance webhook delivery, as Go's webhook.Verify does.
 * `header` is the X-Clearance-Signature value, "t=<unix>,v1=<hex>[,v1=<hex>…]"
 * (Node's `req.headers["x-clearance-signature"]` as it comes);
 * `body` the raw request body exactly as received, before any JSON parsing;
 * `secret` the signing secret given to (or by) Clearance, as a string or
 * bytes. It accepts when t is within the tolerance of now and any v1 is the
 * HMAC-SHA256 of "<t>." + body under the secret (compared in constant time).
 * During a secret rotation a delivery carries one v1 per active secret, so
 * either secret verifies. Unknown schemes (v0, v2, …) are ignored.
 *
 * Throws WebhookSignatureError (reason MALFORMED, TIMESTAMP or MISMATCH);
 * returns the signature's time. Then dedupe on X-Clearance-Delivery-Id.
 */
export function verifyWebhookSignature(
  header: string | string[] | undefined,
  body: string | Uint8Array,
  secret: string | Uint8Array,
  options: VerifyWebhookOptions = {},
): Date {
  const tolerance = options.toleranceSeconds !== undefined && options.toleranceSeconds > 0 ? options.toleranceSeconds : DEFAULT_TOLERANCE_SECONDS;
  const single = Array.isArray(header) && header.length === 1 ? header[0] : header;
  if (typeof single !== "string") {
    throw new WebhookSignatureError("MALFORMED", `want one ${SIGNATURE_HEADER} header`);
  }
  let ts: string | undefined;
  const sigs: Buffer[] = [];
  for (const part of single.split(",")) {
    const item = part.trim();
    const eq = item.indexOf("=");
    if (eq < 0) {
      throw new WebhookSignatureError("MALFORMED", `${JSON.stringify(part)} has no '='`);
    }
    const key = item.slice(0, eq);
    const value = item.slice(eq + 1);
    if (key === "t") {
      if (ts !== undefined) {
        throw new WebhookSignatureError("MALFORMED", "t twice");
      }
      ts = value;
    } else if (key === "v1") {
      if (!/^[0-9a-fA-F]{64}$/.test(value)) {
        throw new WebhookSignatureError("MALFORMED", "v1 is not 64 hex digits");
      }
      sigs.push(Buffer.from(value, "hex"));
    }
  }
  if (ts === undefined || !/^[0-9]{1,18}$/.test(ts)) {
    throw new WebhookSignatureError("MALFORMED", "t is not unix seconds");
  }
  if (sigs.length === 0) {
    throw new WebhookSignatureError("MALFORMED", "no v1");
  }
  const signedAt = Number(ts);
  const nowMs = (options.now ?? new Date()).getTime();
  const skewMs = nowMs - signedAt * 1000;
  if (Math.abs(skewMs) > tolerance * 1000) {
    throw new WebhookSignatureError("TIMESTAMP", `t is ${Math.round(skewMs / 1000)} s from now, more than ${tolerance} s`);
  }
  const want = mac(secret, ts, body);
  let ok = false;
  for (const sig of sigs) {
    ok = timingSafeEqual(sig, want) || ok; // every v1 is compared, so timing does not tell which matched
  }
  if (!ok) {
    throw new WebhookSignatureError("MISMATCH", "no v1 is the body's HMAC under the secret");
  }
  return new Date(signedAt * 1000);
}

/**
 * The X-Clearance-Signature value of `body` sent at `at`, one v1 per secret,
 * exactly as Go's webhook.Sign writes it: for testing a receiver.
 */
export function signWebhookPayload(body: string | Uint8Array, at: Date, ...secrets: (string | Uint8Array)[]): string {
  const ts = String(Math.floor(at.getTime() / 1000));
  return ["t=" + ts, ...secrets.map((s) => "v1=" + mac(s, ts, body).toString("hex"))].join(",");
}

function mac(secret: string | Uint8Array, ts: string, body: string | Uint8Array): Buffer {
  return createHmac("sha256", secret).update(ts).update(".").update(body).digest();
}
