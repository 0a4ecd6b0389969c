"""Deterministic masking of personal data in free text (SPEC §4.1).

This module has no Django dependency on purpose: it is pure text processing
and can be imported and tested on its own.

Detected data is replaced by a typed placeholder (see ``PLACEHOLDERS``).
Detection runs in a fixed order, most specific first:

1. ``SECRET``        API keys / tokens of known shapes, ``password: …``-style
                     values, token values after words such as "api key",
                     passport numbers after the word "passport".
2. ``EMAIL``         e-mail addresses (ASCII, incl. full-width forms).
3. ``BANK_ACCOUNT``  IBANs (mod-97 validated by ``stdnum.iban``).
4. ``CARD``          13–19 digit payment card numbers passing Luhn
                     (``stdnum.luhn``), contiguous or grouped with spaces/dashes.
                     Card-*shaped* groups (4-4-4-x, 4-6-5) that fail Luhn
                     become ``NUMBER``.
5. ``IL_ID``         Israeli ID numbers, 9 digits (or ``NNNNNNNN-C``) with a
                     valid check digit (``stdnum.il.idnr``).
6. ``BANK_ACCOUNT``  bank/branch/account shapes (``12-345-678901``,
                     ``0001-234-5678901``) and digits after words such as
                     "account", "acct", "a/c", 口座, 口座番号, חשבון.
7. ``PHONE``         ``phonenumbers.PhoneNumberMatcher`` over the regions in
                     ``PHONE_REGIONS`` (only when the text has >= 7 digits left).
8. ``NUMBER``        any remaining run of 10 or more digits.

Every stage rewrites a working copy of the text, so later stages never see
(and never re-match) what an earlier stage replaced. Detection runs on a
normalised copy of the text (full-width ASCII → ASCII, any Unicode decimal
digit → ASCII digit, Unicode dashes/spaces → ``-``/`` ``); the normalisation
maps every character to exactly one character, so spans line up with the
original text, and the original characters are kept everywhere outside the
replaced spans.

The whole pipeline is repeated until the text no longer changes (at most a
few rounds, normally one extra round that finds nothing), which makes
``mask`` idempotent: ``mask(mask(x).text).text == mask(x).text``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Iterable

import phonenumbers
from phonenumbers import Leniency, PhoneNumberMatcher
from stdnum import iban as _stdnum_iban
from stdnum import luhn as _stdnum_luhn
from stdnum.il import idnr as _stdnum_il_idnr

__all__ = [
    "PLACEHOLDERS",
    "PHONE_REGIONS",
    "MaskResult",
    "mask",
    "contains_personal_data",
    "is_effectively_empty",
    "detect_kinds",
]

PLACEHOLDERS: dict[str, str] = {
    "EMAIL": "[EMAIL]",
    "PHONE": "[PHONE]",
    "IL_ID": "[IL_ID]",
    "CARD": "[CARD]",
    "BANK_ACCOUNT": "[BANK_ACCOUNT]",
    "NUMBER": "[NUMBER]",
    "SECRET": "[SECRET]",
}

#: Default regions used to interpret phone numbers written without "+".
PHONE_REGIONS: tuple[str, ...] = ("IL", "JP", "US", "GB")

_MAX_ROUNDS = 4


@dataclass(frozen=True)
class MaskResult:
    text: str  # masked text
    kinds: tuple[str, ...]  # sorted, unique kinds that were replaced


# --------------------------------------------------------------------------
# Normalisation (1 char -> 1 char, so offsets are preserved)
# --------------------------------------------------------------------------

# (the katakana prolonged sound mark ー is deliberately not mapped: it is part of
# words such as パスワード; phonenumbers understands it inside phone numbers.)
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58\ufe63"


class _NormMap(dict):
    """Lazy ``str.translate`` table; every value is a single code point."""

    def __missing__(self, cp: int) -> int:
        ch = chr(cp)
        out = cp
        if 0xFF01 <= cp <= 0xFF5E:  # full-width ASCII
            out = cp - 0xFEE0
        elif ch in _DASHES:
            out = 0x2D  # "-"
        else:
            cat = unicodedata.category(ch)
            if cat == "Nd":
                out = 0x30 + unicodedata.decimal(ch)
            elif cat == "Zs":
                out = 0x20
        self[cp] = out
        return out


_NORM_MAP = _NormMap()


def _normalize(text: str) -> str:
    if text.isascii():
        return text
    return text.translate(_NORM_MAP)


# --------------------------------------------------------------------------
# Patterns
# --------------------------------------------------------------------------

_PLACEHOLDER_ALT = "|".join(re.escape(p) for p in PLACEHOLDERS.values())
_PLACEHOLDER_RE = re.compile(_PLACEHOLDER_ALT)
_NOT_PLACEHOLDER = r"(?!" + _PLACEHOLDER_ALT + r")"

# -- secrets: known token shapes (the whole match is the secret) ------------
_TOKEN_SHAPES = [
    re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
        re.S,
    ),
    # JWT
    re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
    # OpenAI / Anthropic style
    re.compile(r"(?<![A-Za-z0-9_-])sk-(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{16,}"),
    # Stripe style
    re.compile(r"(?<![A-Za-z0-9_])(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"),
    # GitHub
    re.compile(r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{30,}"),
    re.compile(r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{22,}"),
    # GitLab
    re.compile(r"(?<![A-Za-z0-9_-])glpat-[A-Za-z0-9_-]{20,}"),
    # Slack
    re.compile(r"(?<![A-Za-z0-9_-])xox[baprs]-[A-Za-z0-9-]{10,}"),
    # AWS access key id
    re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"),
    # Google API key
    re.compile(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}"),
    # Hugging Face / npm
    re.compile(r"(?<![A-Za-z0-9_-])hf_[A-Za-z0-9]{30,}"),
    re.compile(r"(?<![A-Za-z0-9_-])npm_[A-Za-z0-9]{36}"),
]

# -- secrets: label + value (only the value is masked) ----------------------
# "Bearer <token>" (token must contain a digit so prose does not match)
_BEARER_RE = re.compile(
    r"(?i:\bbearer)\s+" + _NOT_PLACEHOLDER + r"(?P<v>(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)"
)

_PASSWORD_LABEL = (
    r"(?:(?i:\b(?:password|passwd|passphrase|pass\s?code|pwd|pin(?:\s?code)?)\b)"
    r"|パスワード|暗証番号|סיסמה|סיסמא|סיסמת)"
)
_TOKEN_LABEL = (
    r"(?:(?i:\b(?:api[\s_-]?key|apikey|api[\s_-]?token|access[\s_-]?token|auth[\s_-]?token"
    r"|refresh[\s_-]?token|secret[\s_-]?key|client[\s_-]?secret|private[\s_-]?key"
    r"|access[\s_-]?key|token|secret)s?\b)"
    r"|APIキー|トークン|シークレット|アクセスキー|(?i:מפתח\s*api)|טוקן)"
)
# strong separator: ":" "=" (optionally after "my"/"is" etc. is NOT needed)
_STRONG_SEP = r"[ \t]*[:=：][ \t]*"
# weak separator: whitespace, "is"/"was", Japanese は, Hebrew היא/הוא/שלי
_WEAK_SEP = (
    r"(?:[ \t]+(?:(?i:is|was)[ \t]+)?|[ \t]*は[ \t]*"
    r"|[ \t]+(?:שלי[ \t]+)?(?:היא|הוא)?[ \t]*)"
)
_QUOTED_VALUE = r"(?:\"(?P<q1>[^\"\n]{1,200})\"|'(?P<q2>[^'\n]{1,200})'|「(?P<q3>[^」\n]{1,200})」)"
_BARE_VALUE = r"(?P<v>" + _NOT_PLACEHOLDER + r"[\x21-\x7e]+)"

_PASSWORD_STRONG_RE = re.compile(_PASSWORD_LABEL + _STRONG_SEP + r"(?:" + _QUOTED_VALUE + "|" + _BARE_VALUE + ")")
_PASSWORD_WEAK_RE = re.compile(_PASSWORD_LABEL + _WEAK_SEP + r"(?:" + _QUOTED_VALUE + "|" + _BARE_VALUE + ")")
_TOKEN_STRONG_RE = re.compile(_TOKEN_LABEL + _STRONG_SEP + r"(?:" + _QUOTED_VALUE + "|" + _BARE_VALUE + ")")
_TOKEN_WEAK_RE = re.compile(_TOKEN_LABEL + _WEAK_SEP + _BARE_VALUE)

_PASSPORT_RE = re.compile(
    r"(?:(?i:\bpassport\b)|パスポート|旅券|דרכון)"
    r"(?:[\s:：#.\-]|(?i:\b(?:no|number|num|nr|is|was)\b)|番号|は|מספר|מס'|שלי|הוא)*?"
    r"(?<![A-Za-z0-9])(?P<v>(?=[A-Za-z]*[0-9])[A-Za-z0-9]{6,9})(?![A-Za-z0-9])"
)

_BLOB_CHARS_RE = re.compile(r"[A-Za-z0-9+/=_.\-]+")
_HAS_DIGIT_RE = re.compile(r"[0-9]")
_HAS_LETTER_RE = re.compile(r"[A-Za-z]")
_HAS_SYMBOL_RE = re.compile(r"[^A-Za-z0-9]")

# -- e-mail -------------------------------------------------------------------
_ATEXT = r"A-Za-z0-9!#$%&'*+/=?^_`{|}~\-"
_EMAIL_RE = re.compile(
    r"(?<![" + _ATEXT + r".])"
    r"[" + _ATEXT + r"]+(?:\.[" + _ATEXT + r"]+)*"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?![A-Za-z0-9-])"
)

# -- IBAN -----------------------------------------------------------------------
_IBAN_RE = re.compile(
    r"(?<![A-Za-z0-9])[A-Za-z]{2}[0-9]{2}(?:[ ]?[A-Za-z0-9]{4}){2,8}(?:[ ]?[A-Za-z0-9]{1,3})?"
)

# Digits directly after "+" belong to an international phone number; the card,
# Israeli ID and bank-shape patterns leave them to the phone stage.

# -- cards --------------------------------------------------------------------
_CARD_CONTIGUOUS_RE = re.compile(r"(?<![0-9+])[0-9]{13,19}(?![0-9])")
_CARD_GROUPED_RE = re.compile(
    r"(?<![0-9+])(?<![0-9][ -])"
    r"(?:[0-9]{4}[ -][0-9]{4}[ -][0-9]{4}[ -][0-9]{1,4}(?:[ -][0-9]{1,3})?"
    r"|[0-9]{4}[ -][0-9]{6}[ -][0-9]{4,5})"
    r"(?![0-9])(?![ -][0-9])"
)

# -- Israeli ID -----------------------------------------------------------------
_IL_ID_RE = re.compile(
    r"(?<![0-9+])(?<![0-9][.,])(?:[0-9]{9}|[0-9]{7,8}-[0-9])(?![0-9])(?![.,][0-9])"
)

# -- bank accounts ------------------------------------------------------------
_BANK_SHAPE_RE = re.compile(
    r"(?<![0-9+])(?<![0-9][-./ ])[0-9]{2,4}(?P<s>[- ])[0-9]{3}(?P=s)[0-9]{5,9}(?![0-9])(?![-./][0-9])"
)
_BANK_KEYWORD_RE = re.compile(
    r"(?:(?i:\b(?:bank\s+)?(?:account|acct|a/c)s?(?![A-Za-z]))|口座番号|口座|(?:מס['׳]?\s*)?חשבון(?:\s*(?:ה)?בנק)?)"
    r"(?:[\s:：#.,\-]|(?i:\b(?:number|num|no|nr|is|was|id)\b)|番号|は|普通|当座|預金|貯金|מספר|מס['׳]|שלי|הוא)*?"
    r"(?<![0-9])(?P<v>[0-9](?:[ -]?[0-9]){4,33})(?![0-9])"
)

# -- dates (never a bank account / phone) -------------------------------------
_DATE_LIKE_RE = re.compile(
    r"[0-9]{4}([-./])[0-9]{1,2}\1[0-9]{1,2}|[0-9]{1,2}([-./])[0-9]{1,2}\2[0-9]{2,4}"
)
_IPV4_RE = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}")
_NANP_SHAPE_RE = re.compile(r"(?:\+?1[-. ]?)?(?:\([2-9][0-9]{2}\)[ ]?|[2-9][0-9]{2}[-. ])[0-9]{3}[-. ][0-9]{4}")

# -- generic --------------------------------------------------------------------
_DIGIT_RE = re.compile(r"[0-9]")
_LONG_NUMBER_RE = re.compile(r"[0-9]{10,}")


# --------------------------------------------------------------------------
# Stage helpers
# --------------------------------------------------------------------------

Span = tuple[int, int, str]


def _trim_value(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop trailing sentence punctuation / unbalanced closers from a bare value."""
    while end - start > 1 and text[end - 1] in ".,;:":
        end -= 1
    for opener, closer in (("(", ")"), ("[", "]"), ("{", "}"), ("<", ">")):
        while end - start > 1 and text[end - 1] == closer and opener not in text[start : end - 1]:
            end -= 1
    while end - start > 1 and text[end - 1] in "\"'" and text[end - 1] not in text[start : end - 1]:
        end -= 1
    while end - start > 1 and text[end - 1] in ".,;:":
        end -= 1
    return start, end


def _value_span(m: re.Match) -> tuple[int, int, bool]:
    """(start, end, quoted) of the value group of a label+value match."""
    for g in ("q1", "q2", "q3"):
        if g in m.re.groupindex and m.group(g) is not None:
            return m.start(g), m.end(g), True
    start, end = _trim_value(m.string, m.start("v"), m.end("v"))
    return start, end, False


def _looks_like_credential(value: str) -> bool:
    """Value after a weak separator ("password is X"): needs a digit or symbol."""
    return len(value) >= 4 and bool(_HAS_DIGIT_RE.search(value) or _HAS_SYMBOL_RE.search(value))


def _looks_like_token(value: str, strong: bool) -> bool:
    blob = _BLOB_CHARS_RE.fullmatch(value) is not None
    has_digit = _HAS_DIGIT_RE.search(value) is not None
    has_letter = _HAS_LETTER_RE.search(value) is not None
    if strong:
        return (len(value) >= 8 and has_digit and has_letter) or (blob and len(value) >= 20)
    return blob and len(value) >= 16 and has_digit and has_letter


def _secret_spans(work: str) -> Iterable[tuple[int, int]]:
    for rx in _TOKEN_SHAPES:
        for m in rx.finditer(work):
            yield m.start(), m.end()


def _stage_regex(rx: re.Pattern, kind: str) -> Callable[[str], list[Span]]:
    def run(work: str) -> list[Span]:
        return [(m.start(), m.end(), kind) for m in rx.finditer(work)]

    return run


def _stage_password_strong(work: str) -> list[Span]:
    out = []
    for m in _PASSWORD_STRONG_RE.finditer(work):
        s, e, _ = _value_span(m)
        out.append((s, e, "SECRET"))
    return out


def _stage_password_weak(work: str) -> list[Span]:
    out = []
    for m in _PASSWORD_WEAK_RE.finditer(work):
        s, e, quoted = _value_span(m)
        if quoted or _looks_like_credential(work[s:e]):
            out.append((s, e, "SECRET"))
    return out


def _stage_token_strong(work: str) -> list[Span]:
    out = []
    for m in _TOKEN_STRONG_RE.finditer(work):
        s, e, quoted = _value_span(m)
        if _looks_like_token(work[s:e], strong=True):
            out.append((s, e, "SECRET"))
    return out


def _stage_token_weak(work: str) -> list[Span]:
    out = []
    for m in _TOKEN_WEAK_RE.finditer(work):
        s, e, _ = _value_span(m)
        if _looks_like_token(work[s:e], strong=False):
            out.append((s, e, "SECRET"))
    return out


def _stage_value_group(rx: re.Pattern, kind: str) -> Callable[[str], list[Span]]:
    def run(work: str) -> list[Span]:
        return [(m.start("v"), m.end("v"), kind) for m in rx.finditer(work)]

    return run


def _stage_email(work: str) -> list[Span]:
    if "@" not in work:
        return []
    return [(m.start(), m.end(), "EMAIL") for m in _EMAIL_RE.finditer(work)]


def _stage_iban(work: str) -> list[Span]:
    out = []
    for m in _IBAN_RE.finditer(work):
        s, e = m.start(), m.end()
        # The regex is greedy; shrink from the right until the IBAN validates.
        while e - s >= 15:
            if work[e - 1] != " " and _stdnum_iban.is_valid(work[s:e]):
                out.append((s, e, "BANK_ACCOUNT"))
                break
            e -= 1
    return out


def _stage_cards(work: str) -> list[Span]:
    out = []
    for m in _CARD_CONTIGUOUS_RE.finditer(work):
        if _stdnum_luhn.is_valid(m.group()):
            out.append((m.start(), m.end(), "CARD"))
    taken = out[:]
    for m in _CARD_GROUPED_RE.finditer(work):
        digits = m.group().replace(" ", "").replace("-", "")
        if not 13 <= len(digits) <= 19:
            continue
        if any(s < m.end() and m.start() < e for s, e, _ in taken):
            continue
        kind = "CARD" if _stdnum_luhn.is_valid(digits) else "NUMBER"
        out.append((m.start(), m.end(), kind))
    return out


def _stage_il_id(work: str) -> list[Span]:
    return [
        (m.start(), m.end(), "IL_ID")
        for m in _IL_ID_RE.finditer(work)
        if _stdnum_il_idnr.is_valid(m.group())
    ]


def _stage_bank_shape(work: str) -> list[Span]:
    return [(m.start(), m.end(), "BANK_ACCOUNT") for m in _BANK_SHAPE_RE.finditer(work)]


def _stage_bank_keyword(work: str) -> list[Span]:
    out = []
    for m in _BANK_KEYWORD_RE.finditer(work):
        value = m.group("v")
        if _DATE_LIKE_RE.fullmatch(value):
            continue
        out.append((m.start("v"), m.end("v"), "BANK_ACCOUNT"))
    return out


def _trim_brackets(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop an unbalanced leading "(" / "[" (phonenumbers keeps it in "(+972 …)")."""
    while end - start > 1 and text[start] in "([" and ")]"[("([").index(text[start])] not in text[start:end]:
        start += 1
    while end - start > 1 and text[end - 1] in ")]" and "(["[(")]").index(text[end - 1])] not in text[start:end]:
        end -= 1
    return start, end


def _phone_candidate_ok(match) -> bool:
    """Accept a POSSIBLE-leniency match only if it really looks like a phone.

    ``Leniency.VALID`` alone is too strict (it rejects numbers in ranges the
    metadata does not list, e.g. 054-123-4567) and plain ``POSSIBLE`` matches
    dates, versions and invoice numbers, so the decision is made here:

    * dates / IPv4 addresses are never phones;
    * written with "+" (international form): possible and >= 8 digits;
    * starting with the trunk prefix 0 (IL, JP, GB national forms) or "(":
      possible and >= 9 digits;
    * NANP shape (``212-555-0123``, ``1-800-555-0199``): possible;
    * otherwise: valid according to the metadata *and* written with exactly
      the digits of its own national format (so "2024-0012", which would be
      an Israeli number only with a missing trunk prefix, is not a phone,
      while "1-800-123-456" is).
    """
    raw = match.raw_string
    s, e = _trim_brackets(raw, 0, len(raw))
    raw = raw[s:e]
    if _DATE_LIKE_RE.fullmatch(raw) or _IPV4_RE.fullmatch(raw):
        return False
    number = match.number
    if not phonenumbers.is_possible_number(number):
        return False
    digits = "".join(_DIGIT_RE.findall(raw))
    first = raw[0]
    if first == "+":
        return len(digits) >= 8
    if first == "0" or first == "(":
        return len(digits) >= 9
    if _NANP_SHAPE_RE.fullmatch(raw):
        return True
    if not phonenumbers.is_valid_number(number):
        return False
    national = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL)
    return "".join(_DIGIT_RE.findall(national)) == digits


def _stage_phone(work: str) -> list[Span]:
    if len(_DIGIT_RE.findall(work)) < 7:
        return []
    found: set[tuple[int, int]] = set()
    for region in PHONE_REGIONS:
        for match in PhoneNumberMatcher(work, region, leniency=Leniency.POSSIBLE):
            if _phone_candidate_ok(match):
                found.add(_trim_brackets(work, match.start, match.end))
    # merge overlapping spans deterministically
    merged: list[list[int]] = []
    for s, e in sorted(found):
        if merged and s < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e, "PHONE") for s, e in merged]


def _stage_long_number(work: str) -> list[Span]:
    return [(m.start(), m.end(), "NUMBER") for m in _LONG_NUMBER_RE.finditer(work)]


_STAGES: tuple[Callable[[str], list[Span]], ...] = (
    # 1. secrets
    lambda work: [(s, e, "SECRET") for s, e in _secret_spans(work)],
    _stage_value_group(_BEARER_RE, "SECRET"),
    _stage_password_strong,
    _stage_token_strong,
    _stage_password_weak,
    _stage_token_weak,
    _stage_value_group(_PASSPORT_RE, "SECRET"),
    # 2. e-mail
    _stage_email,
    # 3. IBAN
    _stage_iban,
    # 4. cards
    _stage_cards,
    # 5. Israeli IDs
    _stage_il_id,
    # 6. bank account shapes / keywords
    _stage_bank_shape,
    _stage_bank_keyword,
    # 7. phones
    _stage_phone,
    # 8. any remaining long digit run
    _stage_long_number,
)


def _select(spans: list[Span]) -> list[Span]:
    """Non-overlapping subset, earliest start first, longer span on ties."""
    chosen: list[Span] = []
    last_end = -1
    for s, e, k in sorted(spans, key=lambda t: (t[0], -t[1], t[2])):
        if s >= last_end and e > s:
            chosen.append((s, e, k))
            last_end = e
    return chosen


def _apply(text: str, spans: list[Span]) -> str:
    parts = []
    pos = 0
    for s, e, k in spans:
        parts.append(text[pos:s])
        parts.append(PLACEHOLDERS[k])
        pos = e
    parts.append(text[pos:])
    return "".join(parts)


def _mask_once(text: str, kinds: set[str]) -> str:
    original = text
    work = _normalize(text)
    for stage in _STAGES:
        spans = stage(work)
        if not spans:
            continue
        spans = _select(spans)
        original = _apply(original, spans)
        work = _apply(work, spans)
        kinds.update(k for _, _, k in spans)
    return original


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


def mask(text: str) -> MaskResult:
    """Replace personal data in ``text`` with typed placeholders."""
    if not isinstance(text, str):
        raise TypeError(f"mask() expects str, got {type(text).__name__}")
    kinds: set[str] = set()
    current = text
    for _ in range(_MAX_ROUNDS):
        round_kinds: set[str] = set()
        masked = _mask_once(current, round_kinds)
        if masked == current:
            break
        kinds |= round_kinds
        current = masked
    return MaskResult(text=current, kinds=tuple(sorted(kinds)))


def detect_kinds(text: str) -> tuple[str, ...]:
    """Sorted, unique kinds of personal data found in ``text``."""
    return mask(text).kinds


def contains_personal_data(text: str) -> bool:
    """True if ``mask(text)`` would replace anything."""
    return bool(detect_kinds(text))


def is_effectively_empty(masked_text: str) -> bool:
    """True if only placeholders, whitespace, punctuation or symbols remain.

    Uses Unicode categories: punctuation (P*), symbols (S*), separators (Z*)
    and control/format characters (C*) do not count as content, so Japanese
    punctuation such as 、。「」 is ignored. Letters, marks and digits count.
    """
    rest = _PLACEHOLDER_RE.sub(" ", masked_text)
    return all(unicodedata.category(ch)[0] in "PSZC" for ch in rest)
