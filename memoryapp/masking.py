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
7. ``PHONE``         ``phonenumbers.PhoneNumberMatcher`` (leniency POSSIBLE,
                     regions ``PHONE_REGIONS``) on "windows" of phone-like
                     characters with >= 7 digits, plus acceptance rules that
                     keep dates, versions and invoice numbers out (see
                     ``_phone_candidate_ok``). Space-separated lists of numbers,
                     which the matcher cannot split, get a second pass that
                     segments the leftover tokens and checks each candidate
                     with ``phonenumbers.parse``.
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
from typing import Callable, NamedTuple

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
    """Lazy code point -> code point table (cached); never changes length."""

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

# Characters the normalisation changes: full-width ASCII, Unicode dashes,
# non-ASCII spaces and non-ASCII decimal digits.
_NEEDS_NORM_RE = re.compile(
    "[\uff01-\uff5e" + _DASHES + "\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]|(?=\\d)[^0-9]"
)


def _normalize_char(m: re.Match) -> str:
    return chr(_NORM_MAP[ord(m.group())])


def _normalize(text: str) -> str:
    if text.isascii():
        return text
    return _NEEDS_NORM_RE.sub(_normalize_char, text)


# --------------------------------------------------------------------------
# Patterns
#
# Performance note: Python's ``re`` can only skip ahead quickly when a pattern
# starts with a literal or a character class, so the digit-based patterns
# start with ``[0-9]`` and put their "not preceded by" checks in a lookbehind
# *after* the first character.
# --------------------------------------------------------------------------

_PLACEHOLDER_ALT = "|".join(re.escape(p) for p in PLACEHOLDERS.values())
_PLACEHOLDER_RE = re.compile(_PLACEHOLDER_ALT)
_NOT_PLACEHOLDER = r"(?!" + _PLACEHOLDER_ALT + r")"

# -- secrets: known token shapes (the whole match is the secret) ------------
# (literal triggers, pattern); a pattern only runs if one trigger is present.
_TOKEN_SHAPES: tuple[tuple[tuple[str, ...], re.Pattern], ...] = (
    (
        ("-----BEGIN",),
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----", re.S),
    ),
    # JWT
    (
        ("eyJ",),
        re.compile(r"eyJ(?<![A-Za-z0-9_]eyJ)[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
    ),
    # OpenAI / Anthropic style (must contain a digit: "sk-learn-compatible" is prose)
    (("sk-",), re.compile(r"(?<![A-Za-z0-9_])sk-(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{16,}")),
    # Stripe style
    (("_live_", "_test_"), re.compile(r"(?<![A-Za-z0-9_])(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}")),
    # GitHub
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), re.compile(r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{30,}")),
    (("github_pat_",), re.compile(r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{22,}")),
    # GitLab
    (("glpat-",), re.compile(r"(?<![A-Za-z0-9_])glpat-[A-Za-z0-9_-]{20,}")),
    # Slack
    (("xox",), re.compile(r"(?<![A-Za-z0-9_])xox[baprs]-[A-Za-z0-9-]{10,}")),
    # AWS access key id
    (("AKIA", "ASIA"), re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])")),
    # Google API key
    (("AIza",), re.compile(r"(?<![A-Za-z0-9_])AIza[0-9A-Za-z_-]{35}")),
    # Hugging Face / npm
    (("hf_",), re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}")),
    (("npm_",), re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}")),
)

# -- secrets: label + value (only the value is masked) ----------------------
_BEARER_TRIGGERS = ("bearer",)
# "Bearer <token>" (token must contain a digit so prose does not match)
_BEARER_RE = re.compile(
    r"(?i:\bbearer)\s+" + _NOT_PLACEHOLDER + r"(?P<v>(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)"
)

_PASSWORD_TRIGGERS = ("pass", "pwd", "pin", "パスワード", "暗証番号", "סיסמ")
_PASSWORD_LABEL = (
    r"(?:(?i:\b(?:password|passwd|passphrase|pass\s?code|pwd|pin(?:\s?code)?)\b)"
    r"|パスワード|暗証番号|סיסמה|סיסמא|סיסמת)"
)
_TOKEN_TRIGGERS = ("key", "token", "secret", "キー", "トークン", "シークレット", "מפתח", "טוקן")
_TOKEN_LABEL = (
    r"(?:(?<!\[)(?i:\b(?:api[\s_-]?key|apikey|api[\s_-]?token|access[\s_-]?token|auth[\s_-]?token"
    r"|refresh[\s_-]?token|secret[\s_-]?key|client[\s_-]?secret|private[\s_-]?key"
    r"|access[\s_-]?key|token|secret)s?\b)"
    r"|APIキー|トークン|シークレット|アクセスキー|(?i:מפתח\s*api)|טוקן)"
)
# strong separator: ":" / "="
_STRONG_SEP = r"[ \t]*[:=][ \t]*"
# weak separator: whitespace, "is"/"was", Japanese は, Hebrew (שלי) היא/הוא
_WEAK_SEP = r"(?:[ \t]+(?:(?i:is|was)[ \t]+)?|[ \t]*は[ \t]*|[ \t]+(?:שלי[ \t]+)?(?:היא|הוא)?[ \t]*)"
_QUOTED_VALUE = r"(?:\"(?P<q1>[^\"\n]{1,200})\"|'(?P<q2>[^'\n]{1,200})'|「(?P<q3>[^」\n]{1,200})」)"
# values are printable ASCII (after normalisation), so Japanese text right
# after a value ("パスワードはabc123です") is not swallowed
_BARE_VALUE = r"(?P<v>" + _NOT_PLACEHOLDER + r"[\x21-\x7e]+)"
_ANY_VALUE = r"(?:" + _QUOTED_VALUE + "|" + _BARE_VALUE + ")"

_PASSWORD_STRONG_RE = re.compile(_PASSWORD_LABEL + _STRONG_SEP + _ANY_VALUE)
_PASSWORD_WEAK_RE = re.compile(_PASSWORD_LABEL + _WEAK_SEP + _ANY_VALUE)
_TOKEN_STRONG_RE = re.compile(_TOKEN_LABEL + _STRONG_SEP + _ANY_VALUE)
_TOKEN_WEAK_RE = re.compile(_TOKEN_LABEL + _WEAK_SEP + _BARE_VALUE)

_PASSPORT_TRIGGERS = ("passport", "パスポート", "旅券", "דרכון")
_PASSPORT_RE = re.compile(
    r"(?:(?i:\bpassport\b)|パスポート|旅券|דרכון)"
    r"(?:[\s:#.\-]|(?i:\b(?:no|number|num|nr|is|was)\b)|番号|は|מספר|מס'|שלי|הוא)*?"
    r"(?<![A-Za-z0-9])(?P<v>(?=[A-Za-z]*[0-9])[A-Za-z0-9]{6,9})(?![A-Za-z0-9])"
)

_BLOB_CHARS_RE = re.compile(r"[A-Za-z0-9+/=_.\-]+")
_HAS_DIGIT_RE = re.compile(r"[0-9]")
_HAS_LETTER_RE = re.compile(r"[A-Za-z]")
_HAS_SYMBOL_RE = re.compile(r"[^A-Za-z0-9]")

# -- e-mail -------------------------------------------------------------------
# ASCII addresses (full-width ones are normalised to ASCII first). The local
# part uses the RFC 5322 atext set; the lookbehind makes every local part start
# at the beginning of its run, which keeps the scan linear.
_ATEXT = r"A-Za-z0-9!#$%&'*+/=?^_`{|}~\-"
_EMAIL_RE = re.compile(
    r"(?<![" + _ATEXT + r".])"
    r"[" + _ATEXT + r"]+(?:\.[" + _ATEXT + r"]+)*"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?![A-Za-z0-9-])"
)

# -- IBAN -----------------------------------------------------------------------
# candidate: 2 letters, 2 digits, then groups of 4 (optionally space-separated)
# (the match starts at the check digits, so the scan can skip to digits; the
# two country letters are checked by lookbehind and added back by the stage)
_IBAN_RE = re.compile(
    r"[0-9](?<=[A-Za-z]{2}[0-9])(?<![A-Za-z0-9][A-Za-z]{2}[0-9])[0-9]"
    r"(?:[ ]?[A-Za-z0-9]{4}){2,8}(?:[ ]?[A-Za-z0-9]{1,3})?"
)

# Digits directly after "+" belong to an international phone number; the card,
# Israeli ID and bank-shape patterns leave them to the phone stage.

# -- cards --------------------------------------------------------------------
_CARD_CONTIGUOUS_RE = re.compile(r"[0-9](?<![0-9+][0-9])[0-9]{12,18}(?![0-9])")
_CARD_GROUPED_RE = re.compile(
    r"[0-9](?<![0-9+][0-9])(?<![0-9][ -][0-9])"
    r"(?:[0-9]{3}[ -][0-9]{4}[ -][0-9]{4}[ -][0-9]{1,4}(?:[ -][0-9]{1,3})?"
    r"|[0-9]{3}[ -][0-9]{6}[ -][0-9]{4,5})"
    r"(?![0-9])(?![ -][0-9])"
)

# -- Israeli ID -----------------------------------------------------------------
_IL_ID_RE = re.compile(
    r"[0-9](?<![0-9+][0-9])(?<![0-9][.,][0-9])(?:[0-9]{8}|[0-9]{6,7}-[0-9])(?![0-9])(?![.,][0-9])"
)

# -- bank accounts ------------------------------------------------------------
# bank-branch-account: 2-4 / 3 / 5-9 digits, same separator ("-" or " ").
# (phone numbers end in a group of at most 4 digits, so they do not fit.)
_BANK_SHAPE_RE = re.compile(
    r"[0-9](?<![0-9+][0-9])(?<![0-9][-./ ][0-9])[0-9]{1,3}(?P<s>[- ])[0-9]{3}(?P=s)[0-9]{5,9}"
    r"(?![0-9])(?![-./][0-9])"
)
_BANK_TRIGGERS = ("account", "acct", "a/c", "口座", "חשבון")
_BANK_KEYWORD_RE = re.compile(
    r"(?:(?i:\b(?:bank\s+)?(?:account|acct|a/c)s?(?![A-Za-z]))|口座番号|口座|(?:מס['׳]?\s*)?חשבון(?:\s*(?:ה)?בנק)?)"
    r"(?:[\s:#.,\-]|(?i:\b(?:number|num|no|nr|is|was|id)\b)|番号|は|普通|当座|預金|貯金|מספר|מס['׳]|שלי|הוא)*?"
    r"(?<![0-9])(?P<v>[0-9](?:[ -]?[0-9]){4,33})(?![0-9])"
)

# -- phones ---------------------------------------------------------------------
# A window is a maximal run of characters that can appear inside a phone
# number; phonenumbers only ever looks at windows with >= 7 digits.
# (a run of two or more spaces/tabs ends a window: numbers never contain one)
_PHONE_WINDOW_RE = re.compile(r"[+(\[]*[0-9](?:[0-9().\-/\[\]~\u30fc\uff70]|[ \t](?![ \t]))*")
_TOKEN_RE = re.compile(r"[^ \t]+")
_SEGMENT_MAX_TOKENS = 6
_SEGMENT_MAX_DIGITS = 17
_SEGMENT_BUDGET = 150
_PHONE_CONTEXT = 4  # characters of context given to the matcher on each side
_PHONE_MIN_DIGITS = 7
_PHONE_PIECE = 40  # long windows are scanned in pieces of about this size
_COUNTRY_CODE_BEFORE_RE = re.compile(r"(?<![0-9])\+[0-9]{1,3}[ \t]*(?:\(0\)[ \t]*)?\Z")

# -- things that are never a phone / bank account -----------------------------
_DATE_LIKE_RE = re.compile(
    r"(?:[0-9]{4}([-./])[0-9]{1,2}\1[0-9]{1,2}|[0-9]{1,2}([-./])[0-9]{1,2}\2[0-9]{2,4})"
    r"(?:[ T][0-9]{1,2})?"
)
# a date anywhere inside a candidate ("01.01.1900 - 1900/1/1") disqualifies it
_DATE_INSIDE_RE = re.compile(
    r"(?<![0-9])(?:[0-9]{4}([-./])[0-9]{1,2}\1[0-9]{1,2}|[0-9]{1,2}([-./])[0-9]{1,2}\2[0-9]{2,4})(?![0-9])"
)
_IPV4_RE = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}")
_NANP_SHAPE_RE = re.compile(
    r"(?:\+?1[-. ]?)?(?:\([2-9][0-9]{2}\)[ ]?|[2-9][0-9]{2}[-. ])[0-9]{3}[-. ][0-9]{4}"
)

# -- generic --------------------------------------------------------------------
_DIGIT_RE = re.compile(r"[0-9]")
_LONG_NUMBER_RE = re.compile(r"[0-9]{10,}")


def _count_digits(text: str) -> int:
    return sum(map(text.count, "0123456789"))


# --------------------------------------------------------------------------
# Stages. Each takes the current working text and returns (start, end, kind)
# spans; overlapping spans within a stage are resolved by ``_select``.
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
    """(start, end, quoted) of the value of a label+value match."""
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


def _has_any(text: str, triggers: tuple[str, ...]) -> bool:
    return any(t in text for t in triggers)


class _Ctx:
    """Per-pass facts used to skip stages that cannot match."""

    __slots__ = ("low", "digits")

    def __init__(self, work: str) -> None:
        self.low = work.lower()
        self.digits = _count_digits(work)


def _stage_token_shapes(work: str, ctx: _Ctx) -> list[Span]:
    out: list[Span] = []
    for triggers, rx in _TOKEN_SHAPES:
        if _has_any(work, triggers):
            out.extend((m.start(), m.end(), "SECRET") for m in rx.finditer(work))
    return out


def _stage_bearer(work: str, ctx: _Ctx) -> list[Span]:
    if not _has_any(ctx.low, _BEARER_TRIGGERS):
        return []
    return [(m.start("v"), m.end("v"), "SECRET") for m in _BEARER_RE.finditer(work)]


def _stage_password_strong(work: str, ctx: _Ctx) -> list[Span]:
    if not _has_any(ctx.low, _PASSWORD_TRIGGERS):
        return []
    out: list[Span] = []
    for m in _PASSWORD_STRONG_RE.finditer(work):
        s, e, _ = _value_span(m)
        out.append((s, e, "SECRET"))
    return out


def _stage_token_strong(work: str, ctx: _Ctx) -> list[Span]:
    if not _has_any(ctx.low, _TOKEN_TRIGGERS):
        return []
    out: list[Span] = []
    for m in _TOKEN_STRONG_RE.finditer(work):
        s, e, _ = _value_span(m)
        if _looks_like_token(work[s:e], strong=True):
            out.append((s, e, "SECRET"))
    return out


def _stage_password_weak(work: str, ctx: _Ctx) -> list[Span]:
    if not _has_any(ctx.low, _PASSWORD_TRIGGERS):
        return []
    out: list[Span] = []
    for m in _PASSWORD_WEAK_RE.finditer(work):
        s, e, quoted = _value_span(m)
        if quoted or _looks_like_credential(work[s:e]):
            out.append((s, e, "SECRET"))
    return out


def _stage_token_weak(work: str, ctx: _Ctx) -> list[Span]:
    if not _has_any(ctx.low, _TOKEN_TRIGGERS):
        return []
    out: list[Span] = []
    for m in _TOKEN_WEAK_RE.finditer(work):
        s, e, _ = _value_span(m)
        if _looks_like_token(work[s:e], strong=False):
            out.append((s, e, "SECRET"))
    return out


def _stage_passport(work: str, ctx: _Ctx) -> list[Span]:
    if not _has_any(ctx.low, _PASSPORT_TRIGGERS):
        return []
    return [(m.start("v"), m.end("v"), "SECRET") for m in _PASSPORT_RE.finditer(work)]


def _email_start(work: str, start: int, at: int) -> int:
    """Where the address really starts inside a matched local part.

    The atext set includes "=", "-", quotes etc., so "email=dana@x.com",
    Hebrew "ל-dana@x.com" or "'dana@x.com'" would otherwise lose their label,
    prefix or quote. The address starts after the last "=" and after leading
    non-alphanumeric characters (at least one character is always kept).
    """
    eq = work.rfind("=", start, at)
    if eq != -1 and eq + 1 < at:
        start = eq + 1
    while start + 1 < at and not work[start].isalnum():
        start += 1
    return start


def _stage_email(work: str, ctx: _Ctx) -> list[Span]:
    if "@" not in work:
        return []
    out: list[Span] = []
    for m in _EMAIL_RE.finditer(work):
        at = work.index("@", m.start())
        out.append((_email_start(work, m.start(), at), m.end(), "EMAIL"))
    return out


def _stage_iban(work: str, ctx: _Ctx) -> list[Span]:
    if ctx.digits < 8:
        return []
    out: list[Span] = []
    for m in _IBAN_RE.finditer(work):
        s, end = m.start() - 2, m.end()
        # The regex is greedy (it may run into following words or numbers);
        # shrink from the right until the IBAN validates: at group boundaries
        # for grouped candidates, character by character for compact ones.
        if " " in work[s:end]:
            ends = [end] + [i for i in range(end - 1, s + 14, -1) if work[i] == " "]
        else:
            ends = list(range(end, s + 14, -1))
        for e in ends:
            if _stdnum_iban.is_valid(work[s:e]):
                out.append((s, e, "BANK_ACCOUNT"))
                break
    return out


def _stage_cards(work: str, ctx: _Ctx) -> list[Span]:
    if ctx.digits < 13:
        return []
    out: list[Span] = []
    for m in _CARD_CONTIGUOUS_RE.finditer(work):
        if _stdnum_luhn.is_valid(m.group()):
            out.append((m.start(), m.end(), "CARD"))
    for m in _CARD_GROUPED_RE.finditer(work):
        digits = m.group().replace(" ", "").replace("-", "")
        if 13 <= len(digits) <= 19:
            # card-shaped but failing Luhn: still a long account-like number
            kind = "CARD" if _stdnum_luhn.is_valid(digits) else "NUMBER"
            out.append((m.start(), m.end(), kind))
    return out


def _stage_il_id(work: str, ctx: _Ctx) -> list[Span]:
    if ctx.digits < 8:
        return []
    return [
        (m.start(), m.end(), "IL_ID")
        for m in _IL_ID_RE.finditer(work)
        if _stdnum_il_idnr.is_valid(m.group())
    ]


def _stage_bank_shape(work: str, ctx: _Ctx) -> list[Span]:
    if ctx.digits < 10:
        return []
    return [(m.start(), m.end(), "BANK_ACCOUNT") for m in _BANK_SHAPE_RE.finditer(work)]


def _stage_bank_keyword(work: str, ctx: _Ctx) -> list[Span]:
    if ctx.digits < 5 or not _has_any(ctx.low, _BANK_TRIGGERS):
        return []
    out: list[Span] = []
    for m in _BANK_KEYWORD_RE.finditer(work):
        if not _DATE_LIKE_RE.fullmatch(m.group("v")):
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

    * candidates containing a date, and IPv4 addresses, are never phones;
    * written with "+" in international form: possible, at most 15 digits
      after the "+" (E.164); with the "00" call prefix: valid;
    * starting with the trunk prefix 0 (IL, JP, GB national forms) or "(":
      possible and 9–12 digits (longer runs are several numbers glued
      together by the matcher);
    * NANP shape (``212-555-0123``, ``1-800-555-0199``): possible;
    * otherwise: valid according to the metadata *and* written with exactly
      the digits of its own national format (so "2024-0012", which would be
      an Israeli number only with a missing trunk prefix, is not a phone,
      while "1-800-123-456" is).
    """
    raw = match.raw_string
    s, e = _trim_brackets(raw, 0, len(raw))
    raw = raw[s:e]
    if _DATE_INSIDE_RE.search(raw) or _IPV4_RE.fullmatch(raw):
        return False
    number = match.number
    if not phonenumbers.is_possible_number(number):
        return False
    digits = "".join(_DIGIT_RE.findall(raw))
    first = raw[0]
    if first == "+":  # E.164: at most 15 digits (+1 for a "(0)" trunk prefix)
        return 8 <= len(digits) <= (16 if "(0)" in raw else 15)
    if digits.startswith("00"):  # international call prefix: must be valid
        return 10 <= len(digits) <= 17 and phonenumbers.is_valid_number(number)
    if first == "0" or first == "(":
        return 9 <= len(digits) <= 12
    if _NANP_SHAPE_RE.fullmatch(raw):
        return True
    if not phonenumbers.is_valid_number(number):
        return False
    national = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL)
    return "".join(_DIGIT_RE.findall(national)) == digits


def _phone_spans_in_snippet(snippet: str) -> tuple[tuple[int, int], ...]:
    """Accepted phone spans in a short snippet (merged over PHONE_REGIONS).

    Regions are tried in order; once the accepted spans cover every digit of
    the snippet the remaining regions cannot add anything and are skipped.
    """
    found: set[tuple[int, int]] = set()
    digit_positions = [i for i, ch in enumerate(snippet) if "0" <= ch <= "9"]
    for region in PHONE_REGIONS:
        for match in PhoneNumberMatcher(snippet, region, leniency=Leniency.POSSIBLE):
            if _phone_candidate_ok(match):
                found.add(_trim_brackets(snippet, match.start, match.end))
        if found and all(any(s <= i < e for s, e in found) for i in digit_positions):
            break
    merged: list[list[int]] = []
    for s, e in sorted(found):
        if merged and s < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return tuple((s, e) for s, e in merged)


def _last_space(work: str, lo: int, hi: int) -> int:
    """Index of the last space/tab in work[lo:hi], or -1."""
    return max(work.rfind(" ", lo, hi), work.rfind("\t", lo, hi))


def _context_bounds(work: str, ws: int, we: int) -> tuple[int, int]:
    """Up to _PHONE_CONTEXT characters around a window, stopping before any
    digit (so a neighbouring number never leaks into the snippet)."""
    lo = ws
    while lo > 0 and ws - lo < _PHONE_CONTEXT and not "0" <= work[lo - 1] <= "9":
        lo -= 1
    hi = we
    n = len(work)
    while hi < n and hi - we < _PHONE_CONTEXT and not "0" <= work[hi] <= "9":
        hi += 1
    return lo, hi


def _window_phone_spans(work: str, ws: int, we: int) -> list[tuple[int, int]]:
    """Phone spans inside the window work[ws:we].

    Short windows go to the matcher whole (with a little context). Long
    windows (e.g. space-separated lists of numbers) are scanned in pieces of
    about ``_PHONE_PIECE`` characters cut at whitespace, because the matcher
    is quadratic on long runs of digits and spaces. A number that touches the
    last token of a piece may continue in the next piece, so it is not
    accepted there; the next piece starts at that number's token instead.
    """
    lo_ctx, hi_ctx = _context_bounds(work, ws, we)
    if we - ws <= _PHONE_PIECE:
        lo, hi = lo_ctx, hi_ctx
        return [(lo + s, lo + e) for s, e in _phone_spans_in_snippet(work[lo:hi])]
    out: list[tuple[int, int]] = []
    pos = ws
    while pos < we:
        end = min(we, pos + _PHONE_PIECE)
        if end < we:
            cut = _last_space(work, pos + 1, end)
            if cut > pos:
                end = cut
            else:  # a single very long token: take all of it
                nxt = [i for i in (work.find(" ", end, we), work.find("\t", end, we)) if i != -1]
                end = min(nxt) if nxt else we
        final = end >= we
        lo = lo_ctx if pos == ws else pos
        hi = hi_ctx if final else end
        spans = [(lo + s, lo + e) for s, e in _phone_spans_in_snippet(work[lo:hi])]
        last_tok = _last_space(work, pos, end) + 1
        if final or last_tok <= pos:
            out.extend(spans)
            pos = end
            continue
        next_pos = last_tok
        for s, e in spans:
            if e <= last_tok:
                out.append((s, e))
                continue
            # touches the last token: may continue in the next piece
            tok = _last_space(work, pos, s + 1) + 1
            if tok <= pos:  # the number fills the whole piece: accept it
                out.append((s, e))
                next_pos = max(e, pos + 1)
            else:
                next_pos = tok
            break
        pos = next_pos
    return out


class _Candidate(NamedTuple):
    """The two PhoneNumberMatch attributes that _phone_candidate_ok uses."""

    raw_string: str
    number: phonenumbers.PhoneNumber


def _raw_phone_ok(raw: str) -> bool:
    """Is ``raw`` on its own an acceptable phone number in one of the regions?"""
    for region in PHONE_REGIONS:
        try:
            number = phonenumbers.parse(raw, region)
        except phonenumbers.NumberParseException:
            number = None
        if number is not None and _phone_candidate_ok(_Candidate(raw, number)):
            return True
        if raw.startswith("+"):
            break  # the region does not matter for international numbers
    return False


def _segment_leftovers(
    work: str, ws: int, we: int, spans: list[tuple[int, int]], budget: list[int]
) -> list[tuple[int, int]]:
    """Second chance for digits the matcher left in a window.

    PhoneNumberMatcher cannot split space-separated lists of numbers that
    themselves contain spaces ("(201) 555-0000 07400 120000"). Uncovered runs
    of whitespace-separated tokens are segmented here, longest candidate
    first, each candidate checked with ``phonenumbers.parse`` and the same
    acceptance rules. ``budget`` (candidate checks per pass, shared by all
    windows) bounds the cost on number-heavy garbage, so the result only
    depends on the input.
    """
    out: list[tuple[int, int]] = []
    runs: list[list[tuple[int, int]]] = []
    cur: list[tuple[int, int]] = []
    for m in _TOKEN_RE.finditer(work, ws, we):
        ts, te = m.span()
        if not _HAS_DIGIT_RE.search(work, ts, te) or any(s < te and ts < e for s, e in spans):
            if cur:
                runs.append(cur)
                cur = []
        else:
            cur.append((ts, te))
    if cur:
        runs.append(cur)
    for run in runs:
        if _count_digits(work[run[0][0] : run[-1][1]]) < _PHONE_MIN_DIGITS:
            continue
        i = 0
        while i < len(run):
            # longest valid candidate starting at token i, else longest acceptable one
            best: tuple[int, int, int, int] | None = None  # (level, cs, ce, j)
            for j in range(min(len(run), i + _SEGMENT_MAX_TOKENS) - 1, i - 1, -1):
                cs, ce = _trim_brackets(work, run[i][0], run[j][1])
                n_digits = _count_digits(work[cs:ce])
                if not _PHONE_MIN_DIGITS <= n_digits <= _SEGMENT_MAX_DIGITS:
                    continue
                if budget[0] <= 0:
                    return out
                budget[0] -= 1
                raw = work[cs:ce]
                level = (2 if _raw_phone_valid(raw) else 1) if _raw_phone_ok(raw) else 0
                if level and (best is None or level > best[0]):
                    best = (level, cs, ce, j)
                    if level == 2:
                        break
            if best is None:
                i += 1
            else:
                out.append((best[1], best[2]))
                i = best[3] + 1
    return out


def _phone_good(raw: str) -> bool:
    return _raw_phone_ok(raw) and _raw_phone_valid(raw)


def _drop_glued_token(work: str, s: int, e: int) -> tuple[int, int]:
    """In a space-separated list the matcher may glue a group of the next
    (or previous) number onto a number: "+972 2-123-0000 0121" from
    "… 0121 234 0000", or "0020 050-234-0000" from "056 1234 0020 …".
    If the span is not a valid number but becomes one without its last token
    (when that token starts like a national number, "0…") or without its first
    token, drop that token; the segmentation step then sees it together with
    the rest of its own number."""
    first = _TOKEN_RE.match(work, s, e)
    tail_start = first.end() if first is not None else e
    while tail_start < e and work[tail_start] in " \t":
        tail_start += 1
    if (
        first is not None
        and first.group().startswith("00")
        and len(first.group()) <= 5
        and tail_start < e
        and _phone_good(work[tail_start:e])
    ):
        # "0020 050-234-0000": the end of the previous number read as the
        # "00" international call prefix; the rest is a number of its own
        return tail_start, e
    if _phone_good(work[s:e]):
        return s, e
    cut = _last_space(work, s, e)
    if cut > s and work[cut + 1 : cut + 2] == "0":
        head_end = cut
        while head_end > s and work[head_end - 1] in " \t":
            head_end -= 1
        if head_end > s and _phone_good(work[s:head_end]):
            return s, head_end
    if tail_start < e and _phone_good(work[tail_start:e]):
        return tail_start, e
    return s, e


def _raw_phone_valid(raw: str) -> bool:
    """Is ``raw`` a valid (not merely possible) number in one of the regions?"""
    for region in PHONE_REGIONS:
        try:
            if phonenumbers.is_valid_number(phonenumbers.parse(raw, region)):
                return True
        except phonenumbers.NumberParseException:
            pass
        if raw.startswith("+"):
            break
    return False


def _stage_phone(work: str, ctx: _Ctx) -> list[Span]:
    if ctx.digits < _PHONE_MIN_DIGITS:
        return []
    out: list[Span] = []
    budget = [_SEGMENT_BUDGET]
    for w in _PHONE_WINDOW_RE.finditer(work):
        if w.end() - w.start() < _PHONE_MIN_DIGITS:
            continue
        window = w.group()
        if _count_digits(window) < _PHONE_MIN_DIGITS or _DATE_LIKE_RE.fullmatch(window.strip(" \t")):
            continue
        spans = _window_phone_spans(work, w.start(), w.end())
        spans = [_drop_glued_token(work, s, e) for s, e in spans]
        if " " in window or "\t" in window:
            spans += _segment_leftovers(work, w.start(), w.end(), spans, budget)
        for s, e in spans:
            # a country code right before an accepted number belongs to it
            # ("+972 1-800-120-000" where only "1-800-120-000" was accepted)
            cc = _COUNTRY_CODE_BEFORE_RE.search(work, max(w.start(), s - 12), s)
            out.append((cc.start() if cc else s, e, "PHONE"))
    # overlapping phone spans are merged (never dropped, which would unmask)
    merged: list[Span] = []
    for s, e, k in sorted(out):
        if merged and s < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e), k)
        else:
            merged.append((s, e, k))
    return merged


def _stage_long_number(work: str, ctx: _Ctx) -> list[Span]:
    if ctx.digits < 10:
        return []
    return [(m.start(), m.end(), "NUMBER") for m in _LONG_NUMBER_RE.finditer(work)]


_STAGES: tuple[Callable[[str, _Ctx], list[Span]], ...] = (
    # 1. secrets
    _stage_token_shapes,
    _stage_bearer,
    _stage_password_strong,
    _stage_token_strong,
    _stage_password_weak,
    _stage_token_weak,
    _stage_passport,
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
    """Sorted, non-overlapping spans. Overlapping spans are merged (never
    dropped, which could leave the non-shared part unmasked); the merged span
    keeps the kind of the one that starts first (longest on ties)."""
    merged: list[Span] = []
    for s, e, k in sorted(spans, key=lambda t: (t[0], -t[1], t[2])):
        if e <= s:
            continue
        if merged and s < merged[-1][1]:
            ms, me, mk = merged[-1]
            merged[-1] = (ms, max(me, e), mk)
        else:
            merged.append((s, e, k))
    return merged


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
    """One pass of all stages. ``text`` and the normalised ``work`` copy stay
    the same length outside replaced spans, so spans found in ``work`` apply
    to ``text`` unchanged."""
    original = text
    work = _normalize(text)
    ctx = _Ctx(work)
    for stage in _STAGES:
        spans = stage(work, ctx)
        if not spans:
            continue
        spans = _select(spans)
        original = _apply(original, spans)
        work = _apply(work, spans)
        ctx.digits = _count_digits(work)
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
