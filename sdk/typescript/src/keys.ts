import { CompactSign, calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK } from "jose";
import { webcrypto } from "node:crypto";
import type { PrivateJwk, PublicJwk } from "./types.js";

type CryptoKey = webcrypto.CryptoKey;

/**
 * An agent's Ed25519 signing key. Its `kid` is the RFC 7638 thumbprint
 * (SHA-256, base64url) of its public JWK, as Clearance names its own keys, so
 * anyone holding the public JWK can recompute it. The private key never
 * appears in `JSON.stringify`, `console.log` or `toString`; only
 * `exportPrivateJwk` reveals it.
 */
export class AgentKey {
  /** The RFC 7638 thumbprint of the public JWK. */
  readonly kid: string;
  /** The public JWK with kid, alg EdDSA and use sig: what you register. */
  readonly publicJwk: Readonly<PublicJwk>;
  readonly #privateKey: CryptoKey;

  private constructor(kid: string, publicJwk: PublicJwk, privateKey: CryptoKey) {
    this.kid = kid;
    this.publicJwk = Object.freeze(publicJwk);
    this.#privateKey = privateKey;
  }

  /** Generates a fresh key pair from the platform's CSPRNG (WebCrypto). */
  static async generate(): Promise<AgentKey> {
    const { privateKey } = await generateKeyPair("EdDSA", { crv: "Ed25519", extractable: true });
    return AgentKey.fromPrivateJwk(toPrivateJwk(await exportJWK(privateKey)));
  }

  /**
   * Imports a key exported with `exportPrivateJwk`. The JWK must be OKP
   * Ed25519 with `d` and `x`, and `x` must be the public half of `d`: a
   * signature made with `d` is checked against `x` before the key is
   * returned. A `kid` member, if present, must be the thumbprint.
   */
  static async fromPrivateJwk(jwk: unknown): Promise<AgentKey> {
    const priv = toPrivateJwk(jwk);
    const publicOnly: PublicJwk = { kty: "OKP", crv: "Ed25519", x: priv.x };
    const kid = await calculateJwkThumbprint(publicOnly, "sha256");
    if (priv.kid !== undefined && priv.kid !== kid) {
      throw new TypeError(`agent key: kid ${priv.kid} is not the key's thumbprint ${kid}`);
    }
    let privateKey, publicKey;
    try {
      privateKey = await importJWK({ kty: "OKP", crv: "Ed25519", x: priv.x, d: priv.d }, "EdDSA", { extractable: true });
      publicKey = await importJWK(publicOnly, "EdDSA");
    } catch (err) {
      throw new TypeError("agent key: not a usable Ed25519 key pair (is x the public key of d?)", { cause: err });
    }
    if (privateKey instanceof Uint8Array || publicKey instanceof Uint8Array) {
      throw new TypeError("agent key: not an Ed25519 key");
    }
    const probe = new TextEncoder().encode("clearance agent key check");
    const sig = new Uint8Array(await webcrypto.subtle.sign("Ed25519", privateKey, probe));
    if (!(await webcrypto.subtle.verify("Ed25519", publicKey, sig, probe))) {
      throw new TypeError("agent key: x is not the public key of d");
    }
    return new AgentKey(kid, { ...publicOnly, kid, alg: "EdDSA", use: "sig" }, privateKey);
  }

  /** The private JWK (with `d`), for storage in a secret store. */
  async exportPrivateJwk(): Promise<PrivateJwk> {
    const jwk = toPrivateJwk(await exportJWK(this.#privateKey));
    return { ...jwk, kid: this.kid, alg: "EdDSA", use: "sig" };
  }

  /** The body of `POST /v1/execution/agent-keys`. */
  registration(): { kid: string; public_jwk: PublicJwk } {
    return { kid: this.kid, public_jwk: { ...this.publicJwk } };
  }

  /**
   * Signs `payload` as a compact JWS whose protected header is exactly
   * {"alg":"EdDSA","kid":<kid>,"typ":<typ>}, the only header Clearance
   * accepts. The payload is signed as given (see signIntent for intents).
   */
  async signCompact(payload: Uint8Array, typ: string): Promise<string> {
    return new CompactSign(payload).setProtectedHeader({ alg: "EdDSA", kid: this.kid, typ }).sign(this.#privateKey);
  }

  toJSON(): { kid: string; publicJwk: Readonly<PublicJwk> } {
    return { kid: this.kid, publicJwk: this.publicJwk };
  }

  toString(): string {
    return `AgentKey{kid: ${this.kid}}`;
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }
}

const B64URL = /^[A-Za-z0-9_-]{43}$/; // 32 bytes, unpadded

function toPrivateJwk(jwk: unknown): PrivateJwk {
  if (typeof jwk !== "object" || jwk === null) {
    throw new TypeError("agent key: not a JWK object");
  }
  const j = jwk as Record<string, unknown>;
  if (j["kty"] !== "OKP" || j["crv"] !== "Ed25519") {
    throw new TypeError("agent key: want kty OKP and crv Ed25519");
  }
  const x = j["x"];
  const d = j["d"];
  if (typeof x !== "string" || !B64URL.test(x) || typeof d !== "string" || !B64URL.test(d)) {
    throw new TypeError("agent key: x and d must each be 32 bytes of unpadded base64url");
  }
  const out: PrivateJwk = { kty: "OKP", crv: "Ed25519", x, d };
  if (typeof j["kid"] === "string") {
    out.kid = j["kid"];
  }
  return out;
}
