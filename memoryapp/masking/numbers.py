"""Numbers that identify a person or an account (SPEC §4.1).

- ``BANK_ACCOUNT``  IBANs (mod-97 validated by ``stdnum.iban``), written compact or in groups of
                    four joined by a separator of the class (``common.DIGIT_SEP``, on one line); bank/branch/account
                    shapes (``12-345-678901``) and
                    digits after words such as "account", "acct", "a/c", 口座, חשבון.
- ``CARD``          12–19 digit payment card numbers passing Luhn (``stdnum.luhn``), contiguous
                    or in groups joined by separators of the class (``common.DIGIT_SEP``: blanks,
                    a line break, a dash, stop, comma or slash and their look-alikes).
                    Card-*shaped* groups that fail Luhn become ``NUMBER``.
- ``IL_ID``         Israeli ID numbers, 9 digits (``NNNNNNNN-C``, ``NNN NNN NNN``) with a valid
                    check digit (``stdnum.il.idnr``).
- ``NUMBER``        US social security numbers (``NNN-NN-NNNN``, ``NNN NN NNNN``), any run of 10 or more digits,
                    and digit groups of any size joined by separators of the class
                    (``common.DIGIT_SEP``; invisible characters, underscores and middle dots
                    the working copy turned into "-") that add up to 10 or more digits — except
                    dates, IPv4 addresses, version numbers, decimal numbers, ISBNs, amounts of
                    money written with thousands separators, lists written with ", ", and small
                    numbers or years one a line (``_lines_join``). Such groups passing Luhn
                    (12–19 digits) are ``CARD``s.

Digits directly after "+" belong to an international phone number; the card, Israeli ID and
bank-shape patterns leave them to the phone stage.
"""

from __future__ import annotations

import re

from stdnum import iban as _stdnum_iban
from stdnum import isbn as _stdnum_isbn
from stdnum import luhn as _stdnum_luhn
from stdnum.il import idnr as _stdnum_il_idnr

from memoryapp.masking.catalogue import comma_groups_kind
from memoryapp.masking.common import (
    DATE_INSIDE_RE,
    DATE_LIKE_RE,
    DIGIT_SEP,
    DIGIT_SEP_ONE_LINE,
    H_SPACE,
    IPV4_RE,
    Span,
    count_digits,
    has_line_break,
)

# -- IBAN ---------------------------------------------------------------------------------------
# candidate: 2 letters, 2 digits, then groups of 4 (optionally joined by a separator of the class,
# on one line: "DE89 3704 0044", "DE89-3704-0044", "DE89\t3704 ․ 0044"). The
# match starts at the check digits, so the scan can skip to digits; the two country letters are
# checked by lookbehind and added back by the stage.
_IBAN_RE = re.compile(
    r"[0-9](?<=[A-Za-z]{2}[0-9])(?<![A-Za-z0-9][A-Za-z]{2}[0-9])[0-9]"
    r"(?:(?:" + DIGIT_SEP_ONE_LINE + r")?[A-Za-z0-9]{4}){2,8}(?:(?:" + DIGIT_SEP_ONE_LINE + r")?[A-Za-z0-9]{1,3})?"
)
_IBAN_SEP_RE = re.compile(r"[\s\-./,]")


def stage_iban(work: str) -> list[Span]:
    if count_digits(work) < 8:
        return []
    out: list[Span] = []
    for m in _IBAN_RE.finditer(work):
        s, end = m.start() - 2, m.end()
        # The regex is greedy (it may run into following words or numbers); shrink from the
        # right until the IBAN validates: at group boundaries for grouped candidates, character
        # by character for compact ones.
        if _IBAN_SEP_RE.search(work, s, end):
            ends = [end] + [
                i for i in range(end - 1, s + 14, -1) if _IBAN_SEP_RE.match(work, i) and work[i - 1].isalnum()
            ]
        else:
            ends = list(range(end, s + 14, -1))
        for e in ends:
            if _stdnum_iban.is_valid(_IBAN_SEP_RE.sub("", work[s:e])):
                out.append((s, e, "BANK_ACCOUNT"))
                break
    return out


# -- cards --------------------------------------------------------------------------------------
# (on one line: a card written over lines is judged with the other digit groups, _list_cuts)
_SEP = r"(?:" + H_SPACE + r"|[\-./]| {2})"
_CARD_CONTIGUOUS_RE = re.compile(r"[0-9](?<![0-9+][0-9])[0-9]{11,18}(?![0-9])")
_CARD_GROUPED_RE = re.compile(
    r"[0-9](?<![0-9+][0-9])(?<![0-9][ \t\-./][0-9])"
    r"(?:[0-9]{3}(?P<s>" + _SEP + r")[0-9]{4}(?P=s)[0-9]{4}(?:(?P=s)[0-9]{1,4}(?:(?P=s)[0-9]{1,3})?)?"
    r"|[0-9]{3}(?P<t>" + _SEP + r")[0-9]{6}(?P=t)[0-9]{4,5})"
    r"(?![0-9])(?!" + DIGIT_SEP_ONE_LINE + r"[0-9])"
)


def stage_cards(work: str) -> list[Span]:
    if count_digits(work) < 12:
        return []
    # cards in groups of any size come first, so an account word or an ID-shaped piece does not
    # take them ("411111 111111 1111")
    out: list[Span] = [span for span in _digit_group_runs(work) if span[2] == "CARD"]
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
_IL_ID_GROUPED_RE = re.compile(
    r"[0-9](?<![0-9+][0-9])(?<![0-9][ \-.][0-9])[0-9]{2}(?P<s>[ \-])[0-9]{3}(?P=s)[0-9]{3}(?![0-9])(?![ \-.][0-9])"
)


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
_SSN_RE = re.compile(
    r"[0-9](?<![0-9\-][0-9])(?<![0-9][ \t][0-9])[0-9]{2}(?P<s>[ \t\-])[0-9]{2}(?P=s)[0-9]{4}(?![0-9]|[ \t\-][0-9])"
)


def stage_ssn(work: str) -> list[Span]:
    out: list[Span] = []
    for m in _SSN_RE.finditer(work):
        area, group, serial = re.split(r"[ \t\-]", m.group())
        if area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000":
            out.append((m.start(), m.end(), "NUMBER"))
    return out


# -- digit groups adding up to 10 or more digits ------------------------------------------------
# Groups of any size joined by one separator each (``common.DIGIT_SEP``: a run of whitespace with
# at most one line break, and/or one joiner "-" "." "," "/"; the working copy has already turned
# Unicode spaces into " ", joiner look-alikes into their ASCII joiner and dropped invisible
# characters). Possessive and atomic, so the scan is linear.
_GROUPED_RE = re.compile(r"(?<![0-9])\+?\(?[0-9]++\)?(?:" + DIGIT_SEP + r"\(?[0-9]++\)?)++")
# one separator inside a run, and the ones that cut it: a line break, or "," / "." written right
# after a number and followed by a blank (a list "1, 2, 3", a sentence end "in 2019. 2020 …")
_SEP_IN_RUN_RE = re.compile(r"(?<=[0-9)])" + DIGIT_SEP + r"(?=\(?[0-9])")
_LIST_SEP_RE = re.compile(r"[,.]\s+")
_CURRENCY_NEAR_RE = re.compile(r"[ \t]?(?:[€$£¥₪₩₹]|円|万|(?i:eur|usd|jpy|ils|gbp|chf|nis)\b|,[0-9]{2}(?![0-9]))")
_CURRENCY_BEFORE_RE = re.compile(r"(?:[€$£¥₪₩₹]|(?i:eur|usd|jpy|ils|gbp|chf|nis))[ \t]?\Z")
_THOUSANDS_RE = re.compile(r"[0-9]{1,3}(?:([ .,])[0-9]{3})(?:\1[0-9]{3})*(?:[.,][0-9]{1,2})?")
_VERSION_BEFORE_RE = re.compile(
    r"(?i:\b(?:v|ver|version|build|release|rev|revision|python|node|ios|android|windows|macos|kernel|firmware))\.?[ "
    r"\t]*\Z"
)
_GROUP_RE = re.compile(r"[0-9]+")
# digit groups joined by ", " and nothing else ("072, 902, 227, 918")
_COMMA_GROUPS_RE = re.compile(r"[0-9]{1,5}+(?:, [0-9]{1,5}+)++")


def is_ipv4(run: str) -> bool:
    return IPV4_RE.fullmatch(run) is not None and all(int(octet) <= 255 for octet in run.split("."))


def _dotted_is_not_a_number(work: str, s: int, run: str, groups: list[str]) -> bool:
    """Digit groups joined by dots only: a decimal number (one dot), an IPv4 address, or a
    version ("10.0.19045.3693": a short first group and a one-digit group, or a version word
    before it). Phone-like dotted groups (all of 2–4 digits) and longer groups are numbers."""
    if len(groups) == 2:
        return True  # a decimal number; a run of 10 digits on one side is still a long number
    if is_ipv4(run) or _VERSION_BEFORE_RE.search(work, max(0, s - 12), s):
        return True
    if all(2 <= len(g) <= 4 for g in groups):
        return False
    return len(groups[0]) <= 2 and any(len(g) == 1 for g in groups)


def _group_run_kind(work: str, s: int, e: int) -> str | None:
    """CARD / PHONE / NUMBER when the digit groups work[s:e] are personal data, else None."""
    run = work[s:e]
    digits = count_digits(run)
    if digits < 10:
        return None
    groups = _GROUP_RE.findall(run)
    dotted = re.sub(r"\s*\.\s*", ".", run)
    if "." in dotted and re.search(r"[\s\-/,]", dotted) is None:
        if _dotted_is_not_a_number(work, s, run, groups):
            return None
    if _THOUSANDS_RE.fullmatch(run) and (
        _CURRENCY_NEAR_RE.match(work, e) or _CURRENCY_BEFORE_RE.search(work, max(0, s - 5), s)
    ):
        return None  # an amount of money: "1 234 567 890 €", "$1,234,567,890.00"
    compact = "".join(groups)
    if len(compact) in (10, 13) and _stdnum_isbn.is_valid(compact):
        if re.search(r"(?i)isbn[ \t:\-]*\Z", work[max(0, s - 8) : s]) or (
            len(compact) == 13 and compact[:3] in ("978", "979") and "-" in run
        ):
            return None
    if run[0] in "+(" or compact.startswith("0"):
        return "PHONE"
    if 12 <= len(compact) <= 19 and _stdnum_luhn.is_valid(compact):
        return "CARD"  # a card number in groups of any size ("411111 111111 1111")
    return "NUMBER"


def dates_inside(work: str, s: int, e: int) -> list[tuple[int, int]]:
    """Calendar-date shapes inside work[s:e] that are dates: one that its own separator
    continues on either side ("2024-05-01-12345678") is part of a number, not a date."""
    out: list[tuple[int, int]] = []
    for d in DATE_INSIDE_RE.finditer(work, s, e):
        sep = d.group(1) or d.group(2)
        ds, de = d.span()
        if (de + 1 < len(work) and work[de] == sep and work[de + 1].isdigit()) or (
            ds >= 2 and work[ds - 1] == sep and work[ds - 2].isdigit()
        ):
            continue
        out.append((ds, de))
    return out


# A group written right before one of these is a quantity of its own (a year, a date, yen, people).
_UNIT_AFTER = frozenset("年月日時分秒円万億人個件回歳号階番元원년월일시%‰°")


def _last_group_start(work: str, s: int, e: int) -> int:
    while e > s and work[e - 1].isdigit():
        e -= 1
    return e


_CARD_SHAPES = ([4, 4, 4, 4], [4, 4, 4], [4, 6, 5], [4, 4, 4, 4, 3])


def _is_year(group: str) -> bool:
    return len(group) == 4 and group[:2] in ("19", "20")


def _lines_join(run: str, groups: list[str]) -> bool:
    """Digit groups written over several lines are one number when they are written as numbers
    are, in groups of four or more ("4111\n1111\n1111\n1111", "DE89\n3704\n0044"), the first
    group of a phone (after "0", "+" or "(") and the last group shorter; a list of small numbers
    one a line ("3\n4\n5", "10\n20\n30"), or of years, stays."""
    if len(groups) < 2 or all(_is_year(g) for g in groups):
        return False
    first_min = 3 if run[0] in "0+(" else 4
    return len(groups[0]) >= first_min and all(len(g) >= 4 for g in groups[1:-1]) and len(groups[-1]) >= 2


def _list_cuts(work: str, s: int, e: int) -> list[tuple[int, int]]:
    """Where a run is cut into numbers of its own: at ", " (and "," or "." followed by any blank)
    and at line breaks, unless the run is a card number written that way (card groups
    "4111, 1111, 1111, 1111" passing Luhn) or, for line breaks, written in groups as numbers are
    (``_lines_join``). ", " is how lists are written ("1, 2, 3", "10000, 10000", "rooms 101, 102,
    103, 104", "INV-1900-0000, 1000"), and so is one number a line, so a list of numbers stays;
    "," alone joins ("4111,1111,1111,1111"), and so do blanks on one line, or around a joiner."""
    run = work[s:e]
    groups = _GROUP_RE.findall(run)
    # (years one after another are a list even when they pass Luhn; a card across ", " starts as
    # cards do, 2–6, like catalogue.comma_groups_kind: "INV-1900-0580, 1500" is an id and a count)
    joined = "".join(groups)
    if (
        [len(g) for g in groups] in _CARD_SHAPES
        and joined[:1] in tuple("23456")
        and _stdnum_luhn.is_valid(joined)
        and not all(_is_year(g) for g in groups)
    ):
        return []
    lines_join: bool | None = None
    cuts: list[tuple[int, int]] = []
    for m in _SEP_IN_RUN_RE.finditer(work, s, e):
        sep = m.group()
        if _LIST_SEP_RE.fullmatch(sep):
            cuts.append(m.span())
        elif has_line_break(sep):
            if lines_join is None:
                lines_join = _lines_join(run, groups)
            if not lines_join:
                cuts.append(m.span())
    return cuts


# A number the earlier stages masked only part of ("747 [IL_ID] 69 3236": an ID-shaped piece of a
# longer run) takes the digit groups joined to it: the rest of the run is the same number.
_NUMERIC_PLACEHOLDER = r"\[(?:PHONE|IL_ID|CARD|BANK_ACCOUNT|NUMBER)\]"
# (over a line break only between groups of four or more digits, or a placeholder: "[BANK_ACCOUNT]\n59382",
# not a list "[PHONE]\n3\n4")
_LINE_SEP_BETWEEN_GROUPS = r"(?:(?<=[0-9]{4})|(?<=\]))" + DIGIT_SEP + r"(?=[0-9]{4}|\[)"
_JOINED_TO_PLACEHOLDER_RE = re.compile(
    r"(?<![0-9\]])(?:"
    + _NUMERIC_PLACEHOLDER
    + r"|[0-9]++)(?:(?:"
    + DIGIT_SEP_ONE_LINE
    + "|"
    + _LINE_SEP_BETWEEN_GROUPS
    + r")(?:"
    + _NUMERIC_PLACEHOLDER
    + r"|[0-9]++))++"
)
_MIN_JOINED_DIGITS = 4


def _joined_to_placeholders(work: str) -> list[Span]:
    out: list[Span] = []
    for m in _JOINED_TO_PLACEHOLDER_RE.finditer(work):
        run = m.group()
        if "[" in run and count_digits(run) >= _MIN_JOINED_DIGITS and not dates_inside(work, m.start(), m.end()):
            out.append((m.start(), m.end(), "NUMBER"))
    return out


def _digit_group_runs(work: str) -> list[Span]:
    """Every run of digit groups that adds up to 10 digits or more and is personal data, with
    its kind (CARD, PHONE, NUMBER)."""
    out: list[Span] = []
    if count_digits(work) < 10:
        return out
    for m in _GROUPED_RE.finditer(work):
        s, e = m.span()
        if e < len(work) and work[e] in _UNIT_AFTER:
            e = _last_group_start(work, s, e)  # "…, 1900年1月1日": the last group is a year, a price, a count
        while e > s and (work[e - 1] in " -./," or work[e - 1].isspace()):
            e -= 1
        # digit groups joined by ", " that together are a card, a phone or an identifier
        # (catalogue.comma_groups_kind: "072, 902, 227, 918"); otherwise a list
        cs, ce = s + (work[s] == "("), e - (work[e - 1] == ")")
        if _COMMA_GROUPS_RE.fullmatch(work, cs, ce):
            comma_kind = comma_groups_kind(_GROUP_RE.findall(work[cs:ce]))
            if comma_kind is not None:
                out.append((cs, ce, comma_kind))
                continue
        # dates inside a run, and ", " between small numbers, are not part of it; the pieces
        # around them are judged alone
        pieces: list[tuple[int, int]] = []
        pos = s
        for cs, ce in sorted(dates_inside(work, s, e) + _list_cuts(work, s, e)):
            if cs >= pos:
                pieces.append((pos, cs))
                pos = ce
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


def stage_digit_groups(work: str) -> list[Span]:
    out: list[Span] = _joined_to_placeholders(work) if "[" in work else []
    return out + _digit_group_runs(work)


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
