"""The one cursor codec. A page cursor is opaque: the API signs what it issues (Django's signing,
keyed by SECRET_KEY and salted per list and per reader), and refuses anything else — a cursor it
did not issue, edited, or issued for another reader's list — with 400 VALIDATION_ERROR."""

from __future__ import annotations

from typing import Any

from django.core import signing

from core.errors import validation_error


def encode_cursor(position: Any, *, scope: str) -> str:
    """`position` (JSON values) as a signed cursor valid only for lists of `scope`."""
    return signing.dumps(position, salt=f"memoryapp.cursor:{scope}", compress=False)


def decode_cursor(cursor: object, *, scope: str, field: str = "cursor") -> Any:
    if isinstance(cursor, str):
        try:
            return signing.loads(cursor, salt=f"memoryapp.cursor:{scope}")
        except (signing.BadSignature, ValueError, UnicodeError):
            pass
    raise validation_error({field: ["Not a cursor this API returned."]})
