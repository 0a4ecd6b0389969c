"""Envelope encryption of memory content (SPEC §8.2): the primitives, and nothing of Django's models.

One random 256-bit data key (DEK) per memory version (and per consolidation input) encrypts every
field derived from its text with AES-256-GCM (`cryptography`'s AESGCM: no cipher of our own).
The DEKs are kept wrapped — AES-256-GCM again — by the key-encryption key (KEK) in the key store
(`memoryapp.keyring`), a database of its own. Erasing a memory deletes its DEK there, and every
copy of its ciphertext (a database backup, a WAL archive) becomes noise.

Formats (docs/encryption.md):

- sealed field: ``0x01 || nonce (12 bytes) || ciphertext || tag (16 bytes)``, associated data
  ``gam/v2|<table>|w<workspace id>|m<member id>|<row key id>|<field>`` — a ciphertext copied to
  another row (another key id, another DEK), another field or table, or left in place while its
  row is re-owned (another workspace or member: the columns the visibility rules read) does not
  decrypt. (v1 named no owner; it was never deployed, and a v1 value reads as corrupt.)
- text digest: HMAC-SHA256 of the text under HKDF-SHA256(DEK, info ``gam/v1|text_hmac``): it
  dies with the data key, so a kept copy of it confirms no guess after the erase.
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
import hmac
import os
from dataclasses import dataclass
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

FORMAT = b"\x01"
NONCE_BYTES = 12
KEY_BYTES = 32
OVERHEAD = len(FORMAT) + NONCE_BYTES + 16


class SealError(Exception):
    """A ciphertext that does not open: corrupted, truncated, or bound to another row or field."""


def new_data_key() -> bytes:
    return os.urandom(KEY_BYTES)


#: The owner a sealed value is bound to: (workspace id, member id), either None (an anonymous
#: consolidation has no member).
Owner = tuple[int | None, int | None]


def aad_prefix(table: str, owner: Owner, key_id: UUID) -> str:
    workspace_id, member_id = owner
    workspace = "-" if workspace_id is None else int(workspace_id)
    member = "-" if member_id is None else int(member_id)
    return f"gam/v2|{table}|w{workspace}|m{member}|{key_id}|"


def field_aad(table: str, owner: Owner, key_id: UUID, field: str) -> bytes:
    return (aad_prefix(table, owner, key_id) + field).encode()


TEXT_DIGEST_INFO = b"gam/v1|text_hmac"


class DataKeyCipher:
    """One unwrapped data key: AES-256-GCM under it (`encrypt`/`decrypt`, AESGCM's signature) and
    the keyed digest of a text under a key derived from it (`digest`). Lives as long as the
    instances (or the read) that fetched it, never in a process-wide cache."""

    __slots__ = ("_aead", "_dek", "_digest_key")

    def __init__(self, dek: bytes):
        self._dek = dek
        self._aead = AESGCM(dek)
        self._digest_key: bytes | None = None

    def encrypt(self, nonce: bytes, data: bytes, aad: bytes) -> bytes:
        return self._aead.encrypt(nonce, data, aad)

    def decrypt(self, nonce: bytes, data: bytes, aad: bytes) -> bytes:
        return self._aead.decrypt(nonce, data, aad)

    def digest(self, text: str) -> str:
        """HMAC-SHA256 of `text` under HKDF(DEK, `gam/v1|text_hmac`): unrelated across versions
        (each has its own key), and not computable by anyone once the data key is destroyed."""
        if self._digest_key is None:
            self._digest_key = HKDF(
                algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=TEXT_DIGEST_INFO
            ).derive(self._dek)
        return hmac.new(self._digest_key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def seal(cipher: AESGCM | DataKeyCipher, plaintext: bytes, aad: bytes) -> bytes:
    nonce = os.urandom(NONCE_BYTES)
    return FORMAT + nonce + cipher.encrypt(nonce, plaintext, aad)


def open_sealed(cipher: AESGCM | DataKeyCipher, sealed: bytes, aad: bytes) -> bytes:
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
        cipher = self._ciphers[self.current_id]  # type: ignore[attr-defined]
        return self.current_id, seal(cipher, dek, _dek_aad(key_id))

    def unwrap(self, key_id: UUID, wrapped_by: str, wrapped: bytes) -> bytes:
        cipher = self._ciphers.get(wrapped_by)  # type: ignore[attr-defined]
        if cipher is None:
            raise SealError(
                f"data key {key_id} is wrapped by an unknown key-encryption key ({wrapped_by}): add it to RETIRED_KEKS"
            )
        return open_sealed(cipher, wrapped, _dek_aad(key_id))
