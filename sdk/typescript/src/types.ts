// Wire shapes of the routes an agent uses, named as in docs/openapi.yaml.
// Members keep their snake_case wire names so that a body can be compared
// with the server's documentation member by member.

/** A decision outcome, from least to most restrictive. */
export type Outcome = "ALLOW" | "ESCALATE" | "REVIEW_REQUIRED" | "BLOCK";

/** The mode a decision was made in; only ENFORCEMENT authorizes. */
export type Mode = "ENFORCEMENT" | "SHADOW";

/** What a finalization records about the downstream attempt. */
export type FinalOutcome = "COMMITTED" | "FAILED" | "INDETERMINATE";

/** The action an intent asks to run. `amount` is a plain JSON number. */
export interface IntentAction {
  type: string;
  amount?: number;
  currency?: string;
  target?: string;
  parameters?: Record<string, unknown>;
}

/** Who acts; `id` becomes the grant's `sub`. */
export interface Actor {
  id: string;
  type?: string;
}

/**
 * The payload of a signed execution intent (`ExecutionIntent`). The server
 * decodes it strictly: members not listed here are refused.
 */
export interface ExecutionIntent {
  intent_id: string;
  org_id: string;
  actor: Actor;
  action: IntentAction;
  workflow_key?: string;
  decision_type?: string;
  surface?: string;
  context?: Record<string, unknown>;
  nonce: string;
  concurrency_scope: string;
  expected_effect_digest?: string;
  escalation: { mode: "NONE" | "MANAGED" };
  /** RFC 3339; within the server's freshness window (5 minutes by default). */
  issued_at: string;
  parent_decision_id?: string;
}

/** The public OKP/Ed25519 JWK of an agent key. */
export interface PublicJwk {
  kty: "OKP";
  crv: "Ed25519";
  x: string;
  kid?: string;
  alg?: "EdDSA";
  use?: "sig";
}

/** The private OKP/Ed25519 JWK of an agent key; keep it secret. */
export interface PrivateJwk extends PublicJwk {
  d: string;
}

/** An agent, provider or merchant key as the server registered it. */
export interface RegisteredKey {
  org_id: string;
  kind: "agent" | "provider" | "merchant";
  kid: string;
  iss?: string;
  public_jwk: PublicJwk;
  public_key: string;
  status: "ACTIVE" | "REVOKED";
  created_at: string;
  updated_at: string;
  revoked_at: string | null;
}

/** A managed escalation as enforce-and-bind names it. */
export interface EscalationRef {
  escalation_id: string;
  status: EscalationState;
  status_url: string;
  expires_at: string;
}

export type EscalationState =
  | "PENDING_APPROVAL"
  | "VERIFYING"
  | "GRANT_READY"
  | "DENIED"
  | "EXPIRED"
  | "CANCELLED"
  | "FAILED";

/**
 * The enforce-and-bind answer (`ExecutionAuthorityDecision`).
 * `execution_token`, `grant_id` and `expires_at` are present only for ALLOW
 * in ENFORCEMENT.
 */
export interface AuthorityDecision {
  decision_id: string;
  evaluation_id: string;
  dossier_id: string;
  org_id: string;
  outcome: Outcome;
  reason_codes: string[];
  policy_snapshot: Record<string, unknown>;
  mode: Mode;
  dossier_url: string;
  dossier_digest: string;
  ledger_seq: number;
  created_at: string;
  correlation_id?: string;
  idempotency_key?: string;
  chain_id?: string;
  intent_id: string;
  intent_hash: string;
  execution_token?: string;
  grant_id?: string;
  expires_at?: string;
  escalation_mode: "NONE" | "MANAGED";
  managed_escalation?: EscalationRef;
  verification_envelope?: string;
}

/** The action a grant authorizes: the intent's action without `parameters`. */
export interface GrantAction {
  type: string;
  amount?: number;
  currency?: string;
  target?: string;
}

/** A live claim (`ClaimResponse`): the only answer that authorizes execution. */
export interface ClaimGranted {
  should_execute: true;
  claim_token: string;
  claim_lease_expires_at: string;
  valid: boolean;
  claim_attestation: string;
  grant_id: string;
  decision_id: string;
}

/** A refused claim (`FailedClaim`, 409 or 503): never authorizes. */
export interface ClaimRefused {
  should_execute: false;
  claim_token: null;
  claim_lease_expires_at: null;
  valid: false;
  claim_attestation: null;
  grant_id: null;
  decision_id: null;
  code: string;
  detail: string;
  request_id: string;
}

/** The claim-token answer; execute only when `should_execute` is true. */
export type ClaimResult = ClaimGranted | ClaimRefused;

/** Digest-bound evidence of the effect, sent with a COMMITTED finalization. */
export interface EffectEvidence {
  kind: string;
  status: string;
  effect_digest: string;
}

/** Evidence as the server recorded it. */
export interface RecordedEvidence extends EffectEvidence {
  source: "effect_evidence" | "effect_receipt";
}

/**
 * The finalize-token answer. A 409 that was recorded (the lease had ended)
 * has the same shape with `outcome` INDETERMINATE and `code` set.
 */
export interface Finalization {
  outcome: FinalOutcome;
  finalized_at: string;
  effect_confirmed: boolean;
  evidence: RecordedEvidence | null;
  receipt_verification?: Record<string, unknown>;
  grant_id: string;
  code?: "CLAIM_LEASE_EXPIRED" | "CLAIM_SCOPE_INVARIANT_VIOLATION";
}

/** The verify-token answer for an issued, unclaimed grant. */
export interface GrantStatus {
  valid: boolean;
  grant_id: string;
  decision_id: string;
  dossier_id: string;
  intent_hash: string;
  expires_at: string;
  state: string;
  act: GrantAction;
  sub: string;
}

/** A managed escalation's status; the grant only at GRANT_READY. */
export interface EscalationStatus {
  escalation_id: string;
  org_id: string;
  status: EscalationState;
  reason?: string;
  intent_id: string;
  intent_hash: string;
  decision_id: string;
  dossier_id: string;
  approval_request_id: string;
  created_at: string;
  updated_at: string;
  expires_at: string;
  resolved_decision_id?: string;
  resolved_dossier_id?: string;
  resolved_outcome?: Outcome;
  execution_token?: string;
  grant_id?: string;
  grant_expires_at?: string;
  transitions: { status: EscalationState; reason?: string; at: string; ledger_seq: number }[];
}

/** One key of the grant-signing JWKS. */
export interface GrantJwk {
  kty: string;
  crv?: string;
  x?: string;
  kid?: string;
  alg?: string;
  use?: string;
}

/** The grant-signing JWKS (`/.well-known/clearance-execution-grant-jwks.json`). */
export interface Jwks {
  keys: GrantJwk[];
}

/** RFC 9457 problem details with Clearance's members. */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  request_id?: string;
  errors?: { field: string; message: string }[];
}
