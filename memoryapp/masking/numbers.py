"""Numbers that identify a person or an account (SPEC §4.1).

- ``BANK_ACCOUNT``  IBANs (mod-97 validated by ``stdnum.iban``), written compact, in groups of
                    four, or with dashes; bank/branch/account shapes (``12-345-678901``) and
                    digits after words such as "account", "acct", "a/c", 口座, חשבון.
- ``CARD``          12–19 digit payment card numbers passing Luhn (``stdnum.luhn``), contiguous
                    or in card groups joined by spaces, double spaces, dashes, dots, slashes or
                    underscores. Card-*shaped* groups that fail Luhn become ``NUMBER``.
- ``IL_ID``         Israeli ID numbers, 9 digits (``NNNNNNNN-C``, ``NNN NNN NNN``) with a valid
                    check digit (``stdnum.il.idnr``).
- ``NUMBER``        US social security numbers (``NNN-NN-NNNN``, ``NNN NN NNNN``), any run of 10 or more digits,
                    and digit groups joined by spaces, dashes or dots (or invisible characters,
                    underscores, middle dots, which the working copy turned into "-") that add
                    up to 10 or more digits — except dates, IPv4 addresses, version numbers,
                    ISBNs and amounts of money written with thousands separators.

Digits directly after "+" belong to an international phone number; the card, Israeli ID and
bank-shape patterns leave them to the phone stage.
"""

from __future__ import annotations

import re

from stdnum import iban as _stdnum_iban
from stdnum import isbn as _stdnum_isbn
from stdnum import luhn as _stdnum_luhn
from stdnum.il import idnr as _stdnum_il_idnr

from memoryapp.masking.common import DATE_INSIDE_RE, DATE_LIKE_RE, IPV4_RE, Span, count_digits

# -- IBAN ---------------------------------------------------------------------------------------
# candidate: 2 letters, 2 digits, then groups of 4 (optionally space- or dash-separated). The
# match starts at the check digits, so the scan can skip to digits; the two country letters are
# checked by lookbehind and added back by the stage.
_IBAN_RE = re.compile(
    r"[0-9](?<=[A-Za-z]{2}[0-9])(?<![A-Za-z0-9][A-Za-z]{2}[0-9])[0-9]"
    r"(?:[ \-]?[A-Za-z0-9]{4}){2,8}(?:[ \-]?[A-Za-z0-9]{1,3})?"
)


def stage_iban(work: str) -> list[Span]:
    if count_digits(work) < 8:
        return []
    out: list[Span] = []
    for m in _IBAN_RE.finditer(work):
        s, end = m.start() - 2, m.end()
        # The regex is greedy (it may run into following words or numbers); shrink from the
        # right until the IBAN validates: at group boundaries for grouped candidates, character
        # by character for compact ones.
        if " " in work[s:end] or "-" in work[s:end]:
            ends = [end] + [i for i in range(end - 1, s + 14, -1) if work[i] in " -"]
        else:
            ends = list(range(end, s + 14, -1))
        for e in ends:
            if _stdnum_iban.is_valid(work[s:e]):
                out.append((s, e, "BANK_ACCOUNT"))
                break
    return out


# -- cards --------------------------------------------------------------------------------------
_SEP = r"(?:[ \-./]| {2})"
_CARD_CONTIGUOUS_RE = re.compile(r"[0-9](?<![0-9+][0-9])[0-9]{11,18}(?![0-9])")
_CARD_GROUPED_RE = re.compile(
    r"[0-9](?<![0-9+][0-9])(?<![0-9][ \-./][0-9])"
    r"(?:[0-9]{3}(?P<s>" + _SEP + r")[0-9]{4}(?P=s)[0-9]{4}(?:(?P=s)[0-9]{1,4}(?:(?P=s)[0-9]{1,3})?)?"
    r"|[0-9]{3}(?P<t>" + _SEP + r")[0-9]{6}(?P=t)[0-9]{4,5})"
    r"(?![0-9])(?![ \-./][0-9])"
)


def stage_cards(work: str) -> list[Span]:
    if count_digits(work) < 12:
        return []
    out: list[Span] = []
    for m in _CARD_CONTIGUOUS_RE.finditer(work):
        if _stdnum_luhn.is_valid(m.group()):
            out.append((m.start(), m.end(), "CARD"))
    for m in _CARD_GROUPED_RE.finditer(work):
        digits = re.sub(r"[^0-9]", "", m.group())
        if 12 <= len(digits) <= 19:
            if _stdnum_luhn.is_valid(digits):
                out.append((m.start(), m.end(), "CARD"))
            elif len(digits) >= 13:
                # card-shaped but failing Luhn: still a long account-like number
                out.append((m.start(), m.end(), "NUMBER"))
    return out


# -- Israeli ID ---------------------------------------------------------------------------------
_IL_ID_RE = re.compile(r"[0-9](?<![0-9+][0-9])(?<![0-9][.,][0-9])(?:[0-9]{8}|[0-9]{6,7}-[0-9])(?![0-9])(?![.,][0-9])")
_IL_ID_GROUPED_RE = re.compile(r"[0-9](?<![0-9+][0-9])(?<![0-9][ \-.][0-9])[0-9]{2}(?P<s>[ \-])[0-9]{3}(?P=s)[0-9]{3}(?![0-9])(?![ \-.][0-9])")


def stage_il_id(work: str) -> list[Span]:
    if count_digits(work) < 8:
        return []
    out: list[Span] = []
    for rx in (_IL_ID_RE, _IL_ID_GROUPED_RE):
        for m in rx.finditer(work):
            if _stdnum_il_idnr.is_valid(re.sub(r"[ \-]", "", m.group())):
                out.append((m.start(), m.end(), "IL_ID"))
    return out


# -- bank accounts ------------------------------------------------------------------------------
# bank-branch-account: 2-4 / 3 / 5-9 digits, same separator ("-" or " ").
# (phone numbers end in a group of at most 4 digits, so they do not fit.)
_BANK_SHAPE_RE = re.compile(
    r"[0-9](?<![0-9+][0-9])(?<![0-9][-./ ][0-9])[0-9]{1,3}(?P<s>[- ])[0-9]{3}(?P=s)[0-9]{5,9}"
    r"(?![0-9])(?![-./][0-9])"
)
_BANK_TRIGGERS = ("account", "acct", "a/c", "口座", "חשבון", "konto", "compte", "iban", "bban", "sort code")
_BANK_KEYWORD_RE = re.compile(
    r"(?:(?i:\b(?:bank\s+)?(?:account|acct|a/c|konto|kontonummer|compte|bban|iban)s?(?![A-Za-z]))|(?i:\bsort\s+code\b)"
    r"|口座番号|口座|(?:מס['׳]?\s*)?חשבון(?:\s*(?:ה)?בנק)?)"
    r"(?:[\s:#.,\-]|(?i:\b(?:number|num|no|nr|is|was|id|n°|nº|de|bancaire)\b)|番号|は|普通|当座|預金|貯金|מספר|מס['׳]|שלי|הוא)*?"
    r"(?<![0-9A-Za-z])(?P<v>(?:[A-Za-z]{2,4}[ \-]?)?[0-9](?:[ \-]?[0-9A-Za-z]){4,33})(?![0-9A-Za-z])"
)


def stage_bank_shape(work: str) -> list[Span]:
    if count_digits(work) < 10:
        return []
    return [(m.start(), m.end(), "BANK_ACCOUNT") for m in _BANK_SHAPE_RE.finditer(work)]


def stage_bank_keyword(work: str) -> list[Span]:
    if count_digits(work) < 5:
        return []
    low = work.lower()
    if not any(t in low for t in _BANK_TRIGGERS):
        return []
    out: list[Span] = []
    for m in _BANK_KEYWORD_RE.finditer(work):
        value = m.group("v")
        if count_digits(value) >= 5 and not DATE_LIKE_RE.fullmatch(value):
            out.append((m.start("v"), m.end("v"), "BANK_ACCOUNT"))
    return out


# -- US social security numbers -----------------------------------------------------------------
_SSN_RE = re.compile(r"[0-9](?<![0-9\-][0-9])(?<![0-9] [0-9])[0-9]{2}(?P<s>[ \-])[0-9]{2}(?P=s)[0-9]{4}(?![0-9]|[ \-][0-9])")


def stage_ssn(work: str) -> list[Span]:
    out: list[Span] = []
    for m in _SSN_RE.finditer(work):
        area, group, serial = re.split(r"[ \-]", m.group())
        if area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000":
            out.append((m.start(), m.end(), "NUMBER"))
    return out


# -- digit groups adding up to 10 or more digits ------------------------------------------------
# Groups of 1–5 digits (a sixth digit ends the run: "ISBN 978-3-16-148410-0" is not one run)
# joined by one separator each. Possessive, so the scan is linear.
_GROUPED_RE = re.compile(r"(?<![0-9])\+?\(?[0-9]{1,5}+(?![0-9])\)?(?:(?:[ \-./]| {2}|- | -)\(?[0-9]{1,5}+(?![0-9])\)?)++")
_CURRENCY_NEAR_RE = re.compile(r"[ \t]?(?:[€$£¥₪₩₹]|円|万|(?i:eur|usd|jpy|ils|gbp|chf|nis)\b|,[0-9]{2}(?![0-9]))")
_CURRENCY_BEFORE_RE = re.compile(r"(?:[€$£¥₪₩₹]|(?i:eur|usd|jpy|ils|gbp|chf|nis))[ \t]?\Z")
_THOUSANDS_RE = re.compile(r"[0-9]{1,3}(?:([ .])[0-9]{3})(?:\1[0-9]{3})*")
_VERSION_BEFORE_RE = re.compile(r"(?i:\b(?:v|ver|version|build|release|rev|revision|python|node|ios|android|windows|macos|kernel|firmware))\.?[ \t]*\Z")


def _group_run_kind(work: str, s: int, e: int) -> str | None:
    """NUMBER / PHONE when the digit groups work[s:e] are personal data, else None."""
    run = work[s:e]
    digits = count_digits(run)
    if digits < 10:
        return None
    if "/" in run:
        return None  # fractions and dates; card numbers with slashes are found by the card stage
    if "." in run:
        groups = re.findall(r"[0-9]+", run)
        if IPV4_RE.fullmatch(run) or _VERSION_BEFORE_RE.search(work, max(0, s - 12), s):
            return None
        if "-" not in run and " " not in run and not (len(groups) >= 3 and all(2 <= len(g) <= 4 for g in groups)):
            return None  # version-like ("10.0.19045.3693"): phones with dots use groups of 2–4
    if _THOUSANDS_RE.fullmatch(run) and (_CURRENCY_NEAR_RE.match(work, e) or _CURRENCY_BEFORE_RE.search(work, max(0, s - 5), s)):
        return None  # an amount of money: "1 234 567 890 €"
    compact = re.sub(r"[^0-9]", "", run)
    if len(compact) in (10, 13) and _stdnum_isbn.is_valid(compact):
        if re.search(r"(?i)isbn[ \t:\-]*\Z", work[max(0, s - 8) : s]) or (len(compact) == 13 and compact[:3] in ("978", "979") and "-" in run):
            return None
    return "PHONE" if run[0] in "+(" or compact.startswith("0") else "NUMBER"


def stage_digit_groups(work: str) -> list[Span]:
    if count_digits(work) < 10:
        return []
    out: list[Span] = []
    for m in _GROUPED_RE.finditer(work):
        s, e = m.span()
        while e > s and work[e - 1] in " -./":
            e -= 1
        # dates inside a run are not part of it; the pieces around them are judged alone
        pieces: list[tuple[int, int]] = []
        pos = s
        for d in DATE_INSIDE_RE.finditer(work, s, e):
            pieces.append((pos, d.start()))
            pos = d.end()
        pieces.append((pos, e))
        for ps, pe in pieces:
            while ps < pe and not work[ps].isdigit() and work[ps] not in "+(":
                ps += 1
            while pe > ps and not work[pe - 1].isdigit() and work[pe - 1] != ")":
                pe -= 1
            if pe - ps < 10:
                continue
            if work[ps] == "(" and ")" not in work[ps:pe]:
                ps += 1
            if work[pe - 1] == ")" and "(" not in work[ps:pe]:
                pe -= 1
            kind = _group_run_kind(work, ps, pe)
            if kind is not None:
                out.append((ps, pe, kind))
    return out


_LONG_NUMBER_RE = re.compile(r"[0-9]{10,}")
# an identifier that is mostly digits with a letter or two inside ("102012B03358934")
_MOSTLY_DIGITS_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{10,40}+(?![A-Za-z0-9])")


def stage_long_number(work: str) -> list[Span]:
    if count_digits(work) < 10:
        return []
    out = [(m.start(), m.end(), "NUMBER") for m in _LONG_NUMBER_RE.finditer(work)]
    for m in _MOSTLY_DIGITS_RE.finditer(work):
        token = m.group()
        digits = count_digits(token)
        if digits >= 10 and digits * 10 >= len(token) * 7:
            out.append((m.start(), m.end(), "NUMBER"))
    return out
