// @clearance/agent-sdk: the agent side of Clearance's grant → claim → finalize
// cycle, and the checks a downstream system or webhook receiver makes.
export { AgentKey } from "./keys.js";
export { TYP_INTENT, canonicalIntent, newIntent, sha256Digest, signIntent } from "./intent.js";
export type { IntentFields, SignedIntent } from "./intent.js";
export { ClearanceClient, retryAfterMs } from "./client.js";
export type { CallOptions, ClientOptions, CorrelatedCallOptions, FinalizeRequest, RetryOptions } from "./client.js";
export { ClearanceAgent } from "./agent.js";
export type { ActionOutcome, AgentOptions, GuardedAction, GuardedContext, GuardedOptions, GuardedResult } from "./agent.js";
export { AUD_ATTESTATION, JWKS_PATH, TYP_ATTESTATION, fetchJwks, verifyClaimAttestation } from "./attestation.js";
export type { AttestationClaims, VerifyAttestationOptions } from "./attestation.js";
export { DEFAULT_TOLERANCE_SECONDS, SIGNATURE_HEADER, signWebhookPayload, verifyWebhookSignature } from "./webhook.js";
export type { VerifyWebhookOptions } from "./webhook.js";
export { AttestationError, ClearanceError, FinalizationError, IndeterminateError, WebhookSignatureError } from "./errors.js";
export type { AttestationRefusal, WebhookRefusal } from "./errors.js";
export type * from "./types.js";
