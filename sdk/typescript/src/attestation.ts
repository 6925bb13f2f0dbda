import { compactVerify, importJWK } from "jose";
import { AttestationError, ClearanceError, isObject } from "./errors.js";
import type { GrantAction, Jwks } from "./types.js";

/** The JWS typ of a claim attestation. */
export const TYP_ATTESTATION = "clearance-claim-attestation+jwt";
/** The audience of a claim attestation: the downstream system. */
export const AUD_ATTESTATION = "clearance-downstream";
/** The path of the grant-signing JWKS on a Clearance server. */
export const JWKS_PATH = "/.well-known/clearance-execution-grant-jwks.json";

const MAX_TOKEN_SIZE = 1 << 20;
const SEGMENT = /^[A-Za-z0-9_-]+$/;

/** The claims of a claim attestation (`ClaimAttestationClaims`). */
export interface AttestationClaims {
  iss: string;
  aud: string;
  sub: string;
  org: string;
  jti: string;
  iat: number;
  /** The end of the claim lease, Unix seconds. */
  exp: number;
  grant_id: string;
  decision_id: string;
  dossier_id: string;
  binding: {
    intent_hash: string;
    payload_digest: string;
    payload_profile: string;
    expected_effect_digest?: string;
    nonce: string;
    scope: string;
    corr?: string;
  };
  claim_token_digest: string;
  act: GrantAction;
}

export interface VerifyAttestationOptions {
  /** The expected iss: the issuing deployment's name (`--issuer`, "clearance" by default). */
  issuer: string;
  /** The intent_hash of the request about to execute; the attestation must be bound to it. */
  intentHash: string;
  /** When set, the grant the executor says it holds. */
  grantId?: string;
  /** When set, the org the request belongs to. */
  orgId?: string;
  /** The verifier's clock; default now. */
  now?: Date;
  /**
   * How far after now the attestation's iat may be (clock skew between the
   * server and this verifier). Default 60 s, the server's own default for
   * grants. exp is checked with no leeway.
   */
  maxClockSkewSeconds?: number;
}

/**
 * Verifies a claim attestation offline, as a downstream system should before
 * it commits an agent's action (the checks of examples/verifyattestation):
 *
 * 1. compact JWS whose protected header is exactly {alg, kid, typ}, alg
 *    EdDSA and typ clearance-claim-attestation+jwt (so no jku, x5u, jwk, x5c
 *    or crit: a token never chooses its own key);
 * 2. the key is the one JWKS entry with the header's kid, never from the token;
 * 3. the Ed25519 signature verifies; only then is the payload read;
 * 4. aud clearance-downstream and iss `options.issuer`;
 * 5. now < exp with no leeway, iat not after now + the allowed skew;
 * 6. binding.intent_hash equals `options.intentHash` (and grant_id, org
 *    when given).
 *
 * Resolves to the claims; every refusal is an AttestationError whose
 * `reason` names the check. On UNKNOWN_KEY refetch the JWKS once: a key
 * rotation may have happened since it was cached.
 */
export async function verifyClaimAttestation(token: string, jwks: Jwks, options: VerifyAttestationOptions): Promise<AttestationClaims> {
  if (typeof token !== "string" || token.length > MAX_TOKEN_SIZE) {
    throw new AttestationError("MALFORMED", "not a token string of at most 1 MiB");
  }
  const segments = token.split(".");
  if (segments.length !== 3 || !segments.every((s) => SEGMENT.test(s))) {
    throw new AttestationError("MALFORMED", "not a compact JWS (three non-empty base64url segments)");
  }
  const header = decodeJsonSegment(segments[0]!, "header");
  const members = Object.keys(header).sort().join(",");
  if (members !== "alg,kid,typ") {
    throw new AttestationError("HEADER", `header members are {${members}}, want exactly {alg,kid,typ}`);
  }
  if (header["alg"] !== "EdDSA") {
    throw new AttestationError("HEADER", `alg ${JSON.stringify(header["alg"])}, want "EdDSA"`);
  }
  if (header["typ"] !== TYP_ATTESTATION) {
    throw new AttestationError("HEADER", `typ ${JSON.stringify(header["typ"])}, want "${TYP_ATTESTATION}"`);
  }
  const kid = header["kid"];
  if (typeof kid !== "string" || kid === "") {
    throw new AttestationError("HEADER", "the header has no kid");
  }

  const matches = (isObject(jwks) && Array.isArray(jwks.keys) ? jwks.keys : []).filter((k) => isObject(k) && k.kid === kid);
  if (matches.length !== 1) {
    throw new AttestationError("UNKNOWN_KEY", `kid ${kid} is ${matches.length === 0 ? "not in" : "more than once in"} the JWKS`);
  }
  const jwk = matches[0]!;
  if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || typeof jwk.x !== "string" ||
      (jwk.alg !== undefined && jwk.alg !== "EdDSA") || (jwk.use !== undefined && jwk.use !== "sig")) {
    throw new AttestationError("UNKNOWN_KEY", `the JWKS entry for kid ${kid} is not an Ed25519 signing key`);
  }
  let payloadBytes: Uint8Array;
  try {
    const key = await importJWK({ kty: "OKP", crv: "Ed25519", x: jwk.x }, "EdDSA");
    ({ payload: payloadBytes } = await compactVerify(token, key, { algorithms: ["EdDSA"] }));
  } catch (err) {
    throw new AttestationError("SIGNATURE", `signature does not verify with kid ${kid}`, { cause: err });
  }

  const claims = parseClaims(payloadBytes);
  if (claims.aud !== AUD_ATTESTATION) {
    throw new AttestationError("AUDIENCE", `aud ${JSON.stringify(claims.aud)}, want "${AUD_ATTESTATION}"`);
  }
  if (claims.iss !== options.issuer) {
    throw new AttestationError("ISSUER", `iss ${JSON.stringify(claims.iss)}, want ${JSON.stringify(options.issuer)}`);
  }
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  if (now >= claims.exp) {
    throw new AttestationError("EXPIRED", `exp ${claims.exp} is not after now ${now}: the claim lease has ended`);
  }
  if (claims.iat > now + (options.maxClockSkewSeconds ?? 60)) {
    throw new AttestationError("NOT_YET_VALID", `iat ${claims.iat} is after now ${now} plus the allowed clock skew`);
  }
  if (claims.binding.intent_hash !== options.intentHash) {
    throw new AttestationError("BINDING", "the attestation is bound to another intent");
  }
  if (options.grantId !== undefined && claims.grant_id !== options.grantId) {
    throw new AttestationError("BINDING", "the attestation names another grant");
  }
  if (options.orgId !== undefined && claims.org !== options.orgId) {
    throw new AttestationError("BINDING", "the attestation names another org");
  }
  return claims;
}

/**
 * Fetches the grant-signing JWKS from a Clearance server (a public route: no
 * key needed). Cache it; fetch again when verifyClaimAttestation says
 * UNKNOWN_KEY.
 */
export async function fetchJwks(baseUrl: string, options: { signal?: AbortSignal; fetch?: typeof fetch } = {}): Promise<Jwks> {
  const init: RequestInit = { headers: { Accept: "application/jwk-set+json, application/json" } };
  if (options.signal) {
    init.signal = options.signal;
  }
  const res = await (options.fetch ?? globalThis.fetch)(baseUrl.replace(/\/+$/, "") + JWKS_PATH, init);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: kept as text in the error
  }
  if (res.status !== 200 || !isObject(body) || !Array.isArray(body["keys"])) {
    throw new ClearanceError(res.status, body, res.headers.get("X-Request-Id") ?? undefined);
  }
  return body as unknown as Jwks;
}

function decodeJsonSegment(segment: string, name: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(segment, "base64url").toString("utf8"));
  } catch {
    throw new AttestationError("MALFORMED", `${name} is not base64url JSON`);
  }
  if (!isObject(v)) {
    throw new AttestationError("MALFORMED", `${name} is not a JSON object`);
  }
  return v;
}

/** Checks the members every attestation has, with their types. */
function parseClaims(payload: Uint8Array): AttestationClaims {
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload));
  } catch {
    throw new AttestationError("MALFORMED", "payload is not UTF-8 JSON");
  }
  if (!isObject(v)) {
    throw new AttestationError("CLAIMS", "payload is not a JSON object");
  }
  for (const name of ["iss", "aud", "sub", "org", "jti", "grant_id", "decision_id", "dossier_id", "claim_token_digest"]) {
    if (typeof v[name] !== "string") {
      throw new AttestationError("CLAIMS", `${name} is missing or not a string`);
    }
  }
  for (const name of ["iat", "exp"]) {
    if (!Number.isSafeInteger(v[name]) || (v[name] as number) <= 0) {
      throw new AttestationError("CLAIMS", `${name} is missing or not a positive integer`);
    }
  }
  const binding = v["binding"];
  if (!isObject(binding) || typeof binding["intent_hash"] !== "string") {
    throw new AttestationError("CLAIMS", "binding.intent_hash is missing");
  }
  if (!isObject(v["act"]) || typeof v["act"]["type"] !== "string") {
    throw new AttestationError("CLAIMS", "act.type is missing");
  }
  return v as unknown as AttestationClaims;
}
