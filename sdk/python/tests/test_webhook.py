"""verify_webhook against signatures made by its own sign_webhook; the
server's real deliveries are checked in test_server.py."""

import unittest

from clearance_agent import WebhookSignatureError, sign_webhook, verify_webhook

BODY = b'{"type":"decision.resolved","protocol_outcome":"BLOCK"}'
SECRET = "a-long-random-secret-you-keep"
OLD = "old-secret-0123456789"
T = 1_800_000_000


class VerifyWebhook(unittest.TestCase):
    def refused(self, code, header, body=BODY, secret=SECRET, now=T):
        with self.assertRaises(WebhookSignatureError) as cm:
            verify_webhook(header, body, secret, now=now)
        self.assertEqual(cm.exception.code, code, str(cm.exception))

    def test_the_go_signers_vector(self):
        # webhook.Sign(BODY, time.Unix(T, 0), []byte(OLD), []byte(SECRET)) printed this.
        go = ("t=1800000000,v1=e8c31c3e6e5b1b7c011aa38ab10e41a99cc374f1e855d9cbb8d1dd18d0b523f6"
              ",v1=aae0a6380c462fbeb75065a3c269c7a928f4b3a59b003128f66f209b14464e87")
        self.assertEqual(sign_webhook(BODY, T, OLD, SECRET), go)
        verify_webhook(go, BODY, SECRET, now=T)
        verify_webhook(go, BODY, OLD, now=T)
        header = sign_webhook(BODY, T, SECRET)
        verify_webhook(header, BODY, SECRET.encode(), now=T + 300)  # the tolerance's edge is inside
        verify_webhook(header, BODY, SECRET, now=T - 300)

    def test_refusals(self):
        good = sign_webhook(BODY, T, SECRET)
        self.refused("SIGNATURE_MISMATCH", good, body=BODY + b" ")
        self.refused("SIGNATURE_MISMATCH", good, secret=SECRET + "x")
        self.refused("SIGNATURE_TIMESTAMP", good, now=T + 301)
        self.refused("SIGNATURE_TIMESTAMP", good, now=T - 301)
        for header in ("", None, "t=1800000000", "v1=" + "0" * 64, "t=1800000000,v1=abc", "t=-1,v1=" + "0" * 64,
                       "t=+1800000000,v1=" + "0" * 64, "t=1,t=2,v1=" + "0" * 64, "t=1800000000,v1",
                       "t=1800000000,v1=" + " 0" * 32):
            with self.subTest(header=header):
                self.refused("MALFORMED_SIGNATURE", header)

    def test_rotation_sends_a_v1_per_secret(self):
        header = sign_webhook(BODY, T, OLD, SECRET)
        verify_webhook(header, BODY, SECRET, now=T)
        verify_webhook(header, BODY, OLD, now=T)
        self.refused("SIGNATURE_MISMATCH", header, secret="neither-secret-012345")

    def test_later_schemes_are_ignored(self):
        header = sign_webhook(BODY, T, SECRET).replace(",v1=", ",v2=whatever, v1=")
        verify_webhook(header, BODY, SECRET, now=T)


if __name__ == "__main__":
    unittest.main()
