"""National identifiers by python-stdnum's maintained catalogue, and the numbers that are not
personal data (SPEC §4.1).

- ``stage_national_id`` (``NUMBER``): a token of letters and digits, or digit groups joined by
  one "-", ".", "/" or blank, that one of ``NATIONAL_ID_MODULES`` validates (format, embedded
  date, check digit: an ordinary number passes one of them only by the chance of its checksum),
  and the UK National Insurance number, for which python-stdnum 2.2 has no module (its shape:
  two letters, six digits, a letter). Candidates are found by one cheap regex and only those with
  the length a module accepts are validated.
- ``stage_ssn_label`` (``NUMBER``): NNN-NN-NNNN right after an SSN label, whatever the range
  (the SSN stage itself leaves 9xx, 000 and 666 alone: they are never issued, so unlabelled they
  are as likely an ordinary code).
- ``comma_groups_kind``: digit groups joined by ", " (10 digits or more) are a list ("rooms 101, 102, 103") unless
  the digits together are a card (Luhn, issuer digit 2–6), a phone number of one of the regions,
  or an identifier of the catalogue, or a group is written with a leading zero ("072, 902").
- ``protected_spans``: what masking leaves alone even when a detector reads it as a number: an
  arithmetic run of short numbers (rooms, seats: "101 102 103 104"), an ascending run of four or
  more numbers of at most three digits (pages), a Unix timestamp (10 digits, or 13 in
  milliseconds, from 2001 to 2036) after a time word, and an order id of fewer than ten digits
  after an order word.

Every regex here is possessive or has bounded repetition, so the scan is linear in the text.
"""

from __future__ import annotations

import importlib
import re
from functools import cache, lru_cache

import phonenumbers

from memoryapp.masking.common import Span, count_digits
from memoryapp.masking.mobiles import announced_list, is_mobile, is_region_mobile

#: python-stdnum modules of the personal identifiers of the product's users' countries (the
#: ≥ 20 Faker locales of tests/masking/catalogue_corpus.py). Tax ids of companies (VAT, SIREN…)
#: are not personal data and are not masked. The Israeli ID has its own stage (IL_ID).
NATIONAL_ID_MODULES: tuple[str, ...] = (
    "at.vnr",
    "be.nn",
    "bg.egn",
    "br.cpf",
    "ca.sin",
    "ch.ssn",
    "cn.ric",
    "cz.rc",
    "de.idnr",
    "dk.cpr",
    "ee.ik",
    "es.dni",
    "es.nie",
    "fi.hetu",
    "fr.nir",
    "gr.amka",
    "hr.oib",
    "in_.aadhaar",
    "it.codicefiscale",
    "jp.in_",
    "kr.rrn",
    "lt.asmens",
    "lv.pvn",
    "nl.bsn",
    "no.fodselsnummer",
    "pl.pesel",
    "pt.cc",
    "ro.cnp",
    "se.personnummer",
    "si.emso",
    "sk.rc",
    "tr.tckimlik",
    "ua.rntrc",
)
_MIN_LEN, _MAX_LEN = 8, 20
_WITH_CHECK_DIGIT_ONLY = frozenset({"stdnum.cz.rc", "stdnum.sk.rc"})
_SEPARATORS_RE = re.compile(r"[-./ ]")


@cache
def _modules() -> tuple:
    return tuple(importlib.import_module("stdnum." + name) for name in NATIONAL_ID_MODULES)


@cache
def _modules_for(length: int, digits_only: bool) -> tuple:
    """The modules that accept a compact value of this length (probed once per length with
    their own ``compact``/``validate``: the ones whose error is not InvalidLength)."""
    from stdnum.exceptions import InvalidLength

    probe = "1" * length if digits_only else "A1" + "1" * (length - 2)
    return tuple(module for module in _modules() if not isinstance(_probe_error(module, probe), InvalidLength))


def _probe_error(module, probe: str) -> Exception | None:
    """What the module's validate raises on the probe (any other error than a wrong length keeps
    the module: validate decides on real values)."""
    try:
        module.validate(probe)
    except Exception as error:  # noqa: BLE001 - a module's odd error on a probe is an answer too
        return error
    return None


# The shapes the catalogue's identifiers take once separators are removed: digits; digits and a
# check letter (DNI, HETU with "A" as its century sign); X/Y/Z, seven digits and a letter (NIE);
# the codice fiscale; the Portuguese citizen card. Only candidates of these shapes are validated.
_SHAPE_RE = re.compile(
    r"[0-9]{8,20}|[0-9]{6,9}[A-Z]|[0-9]{6}[A-Y][0-9]{3}[0-9A-Y]|[XYZ][0-9]{7}[A-Z]"
    r"|[A-Z]{6}[0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{3}[A-Z]|[0-9]{9}[A-Z]{2}[0-9]"
)


@lru_cache(maxsize=4096)  # mask() reads its own output once more: the same candidates come back
def is_national_id(compact: str, written: str | None = None, *, whole: bool = False) -> bool:
    """Does one of the catalogue's modules validate this value (``compact``: separators
    removed; ``written``: as written, for the identifiers whose separator is part of them, such
    as the Finnish HETU's century sign)? ``whole``: digits of any length that another rule has
    already read as one number (digit groups joined by ", ")."""
    if not _MIN_LEN <= len(compact) <= _MAX_LEN or not _SHAPE_RE.fullmatch(compact):
        return False
    if compact.isdigit() and len(compact) != 9 and not whole:
        # nine digits (BSN, SIN): ten or more are the digit-group stage's, which knows ISBNs,
        # amounts, coordinates; eight are the padded form of an old BSN, as often a date or a code
        return False
    for module in _modules_for(len(compact), compact.isdigit()):
        if module.__name__ in _WITH_CHECK_DIGIT_ONLY and len(compact) != 10:
            continue  # the nine-digit rodné číslo (births before 1954) has no check digit: any date reads as one
        try:
            if module.is_valid(compact) or (written is not None and module.is_valid(written)):
                return True
        except Exception:  # noqa: BLE001, S112 - a validator that raises on odd input has not validated it
            continue
    return False


# A group holds a digit (up to six letters before it, letters and digits after); a run is up to
# eight groups joined by one separator, optionally ending in a single check letter ("… 19 T").
_GROUP = r"[A-Za-z]{0,6}+[0-9][A-Za-z0-9]{0,17}+"
_CANDIDATE_RE = re.compile(
    r"(?<![A-Za-z0-9\[])" + _GROUP + r"(?:[-./ ]" + _GROUP + r"){0,7}+(?:[- ][A-Z](?![A-Za-z0-9]))?(?![A-Za-z0-9\]])"
)
_GROUP_SPLIT_RE = re.compile(r"[-./ ]")
_MAX_WINDOW = 6
# UK National Insurance number (HMRC's shape; python-stdnum has no module): two letters, six
# digits (in pairs or not), a suffix letter. In capitals any letters; in lower or mixed case after a
# NI label, or written as one token that HMRC could issue (`jg103759a`, `_nino_issuable`): spaced,
# a two-letter word, three small numbers and a letter are prose ("meet on 28 25 50 a bit later").
_NINO_RE = re.compile(
    r"(?<![A-Za-z0-9])[A-Za-z]{2}[ \-]{0,2}[0-9]{2}[ \-]?[0-9]{2}[ \-]?[0-9]{2}[ \-]{0,2}[A-Za-z](?![A-Za-z0-9])"
)
_NINO_NOT_ISSUED = {"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"}
# "NI number is", "NINO:", "N.I. no.", "national insurance number" before it (across a line break,
# a quote or a bracket): then any letters, any case
_NINO_LABEL_RE = re.compile(
    r"(?i:(?<![A-Za-z])(?:nino|n\.?i\.?|national[ \t]+insurance)(?:[ \t]+(?:number|num|no\.?)|[ \t]*#)?)"
    r"\s*(?:[:=#-]|(?i:is|was))?\s*[\"'\u201c(\[]?\Z"
)


def _nino_issuable(value: str) -> bool:
    """HMRC's allocation rules: no D, F, I, Q, U or V in the prefix (nor O second), none of the
    prefixes never issued, a suffix A-D."""
    letters = [ch.upper() for ch in value if ch.isalpha()]
    first, second, suffix = letters[0], letters[1], letters[-1]
    return (
        first not in "DFIQUV"
        and second not in "DFIQUVO"
        and first + second not in _NINO_NOT_ISSUED
        and suffix in "ABCD"
    )


_DATE_RE = re.compile(
    r"(?<![0-9])(?:[0-9]{4}[-./][0-9]{1,2}[-./][0-9]{1,2}|[0-9]{1,2}[-./][0-9]{1,2}[-./][0-9]{2,4})(?![0-9])"
)
_YEARS_RE = re.compile(r"(?:19|20)[0-9]{2}[-/ ](?:19|20)[0-9]{2}")
_VERSION_BEFORE_RE = re.compile(
    r"(?i:(?<![A-Za-z])(?:v|ver|version|build|release|rev|python|node|ios|android|windows|macos|kernel|firmware))\.?[ "
    r"\t]*\Z"
)


def _not_an_id(work: str, s: int, e: int) -> bool:
    """A date, two years ("1986-1996"), a version ("build 26.1.89.8761", "1.2.3.4") or a list
    of rooms or pages (``is_progression``, ``_is_ascending_short``) among pure digit groups."""
    window = work[s:e]
    if not _SEPARATORS_RE.search(window) or not _SEPARATORS_RE.sub("", window).isdigit():
        return False
    groups = _GROUP_SPLIT_RE.split(window)
    if " " in window and min(map(len, groups)) < 3:
        return True  # numbers of one or two digits among blanks are a list ("scores 11 120 32 26")
    if _DATE_RE.search(window) or _YEARS_RE.fullmatch(window) or is_progression(groups) or _is_ascending_short(groups):
        return True
    if "." in window and (_VERSION_BEFORE_RE.search(work, max(0, s - 12), s) or len(groups[0]) <= 2):
        return True
    return False


def _windows(work: str, s: int, e: int) -> list[tuple[int, int]]:
    """Sub-runs of up to ``_MAX_WINDOW`` groups of the candidate work[s:e] that validate, the
    longest first at each start, not overlapping."""
    bounds: list[tuple[int, int]] = []
    pos = s
    for sep in _GROUP_SPLIT_RE.finditer(work, s, e):
        bounds.append((pos, sep.start()))
        pos = sep.end()
    bounds.append((pos, e))
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(bounds):
        found = None
        for j in range(min(len(bounds), i + _MAX_WINDOW) - 1, i - 1, -1):
            ws, we = bounds[i][0], bounds[j][1]
            compact = _SEPARATORS_RE.sub("", work[ws:we])
            if compact.isdigit() and ((i > 0 and work[ws - 1] != " ") or (j < len(bounds) - 1 and work[we] != " ")):
                continue  # digits are cut out of a longer number only at a blank ("978-3-16-148410-0")
            if len(compact) > _MAX_LEN:
                continue
            if len(compact) < _MIN_LEN:
                break
            if (
                count_digits(compact) >= 6
                and not _not_an_id(work, ws, we)
                and is_national_id(compact.upper(), work[ws:we].upper())
            ):
                found = (ws, we, j)
                break
        if found is None:
            i += 1
        else:
            out.append(found[:2])
            i = found[2] + 1
    return out


def stage_national_id(work: str) -> list[Span]:
    if count_digits(work) < 6:
        return []
    out: list[Span] = [
        (m.start(), m.end(), "NUMBER")
        for m in _NINO_RE.finditer(work)
        if m.group().isupper()
        or (m.group().isalnum() and _nino_issuable(m.group()))
        or _NINO_LABEL_RE.search(work, max(0, m.start() - 40), m.start())
    ]
    for m in _CANDIDATE_RE.finditer(work):
        if count_digits(m.group()) >= 6:
            out.extend((s, e, "NUMBER") for s, e in _windows(work, m.start(), m.end()))
    return out


# -- SSNs after a label -----------------------------------------------------------------------
_SSN_LABEL_RE = re.compile(
    r"(?i:(?<![A-Za-z])(?:ssn|ss#|social[ \t]+security(?:[ \t]+(?:number|num|no\.?|#))?|soc\.?[ \t]*sec\.?(?:[ "
    r"\t]*(?:no\.?|#))?))[\"']?[ \t]{0,3}(?:[:=#]|(?i:is|was|number|no\.?)[ \t])?[ \t]{0,3}(?:(?i:is)[ "
    r"\t]{1,3})?[\"'“]?(?P<v>[0-9]{3}(?P<s>[ \-]?)[0-9]{2}(?P=s)[0-9]{4})(?![0-9])"
)


def stage_ssn_label(work: str) -> list[Span]:
    low = work.lower()
    if "ss" not in low and "soc" not in low:
        return []
    return [(m.start("v"), m.end("v"), "NUMBER") for m in _SSN_LABEL_RE.finditer(work)]


# -- digit groups joined by ", " ----------------------------------------------------------------
#: regions whose phone numbers are read in digit groups joined by ", " (the countries of the
#: users' locales; numbers with a trunk "0" or "+" are phones in any case)
COMMA_PHONE_REGIONS = (
    "US",
    "GB",
    "IL",
    "JP",
    "DE",
    "FR",
    "ES",
    "IT",
    "NL",
    "PL",
    "DK",
    "SE",
    "NO",
    "FI",
    "BR",
    "KR",
    "CN",
)


@lru_cache(maxsize=1024)
def _is_phone_digits(digits: str) -> bool:
    """A valid number of one of the regions, read whole (9 to 12 digits: the national number,
    with the trunk "0" where the region has one)."""
    if not 9 <= len(digits) <= 12:
        return False
    for region in COMMA_PHONE_REGIONS:
        try:
            number = phonenumbers.parse(digits, region)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number_for_region(number, region) and str(number.national_number) in (
            digits,
            digits[1:],
        ):
            return True
    return False


def is_progression(groups: list[str]) -> bool:
    """Numbers one step apart ("101 102 103", "10, 20, 30", "613 623 633"): a list."""
    if len(groups) < 3 or any(len(g) > 4 or (len(g) > 1 and g[0] == "0") for g in groups):
        return False
    values = [int(g) for g in groups]
    step = values[1] - values[0]
    # the steps lists are counted in (1, 2, 10, 100…), not any constant ("12 34 56 78 90")
    return (0 < abs(step) <= 10 or abs(step) in (20, 25, 50, 100, 1000)) and all(
        b - a == step for a, b in zip(values, values[1:])
    )


def _is_ascending_short(groups: list[str]) -> bool:
    """Four or more numbers of at most three digits, each larger than the one before (pages)."""
    if len(groups) < 4 or any(len(g) > 3 or (len(g) > 1 and g[0] == "0") for g in groups):
        return False
    if all(len(g) == 2 for g in groups):
        return False  # pairs are how phone numbers are grouped in France, Denmark, Norway
    values = [int(g) for g in groups]
    return all(b > a for a, b in zip(values, values[1:]))


def comma_groups_kind(groups: list[str]) -> str | None:
    """Digit groups that were joined by ", ": the kind when together they are personal data."""
    digits = "".join(groups)
    if (
        len(digits) < 10
        or is_progression(groups)
        or _is_ascending_short(groups)
        or all(len(g) == 4 and g[:2] in ("19", "20") for g in groups)
    ):
        return None
    if all(g[0] != "0" and g[-1] == "0" and len(g.rstrip("0")) <= 2 for g in groups):
        return None  # round amounts one after another ("100, 100, 1000", "250, 1500, 20000"): a list
    if 12 <= len(digits) <= 19 and digits[0] in "23456" and _stdnum_luhn_valid(digits):
        return "CARD"
    if any(len(g) > 1 and g[0] == "0" for g in groups) or _is_phone_digits(digits):
        return "PHONE" if digits[0] == "0" else "NUMBER"
    if is_national_id(digits, whole=True):
        return "NUMBER"
    return None


def _stdnum_luhn_valid(digits: str) -> bool:
    from stdnum import luhn

    return luhn.is_valid(digits)


# -- what is left alone -------------------------------------------------------------------------
_NUMBER_LIST_RE = re.compile(
    r"(?<![0-9.,\-/])[0-9]{1,4}+(?:(?:, |,|[ /]| and | - )[0-9]{1,4}+){2,40}+(?![0-9]|[.,][0-9])"
)
_LIST_SPLIT_RE = re.compile(r"[^0-9]+")
_TIME_WORDS = (
    "timestamp|time[ _]?stamp|ts|epoch|unix(?:[ _]time)?|time|mtime|ctime|atime|"
    "created(?:_at|At)?|updated(?:_at|At)?|modified(?:_at|At)?|last_modified|lastModified|"
    "date|datetime|iat|exp|nbf|expires(?:_at|At)?|since|until|"
    "(?:created|updated|modified|logged|seen|sent|received|started|ended|expired|deleted|happened|occurred|posted)"
    "[ _]at|seen|logged"
)
_TIMESTAMP_RE = re.compile(
    r"(?i:(?<![A-Za-z])(?:"
    + _TIME_WORDS
    + r"))[\"']?[ \t]{0,3}[:=]?[ \t]{0,3}[\"']?(?P<v>[12][0-9]{9}(?:[0-9]{3})?)(?![0-9])"
)
_TS_MIN, _TS_MAX = 978_307_200, 2_114_380_800  # 2001-01-01 .. 2037-01-01
_ORDER_WORDS = (
    "order|orders|order no\\.?|order number|order id|invoice|invoice no\\.?|booking|booking "
    "ref|reservation|ticket|tracking(?: number)?|ref|reference|confirmation(?: "
    "number)?|bestellung|bestellnummer|rechnung|rechnungsnummer|auftrag|commande|commande "
    "n°|facture|pedido|factura|ordine|fattura|zamówienie|zamowienie|faktura|bestelling|factuur"
)
_ORDER_RE = re.compile(
    r"(?i:(?<![A-Za-z])(?:"
    + _ORDER_WORDS
    + r"))[ \t]{0,3}(?:[:#=]|no\.?|n°|nr\.?)?[ \t]{0,3}#?(?P<v>[0-9]{1,9}+)(?![0-9])"
    r"|(?:注文番号|注文|주문번호|订单号|订单)[ \t:：は]{0,3}(?P<w>[0-9]{1,9}+)(?![0-9])"
)


# "pages 519 617 832": three numbers in order after a word that announces a list of them
_LIST_NOUN_RE = re.compile(
    r"(?i:(?<![A-Za-z])(?:pages|pp\.?|p\.|seiten|s\.|pages|páginas|pagine|strony|pagina's|"
    r"rooms|zimmer|chambres|seats|sitze|places|chapters|kapitel|chapitres|items|lines|zeilen|slides|folien|"
    r"tracks|exercises|aufgaben|questions|fragen))[ \t:]*\Z"
    r"|(?:ページ|頁|쪽|页|부屋|部屋|座席|問)[ \t:：]*\Z"
)


def _is_ascending_three(groups: list[str]) -> bool:
    if any(len(g) > 3 or (len(g) > 1 and g[0] == "0") for g in groups):
        return False
    values = [int(g) for g in groups]
    return all(a < b for a, b in zip(values, values[1:]))


_BLANK_JOINED_RE = re.compile(r"[0-9]++(?: [0-9]++)++")


def _is_small_numbers(work: str, start: int, run: str, groups: list[str], region: str | None = None) -> bool:
    """Four or more numbers of at most three digits among blanks (`run`, at `start` of `work`),
    some of one or two digits, that are together no card, mobile (of the users' countries, or of
    the workspace's `region` unless a word before announces a list: "scores were 106 64 103 47"
    has a Korean mobile's digits) or identifier ("scores were 115 114 38 40")."""
    if (
        len(groups) < 4
        or not _BLANK_JOINED_RE.fullmatch(run)
        or any(len(g) > 3 or (len(g) > 1 and g[0] == "0") for g in groups)
    ):
        return False
    if min(map(len, groups)) > 2 or len({len(g) for g in groups}) == 1:
        return False
    digits = "".join(groups)
    if 12 <= len(digits) <= 19 and _stdnum_luhn_valid(digits):
        return False
    # phone imports numbers, which imports this module: phone is read when the rule runs

    region_mobile = region is not None and not announced_list(work, start) and is_region_mobile(run, region)
    return not is_mobile(run) and not region_mobile and not is_national_id(digits, whole=True)


def protected_spans(work: str, region: str | None = None) -> list[tuple[int, int]]:
    """Spans of the text that are numbers but no personal data; a detector's span inside one is
    dropped (``__init__._mask_once``). `region`: the workspace's (``phone.region_mobile_stage``)."""
    if count_digits(work) < 6:
        return []
    out: list[tuple[int, int]] = []
    for m in _NUMBER_LIST_RE.finditer(work):
        groups = _LIST_SPLIT_RE.split(m.group())
        if (
            is_progression(groups)
            or _is_ascending_short(groups)
            or _is_small_numbers(work, m.start(), m.group(), groups, region)
        ):
            out.append(m.span())
        elif (
            len(groups) == 3
            and _is_ascending_three(groups)
            and _LIST_NOUN_RE.search(work, max(0, m.start() - 16), m.start())
        ):
            out.append(m.span())
    for m in _TIMESTAMP_RE.finditer(work):
        value = int(m.group("v"))
        if _TS_MIN <= (value if len(m.group("v")) == 10 else value // 1000) < _TS_MAX:
            out.append(m.span("v"))
    for m in _ORDER_RE.finditer(work):
        out.append(m.span("v") if m.group("v") is not None else m.span("w"))
    return out
