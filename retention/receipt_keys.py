"""The receipts' Ed25519 keys (docs/receipts.md "Keys"): the signing key from RECEIPT_SIGNING_KEY, the
retired ones that still verify (RECEIPT_VERIFY_KEYS), key ids, and the public document served at
PUBLIC_KEY_PATH."""

from __future__ import annotations

import base64
import binascii
import hashlib
from functools import lru_cache
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

ALGORITHM = "Ed25519"
PUBLIC_KEY_PATH = "/.well-known/receipt-signing-key"


# --- keys -------------------------------------------------------------------------------------------
def _decode_key(text: str, *, private: bool) -> Ed25519PrivateKey | Ed25519PublicKey:
    text = text.strip()
    kind = "RECEIPT_SIGNING_KEY" if private else "RECEIPT_VERIFY_KEYS"
    try:
        if text.startswith("-----BEGIN"):
            key = (
                serialization.load_pem_private_key(text.encode(), password=None)
                if private
                else serialization.load_pem_public_key(text.encode())
            )
        else:
            raw = base64.b64decode(text, validate=True)
            key = Ed25519PrivateKey.from_private_bytes(raw) if private else Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, TypeError, binascii.Error) as exc:
        raise ImproperlyConfigured(f"{kind}: not a base64 raw 32-byte Ed25519 key nor a PEM ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey if private else Ed25519PublicKey):
        raise ImproperlyConfigured(f"{kind}: the PEM holds a {type(key).__name__}, not an Ed25519 key")
    return key


@lru_cache(maxsize=8)
def _private(text: str) -> Ed25519PrivateKey:
    return _decode_key(text, private=True)  # type: ignore[return-value]


@lru_cache(maxsize=32)
def _public(text: str) -> Ed25519PublicKey:
    return _decode_key(text, private=False)  # type: ignore[return-value]


def signing_key() -> Ed25519PrivateKey:
    return _private(settings.RECEIPT_SIGNING_KEY)


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """The first 16 bytes of the SHA-256 of the raw public key, as hex (32 characters)."""
    return hashlib.sha256(raw_public(key)).hexdigest()[:32]


def public_keys() -> dict[str, Ed25519PublicKey]:
    """Every key a receipt may be signed with: the current one first, then the retired ones."""
    current = signing_key().public_key()
    keys = {key_id(current): current}
    for text in settings.RECEIPT_VERIFY_KEYS:
        key = _public(text)
        keys.setdefault(key_id(key), key)
    return keys


def public_keys_json() -> dict[str, Any]:
    keys = public_keys()
    current = next(iter(keys))
    return {
        "algorithm": ALGORITHM,
        "currentKeyId": current,
        "keys": [
            {
                "keyId": kid,
                "current": kid == current,
                "publicKey": base64.b64encode(raw_public(key)).decode(),
                "publicKeyPem": key.public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                ).decode(),
            }
            for kid, key in keys.items()
        ],
        "canonicalForm": "docs/receipts.md",
    }
