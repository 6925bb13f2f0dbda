"""verify_attestation refuses every token examples/verifyattestation refuses.

The tokens here are signed with a key of our own in a JWKS of our own; the
server's real attestations are checked in test_server.py."""

import json
import unittest

from clearance_agent import AgentKey, AttestationError, canonicalize, verify_attestation
from clearance_agent._b64 import b64url_encode

NOW = 1_800_000_000
HASH = "sha256:" + "ab" * 32


def claims(**over):
    c = {"iss": "clearance", "aud": "clearance-downstream", "sub": "agent-7", "org": "org-1", "jti": "att-1",
         "iat": NOW, "exp": NOW + 30, "grant_id": "g-1", "decision_id": "d-1", "dossier_id": "s-1",
         "binding": {"intent_hash": HASH, "payload_digest": HASH, "payload_profile": "JCS-SHA256", "nonce": "n",
                     "scope": "s"},
         "claim_token_digest": HASH, "act": {"type": "refund"}}
    c.update(over)
    return c


def mint(key, payload, header=None):
    h = header if header is not None else {"alg": "EdDSA", "kid": key.kid, "typ": "clearance-claim-attestation+jwt"}
    hp = b64url_encode(json.dumps(h).encode()) + "." + b64url_encode(
        payload if isinstance(payload, bytes) else canonicalize(payload))
    return hp + "." + b64url_encode(key.sign(hp.encode()))


class VerifyAttestation(unittest.TestCase):
    def setUp(self):
        self.key = AgentKey.from_seed(bytes(32))
        self.jwks = {"keys": [{k: v for k, v in self.key.public_jwk().items()}]}

    def refused(self, code, token, **kw):
        kw.setdefault("now", NOW)
        kw.setdefault("intent_hash", HASH)
        with self.assertRaises(AttestationError) as cm:
            verify_attestation(token, self.jwks, **kw)
        self.assertEqual(cm.exception.code, code, str(cm.exception))

    def test_a_good_attestation(self):
        got = verify_attestation(mint(self.key, claims()), json.dumps(self.jwks), now=NOW, grant_id="g-1", intent_hash=HASH)
        self.assertEqual(got["grant_id"], "g-1")
        self.assertEqual(got["binding"]["intent_hash"], HASH)

    def test_header_rules(self):
        k = self.key.kid
        self.refused("TOKEN_TYPE", mint(self.key, claims(), {"alg": "EdDSA", "kid": k, "typ": "clearance-grant+jwt"}))
        self.refused("TOKEN_TYPE", mint(self.key, claims(), {"alg": "EdDSA", "kid": k}))
        self.refused("TOKEN_ALGORITHM", mint(self.key, claims(), {"alg": "none", "kid": k,
                                                                  "typ": "clearance-claim-attestation+jwt"}))
        self.refused("TOKEN_HEADER_FORBIDDEN", mint(self.key, claims(), {
            "alg": "EdDSA", "kid": k, "typ": "clearance-claim-attestation+jwt", "jwk": self.key.public_jwk()}))
        self.refused("TOKEN_HEADER_FORBIDDEN", mint(self.key, claims(), {"alg": "EdDSA",
                                                                         "typ": "clearance-claim-attestation+jwt"}))

    def test_the_key_comes_from_the_jwks_only(self):
        stranger = AgentKey.from_seed(b"\x01" * 32)
        self.refused("TOKEN_UNKNOWN_KEY", mint(stranger, claims()))
        # A token naming our kid but signed by another key.
        forged = mint(stranger, claims(), {"alg": "EdDSA", "kid": self.key.kid, "typ": "clearance-claim-attestation+jwt"})
        self.refused("TOKEN_SIGNATURE", forged)
        twice = {"keys": self.jwks["keys"] * 2}
        with self.assertRaises(AttestationError) as cm:
            verify_attestation(mint(self.key, claims()), twice, now=NOW, intent_hash=HASH)
        self.assertEqual(cm.exception.code, "TOKEN_UNKNOWN_KEY")

    def test_tampering(self):
        token = mint(self.key, claims())
        h, p, s = token.split(".")
        self.refused("TOKEN_SIGNATURE", h + "." + b64url_encode(canonicalize(claims(grant_id="g-2"))) + "." + s)
        self.refused("TOKEN_MALFORMED", token + "=")
        self.refused("TOKEN_MALFORMED", h + "." + p)
        self.refused("TOKEN_MALFORMED", mint(self.key, b'{"aud":"clearance-downstream","aud":"x"}'))

    def test_claims(self):
        self.refused("TOKEN_AUDIENCE", mint(self.key, claims(aud="clearance-execution")))
        self.refused("TOKEN_ISSUER", mint(self.key, claims()), issuer="someone-else")
        self.refused("TOKEN_EXPIRED", mint(self.key, claims()), now=NOW + 30)  # exp is the first instant refused
        self.refused("TOKEN_NOT_YET_VALID", mint(self.key, claims(iat=NOW + 61, exp=NOW + 90)))
        self.refused("TOKEN_CLAIMS_INVALID", mint(self.key, claims(grant_id="")))
        self.refused("TOKEN_CLAIMS_INVALID", mint(self.key, claims(claim_token_digest="sha256:AB")))
        self.refused("TOKEN_CLAIMS_INVALID", mint(self.key, claims(iat=NOW, exp=NOW)))

    def test_binding_to_the_request_about_to_execute(self):
        token = mint(self.key, claims())
        self.refused("BINDING_MISMATCH", token, grant_id="g-2")
        self.refused("BINDING_MISMATCH", token, intent_hash="sha256:" + "cd" * 32)


if __name__ == "__main__":
    unittest.main()
