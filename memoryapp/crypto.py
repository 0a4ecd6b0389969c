"""Envelope encryption of memory content (SPEC §8.2): the primitives, and nothing of Django's models.

One random 256-bit data key (DEK) per memory version (and per consolidation input) encrypts every
field derived from its text with AES-256-GCM (`cryptography`'s AESGCM: no cipher of our own).
The DEKs are kept wrapped — AES-256-GCM again — by the key-encryption key (KEK) in the key store
(`memoryapp.keyring`), a database of its own. Erasing a memory deletes its DEK there, and every
copy of its ciphertext (a database backup, a WAL archive) becomes noise.

Formats (docs/encryption.md):

- sealed field: ``0x01 || nonce (12 bytes) || ciphertext || tag (16 bytes)``, associated data
  ``gam/v1|<table>|<row key id>|<field>`` — a ciphertext copied to another row (another key id,
  another DEK) or another field or table does not decrypt.
- wrapped DEK: ``0x01 || nonce (12) || AES-GCM(KEK, DEK) || tag``, associated data
  ``gam/dek/v1|<key id>`` — a wrapped key copied to another key id does not unwrap.
- KEK id: the first 8 bytes of SHA-256(``gam/kek-id/v1`` || KEK), hex: names which KEK wrapped a
  DEK (so retired KEKs keep unwrapping until `rotate_kek` re-wraps under the current one) without
  revealing anything of it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

FORMAT = b"\x01"
NONCE_BYTES = 12
KEY_BYTES = 32
OVERHEAD = len(FORMAT) + NONCE_BYTES + 16


class SealError(Exception):
    """A ciphertext that does not open: corrupted, truncated, or bound to another row or field."""


def new_data_key() -> bytes:
    return os.urandom(KEY_BYTES)


def field_aad(table: str, key_id: UUID, field: str) -> bytes:
    return f"gam/v1|{table}|{key_id}|{field}".encode()


def seal(cipher: AESGCM, plaintext: bytes, aad: bytes) -> bytes:
    nonce = os.urandom(NONCE_BYTES)
    return FORMAT + nonce + cipher.encrypt(nonce, plaintext, aad)


def open_sealed(cipher: AESGCM, sealed: bytes, aad: bytes) -> bytes:
    if len(sealed) < OVERHEAD or sealed[:1] != FORMAT:
        raise SealError("not a sealed value of format 1")
    try:
        return cipher.decrypt(sealed[1 : 1 + NONCE_BYTES], sealed[1 + NONCE_BYTES :], aad)
    except InvalidTag:
        raise SealError("authentication failed (corrupted, or bound to another row or field)") from None


# --- the key-encryption key -----------------------------------------------------------------------
def decode_kek(value: str, *, name: str = "MEMORY_KEK") -> bytes:
    """A KEK as configured: base64 of exactly 32 random bytes (`openssl rand -base64 32`)."""
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{name} must be base64 (for example: openssl rand -base64 32)") from None
    if len(raw) != KEY_BYTES:
        raise ValueError(f"{name} must decode to exactly 32 bytes (AES-256), not {len(raw)}")
    return raw


def kek_id(kek: bytes) -> str:
    return hashlib.sha256(b"gam/kek-id/v1" + kek).hexdigest()[:16]


def _dek_aad(key_id: UUID) -> bytes:
    return f"gam/dek/v1|{key_id}".encode()


@dataclass(frozen=True)
class KeyEncryptionKeys:
    """The current KEK (wraps every new DEK) and the retired ones (still unwrap until re-wrapped)."""

    current: bytes
    retired: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ciphers", {kek_id(k): AESGCM(k) for k in (*self.retired, self.current)})

    @property
    def current_id(self) -> str:
        return kek_id(self.current)

    def known(self, wrapped_by: str) -> bool:
        return wrapped_by in self._ciphers  # type: ignore[attr-defined]

    def wrap(self, key_id: UUID, dek: bytes) -> tuple[str, bytes]:
        return self.current_id, seal(self._ciphers[self.current_id], dek, _dek_aad(key_id))  # type: ignore[attr-defined]

    def unwrap(self, key_id: UUID, wrapped_by: str, wrapped: bytes) -> bytes:
        cipher = self._ciphers.get(wrapped_by)  # type: ignore[attr-defined]
        if cipher is None:
            raise SealError(f"data key {key_id} is wrapped by an unknown key-encryption key ({wrapped_by}): add it to RETIRED_KEKS")
        return open_sealed(cipher, wrapped, _dek_aad(key_id))
