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

# -- what joins digit groups (SPEC §4.1), written once ------------------------------------------
# A separator between digit groups is a run of whitespace and/or one joiner. The working copy
# (text.Work) has already turned Unicode spaces (Zs: no-break, narrow no-break, thin, ideographic
# spaces) into " " and, between digits, every joiner look-alike into its ASCII joiner, so the
# detectors only see these:
#: the ASCII joiners: a dash, a full stop, a comma, a slash
JOINERS = "-.,/"
#: look-alike joiners, folded between digits by text.Work (dashes of category Pd are folded
#: everywhere): full stops, commas, slashes (the middle dots are folded to "-", as before)
JOINER_LOOK_ALIKES: dict[str, str] = {
    **dict.fromkeys(
        "\u2024\ufe52\uff0e\u3002\uff61\u06d4", "."
    ),  # one-dot leader, small / full-width / ideographic full stops
    **dict.fromkeys("\u3001\uff0c\ufe50\ufe51\uff64\u060c\u066c", ","),  # ideographic, full-width, small, Arabic commas
    **dict.fromkeys(
        "\u2215\u2044\uff0f\u29f8\u2571", "/"
    ),  # division slash, fraction slash, full-width solidus, big solidus
    **dict.fromkeys("\u00b7\u30fb\uff65\u2022\u2219\u2027\u22c5", "-"),  # middle dots and bullets (054·123·4567)
}
#: a line break: LF, CR LF, CR, VT, FF, NEL, the Unicode line and paragraph separators
LINE_BREAK = r"(?:\r\n|[\n\r\x0b\x0c\x85\u2028\u2029])"
#: whitespace on one line (space, tab, and any Unicode whitespace that is not a line break)
H_SPACE = r"[^\S\n\r\x0b\x0c\x85\u2028\u2029]"
_GAP = H_SPACE + r"{0,3}(?:" + LINE_BREAK + H_SPACE + r"{0,3})?"
#: one separator between two digit groups: up to three blanks with at most one line break, and
#: at most one joiner with such a run on either side ("4111 . 1111", "4111\t1111", "1234、5678").
#: Atomic, never empty, never a digit, so ``(?:[0-9]++ DIGIT_SEP)++`` scans in linear time.
DIGIT_SEP = r"(?=[\s" + re.escape(JOINERS) + r"])(?>" + _GAP + r"(?:[" + re.escape(JOINERS) + r"]" + _GAP + r")?)"
#: the same on one line (no line break inside)
DIGIT_SEP_ONE_LINE = (
    r"(?=[\s"
    + re.escape(JOINERS)
    + r"])(?>"
    + H_SPACE
    + r"{0,3}(?:["
    + re.escape(JOINERS)
    + r"]"
    + H_SPACE
    + r"{0,3})?)(?!"
    + LINE_BREAK
    + ")"
)
LINE_BREAK_RE = re.compile(LINE_BREAK)


def has_line_break(text: str) -> bool:
    return LINE_BREAK_RE.search(text) is not None


DIGIT_RE = re.compile(r"[0-9]")
HAS_DIGIT_RE = DIGIT_RE

DATE_LIKE_RE = re.compile(
    r"(?:[0-9]{4}([-./])[0-9]{1,2}\1[0-9]{1,2}|[0-9]{1,2}([-./])[0-9]{1,2}\2[0-9]{2,4})"
    r"(?:[ T][0-9]{1,2})?"
)
# a date anywhere inside a candidate ("01.01.1900 - 1900/1/1") disqualifies it
DATE_INSIDE_RE = re.compile(
    r"(?<![0-9])(?:[0-9]{4}([-./])[0-9]{1,2}\1[0-9]{1,2}|[0-9]{1,2}([-./])[0-9]{1,2}\2[0-9]{2,4})(?![0-9])"
)
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
