"""Secret tokens: random, shown once, stored as SHA-256, found by a public prefix, compared in
constant time. An unknown prefix still costs one hash and one comparison, so timing does not tell
a caller whether a prefix exists."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

_DUMMY_HASH = hashlib.sha256(b"no-such-token").hexdigest()


@dataclass(frozen=True)
class IssuedToken:
    token: str  # the clear token: returned to the caller once, never stored
    prefix: str
    token_hash: str


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue(kind: str) -> IssuedToken:
    """`kind` is a short visible tag: "gam" for agent credentials, "gpt" for personal tokens."""
    prefix = secrets.token_hex(6)
    token = f"{kind}_{prefix}_{secrets.token_urlsafe(32)}"
    return IssuedToken(token=token, prefix=prefix, token_hash=hash_token(token))


def split_prefix(token: str, kind: str) -> str | None:
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != kind or len(parts[1]) != 12:
        return None
    return parts[1]


def matches(token: str, stored_hash: str | None) -> bool:
    candidate = hash_token(token)
    return hmac.compare_digest(candidate, stored_hash or _DUMMY_HASH) and stored_hash is not None
