"""Shapes shared by the detectors: spans, digit counts, and the things that are never a phone
or an account number (dates, IPv4 addresses)."""

from __future__ import annotations

import re

#: (start, end, kind) in the working copy of the text.
Span = tuple[int, int, str]

PLACEHOLDERS: dict[str, str] = {
    "EMAIL": "[EMAIL]",
    "PHONE": "[PHONE]",
    "IL_ID": "[IL_ID]",
    "CARD": "[CARD]",
    "BANK_ACCOUNT": "[BANK_ACCOUNT]",
    "NUMBER": "[NUMBER]",
    "SECRET": "[SECRET]",
}
PLACEHOLDER_ALT = "|".join(re.escape(p) for p in PLACEHOLDERS.values())
PLACEHOLDER_RE = re.compile(PLACEHOLDER_ALT)
NOT_PLACEHOLDER = r"(?!" + PLACEHOLDER_ALT + r")"

DIGIT_RE = re.compile(r"[0-9]")
HAS_DIGIT_RE = DIGIT_RE

DATE_LIKE_RE = re.compile(
    r"(?:[0-9]{4}([-./])[0-9]{1,2}\1[0-9]{1,2}|[0-9]{1,2}([-./])[0-9]{1,2}\2[0-9]{2,4})"
    r"(?:[ T][0-9]{1,2})?"
)
# a date anywhere inside a candidate ("01.01.1900 - 1900/1/1") disqualifies it
DATE_INSIDE_RE = re.compile(r"(?<![0-9])(?:[0-9]{4}([-./])[0-9]{1,2}\1[0-9]{1,2}|[0-9]{1,2}([-./])[0-9]{1,2}\2[0-9]{2,4})(?![0-9])")
IPV4_RE = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}")


def count_digits(text: str) -> int:
    return sum(map(text.count, "0123456789"))


def is_date(text: str) -> bool:
    """A calendar date written with one separator (2024-05-03, 03.05.2024, 5/3/24)."""
    m = DATE_LIKE_RE.fullmatch(text)
    if m is None:
        return False
    parts = [int(p) for p in re.split(r"[-./ T]", text) if p]
    if len(parts) < 3:
        return False
    if len(str(parts[0])) == 4 or text[:4].isdigit():
        _, a, b = parts[:3]
        return 1 <= a <= 12 and 1 <= b <= 31
    a, b = parts[0], parts[1]
    return (1 <= a <= 31 and 1 <= b <= 12) or (1 <= a <= 12 and 1 <= b <= 31)
