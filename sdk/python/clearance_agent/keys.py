"""Ed25519 agent keys: generation, the public JWK and kid, export and import."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ._b64 import b64url_decode, b64url_encode

__all__ = ["AgentKey", "thumbprint"]


def thumbprint(public_key: bytes) -> str:
    """The RFC 7638 JWK thumbprint (SHA-256, unpadded base64url) of a raw
    32-byte Ed25519 public key: the kid Clearance gives such a key."""
    if len(public_key) != 32:
        raise ValueError(f"an Ed25519 public key is 32 bytes, not {len(public_key)}")
    # RFC 7638 §3.2: the required members only, sorted, no whitespace.
    members = {"crv": "Ed25519", "kty": "OKP", "x": b64url_encode(public_key)}
    canonical = json.dumps(members, sort_keys=True, separators=(",", ":")).encode("ascii")
    return b64url_encode(hashlib.sha256(canonical).digest())


class AgentKey:
    """An agent's Ed25519 signing key and its kid (the RFC 7638 thumbprint).

    Its repr names the kid only, so logging a key never prints the secret.
    Export with ``to_pem`` (PKCS#8, optionally encrypted) or
    ``to_private_jwk``; keep either as secret as the key itself.
    """

    __slots__ = ("_private", "_public", "kid")

    def __init__(self, private_key: Ed25519PrivateKey):
        if not isinstance(private_key, Ed25519PrivateKey):
            raise TypeError("AgentKey needs an Ed25519PrivateKey")
        self._private = private_key
        self._public = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.kid: str = thumbprint(self._public)

    @classmethod
    def generate(cls) -> "AgentKey":
        """A new key from the operating system's random source."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> "AgentKey":
        """The key of a 32-byte RFC 8032 seed (the same seed, the same key
        and kid)."""
        if len(seed) != 32:
            raise ValueError(f"an Ed25519 seed is 32 bytes, not {len(seed)}")
        return cls(Ed25519PrivateKey.from_private_bytes(bytes(seed)))

    @classmethod
    def from_pem(cls, data: bytes | str, password: bytes | None = None) -> "AgentKey":
        """Import a PKCS#8 PEM private key (as ``to_pem`` writes it)."""
        if isinstance(data, str):
            data = data.encode("ascii")
        key = serialization.load_pem_private_key(data, password=password)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError("the PEM does not hold an Ed25519 private key")
        return cls(key)

    @classmethod
    def from_private_jwk(cls, jwk: Mapping[str, Any] | str) -> "AgentKey":
        """Import an OKP/Ed25519 private JWK (``d`` is the seed). A ``kid`` or
        ``x`` it carries must match the key."""
        if isinstance(jwk, str):
            jwk = json.loads(jwk)
        if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            raise ValueError("not an OKP/Ed25519 JWK")
        if not isinstance(jwk.get("d"), str):
            raise ValueError("the JWK has no private member d")
        key = cls.from_seed(b64url_decode(jwk["d"]))
        if "x" in jwk and jwk["x"] != b64url_encode(key._public):
            raise ValueError("the JWK's x is not the public key of its d")
        if "kid" in jwk and jwk["kid"] != key.kid:
            raise ValueError("the JWK's kid is not the thumbprint of its key")
        return key

    @property
    def public_key(self) -> bytes:
        """The raw 32-byte public key."""
        return self._public

    def public_jwk(self) -> dict[str, str]:
        """The public JWK to register with Clearance: kty OKP, crv Ed25519,
        x, kid, alg EdDSA, use sig. It never holds private material."""
        return {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": b64url_encode(self._public),
            "kid": self.kid,
            "alg": "EdDSA",
            "use": "sig",
        }

    def to_private_jwk(self) -> dict[str, str]:
        """The private JWK (the public one plus ``d``, the seed). Secret."""
        jwk = self.public_jwk()
        jwk["d"] = b64url_encode(
            self._private.private_bytes(
                serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
            )
        )
        return jwk

    def to_pem(self, password: bytes | None = None) -> bytes:
        """PKCS#8 PEM, encrypted with the best available scheme when a
        password is given. Secret."""
        encryption = (
            serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
        )
        return self._private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)

    def sign(self, message: bytes) -> bytes:
        """The raw 64-byte Ed25519 signature of message (pure Ed25519)."""
        return self._private.sign(message)

    def verify(self, signature: bytes, message: bytes) -> bool:
        """Whether signature is this key's signature of message."""
        try:
            Ed25519PublicKey.from_public_bytes(self._public).verify(signature, message)
            return True
        except InvalidSignature:
            return False

    def __repr__(self) -> str:
        return f"AgentKey(kid={self.kid!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AgentKey) and other._public == self._public

    def __hash__(self) -> int:
        return hash(self._public)
