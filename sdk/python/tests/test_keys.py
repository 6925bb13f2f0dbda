"""Agent keys and intent signing, checked against RFC 8037's Ed25519 vectors."""

import json
import unittest

from clearance_agent import AgentKey, TYP_INTENT, canonicalize, digest, intent_hash, new_intent, sign_compact, sign_intent, thumbprint
from clearance_agent._b64 import b64url_decode, b64url_encode

# RFC 8037 Appendix A.1 (the key), A.3 (its thumbprint), A.4 (a signature).
RFC8037_D = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC8037_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC8037_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
RFC8037_JWS = ("eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc."
               "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg")


class Keys(unittest.TestCase):
    def test_rfc_8037_key_thumbprint_and_signature(self):
        key = AgentKey.from_seed(b64url_decode(RFC8037_D))
        self.assertEqual(b64url_encode(key.public_key), RFC8037_X)
        self.assertEqual(thumbprint(key.public_key), RFC8037_THUMBPRINT)
        self.assertEqual(key.kid, RFC8037_THUMBPRINT)
        header, payload, _ = RFC8037_JWS.split(".")
        self.assertEqual(b64url_encode(key.sign((header + "." + payload).encode())), RFC8037_JWS.split(".")[2])

    def test_public_jwk_holds_no_private_member(self):
        key = AgentKey.generate()
        jwk = key.public_jwk()
        self.assertEqual(jwk, {"kty": "OKP", "crv": "Ed25519", "x": b64url_encode(key.public_key), "kid": key.kid,
                               "alg": "EdDSA", "use": "sig"})
        self.assertNotIn(key.to_private_jwk()["d"], repr(key))

    def test_export_and_import(self):
        key = AgentKey.generate()
        self.assertEqual(AgentKey.from_pem(key.to_pem()), key)
        encrypted = key.to_pem(password=b"correct horse")
        self.assertIn(b"ENCRYPTED", encrypted)
        self.assertEqual(AgentKey.from_pem(encrypted, password=b"correct horse"), key)
        with self.assertRaises(ValueError):
            AgentKey.from_pem(encrypted, password=b"wrong")
        self.assertEqual(AgentKey.from_private_jwk(json.dumps(key.to_private_jwk())), key)
        other = AgentKey.generate()
        with self.assertRaises(ValueError):
            AgentKey.from_private_jwk({**key.to_private_jwk(), "kid": other.kid})
        with self.assertRaises(ValueError):
            AgentKey.from_private_jwk(key.public_jwk())

    def test_base64url_is_unpadded_and_strict(self):
        self.assertEqual(b64url_encode(b"\xfb\xff"), "-_8")
        for bad in ("-_8=", "-_9", "a+b", "a", "ab\n"):
            with self.subTest(seg=bad), self.assertRaises(ValueError):
                b64url_decode(bad)


class IntentSigning(unittest.TestCase):
    def test_header_is_exactly_alg_kid_typ_and_payload_is_jcs(self):
        key = AgentKey.generate()
        intent = new_intent("00000000-0000-4000-8000-000000000000", "refund", concurrency_scope="order-1",
                            actor_id="agent-ü", amount=12.5, currency="EUR", target="Bestellung 1")
        jws = sign_intent(key, intent)
        h, p, s = jws.split(".")
        self.assertNotIn("=", jws)
        self.assertEqual(b64url_decode(h), b'{"alg":"EdDSA","kid":"' + key.kid.encode() + b'","typ":"clearance-intent+jwt"}')
        self.assertEqual(b64url_decode(p), canonicalize(intent))
        self.assertTrue(key.verify(b64url_decode(s), (h + "." + p).encode()))
        self.assertEqual(intent_hash(jws), digest(canonicalize(intent)))
        self.assertEqual(sign_compact(key, TYP_INTENT, canonicalize(intent)), jws)  # Ed25519 is deterministic

    def test_new_intent_fills_what_freshness_and_single_use_need(self):
        a = new_intent("org", "refund", concurrency_scope="s", actor_id="a")
        b = new_intent("org", "refund", concurrency_scope="s", actor_id="a")
        self.assertNotEqual(a["intent_id"], b["intent_id"])
        self.assertNotEqual(a["nonce"], b["nonce"])
        self.assertEqual(a["escalation"], {"mode": "NONE"})
        self.assertRegex(a["issued_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertNotIn("amount", a["action"])


if __name__ == "__main__":
    unittest.main()
