"""Mobile numbers written without a phone word: in the national grouping of one of the users'
countries (``stage_mobile``), or in any grouping once the workspace names its region
(``region_mobile_stage``). Apart from ``phone`` so that the catalogue's list rules can ask "is
this run a mobile?" without importing the phone stages, which import the number stages, which
import the catalogue."""

from __future__ import annotations

import re
from functools import lru_cache

import phonenumbers

from memoryapp.masking.common import Span, count_digits, is_date

# -- mobiles without a phone word ---------------------------------------------------------------
# A mobile number of one of MOBILE_REGIONS (the countries of the users' locales) written in that
# country's own national grouping ("512 345 678" in Poland, "20 12 34 56" in Denmark): valid and
# of type MOBILE in phonenumbers' metadata, and grouped exactly as phonenumbers formats it. The
# grouping requirement is what keeps everyday numbers out (docs/masking.md "Measured"):
# a run of digits without blanks ("order 512345678") or in another grouping is left to the other
# stages.
MOBILE_REGIONS: tuple[str, ...] = (
    "PL",
    "DK",
    "NO",
    "ES",
    "SE",
    "FI",
    "DE",
    "FR",
    "IT",
    "NL",
    "GB",
    "BR",
    "KR",
    "CN",
    "JP",
    "IL",
    "PT",
    "CZ",
    "AT",
    "BE",
    "CH",
    "GR",
    "HR",
    "RO",
    "TR",
    "EE",
    "LV",
    "UA",
    "CA",
    "US",
)
_MOBILE_CANDIDATE_RE = re.compile(
    r"(?<![0-9+\-./])(?<![0-9],)[0-9]{2,4}+(?:[ \-.][0-9]{2,4}+){1,4}+(?![0-9]|[\-.,/][0-9])"
)
_MOBILE_GROUP_RE = re.compile(r"[0-9]+")


def _national_groups(number: phonenumbers.PhoneNumber) -> list[int]:
    national = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL)
    return [len(g) for g in _MOBILE_GROUP_RE.findall(national)]


@lru_cache(maxsize=1024)  # mask() reads its own output once more: the same candidates come back
def is_mobile(run: str) -> bool:
    groups = _MOBILE_GROUP_RE.findall(run)
    digits = "".join(groups)
    if not 8 <= len(digits) <= 11:
        return False
    shape = [len(g) for g in groups]
    # what lists of numbers look like: only pairs ("scores 41 65 42 82": the Danish and Norwegian
    # grouping, so their mobiles need a phone word), or numbers of three digits in ascending
    # order ("pages 325 854 855")
    if all(n == 2 for n in shape):
        return False
    values = [int(g) for g in groups]
    if len(groups) >= 3 and all(n == 3 for n in shape) and all(a < b for a, b in zip(values, values[1:])):
        return False
    for region in MOBILE_REGIONS:
        try:
            number = phonenumbers.parse(digits, region)
        except phonenumbers.NumberParseException:
            continue
        if (
            phonenumbers.is_valid_number_for_region(number, region)
            and phonenumbers.number_type(number) == phonenumbers.PhoneNumberType.MOBILE
            and _national_groups(number) == shape
        ):
            return True
    return False


def stage_mobile(work: str) -> list[Span]:
    if count_digits(work) < 8:
        return []
    return [
        (m.start(), m.end(), "PHONE")
        for m in _MOBILE_CANDIDATE_RE.finditer(work)
        if 8 <= count_digits(m.group()) <= 11 and not is_date(m.group()) and is_mobile(m.group())
    ]


# -- mobiles of the workspace's region ----------------------------------------------------------
# A workspace may name its region (AskHistorySettings.phone_region, ISO 3166 alpha-2). Its members
# write their own country's mobiles in the groupings they are used to ("34 45 53 66" in Denmark,
# "512 863 990" in Poland), which stage_mobile leaves alone because, read without a country, pairs
# and ascending triples are how lists of numbers are written. Knowing the country settles most of
# it: digit groups (at least one separator, as in stage_mobile: a bare run of digits is an order id
# or a count) that phonenumbers says are a valid MOBILE (or FIXED_LINE_OR_MOBILE, where the plan
# does not tell them apart) number of that region are a phone, in any grouping, except what the
# everyday corpus showed to be something else (bench/masking_corpus.py, everyday sentences with
# each corpus locale's region):
#
# * a list shape (only pairs, or three or more ascending groups of three digits, among blanks)
#   unless it is the region's own national grouping: pairs are a Danish or Norwegian mobile, but in Finland or
#   Latvia "41 65 42 82" is a list of scores that merely has a mobile's digits;
# * right after a word that announces a list ("scores were 41 65 42 82", "pages 512 613 714");
# * a range of two years ("2023–2021": a valid Danish mobile); dotted groups after a version word
#   ("build 16.21.155.9093": valid in China and Germany); several kinds of separator in one run;
#   groups glued to letters ("Order 2024-0012-A": a code, valid in Denmark and Latvia).
_REGION_TYPES = (phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE_OR_MOBILE)
_SEPARATOR_RE = re.compile(r"[^0-9]")
_LIST_WORD_BEFORE_RE = re.compile(
    r"(?i:(?<![A-Za-z])(?:scores?|points|punkte|puntos|punti|punkty|punten|poäng|pisteet|"
    r"results|ergebnisse|résultats|resultados|risultati|wyniki|pages|pp\.?|seiten|páginas|pagine|strony|"
    r"rooms|zimmer|chambres|seats|sitze|places|chapters|kapitel|items|lines|tracks|exercises|aufgaben|"
    r"questions|fragen))"
    r"(?:[ \t]+(?:were|are|was|is|sind|waren|sont|étaient|son|sono|są|zijn|var|er|är))?[ \t:=]*\Z"
    r"|(?:得点|点数|スコア|ページ|頁|쪽|页|部屋|座席|점수|分数)[ \t:：は는]*\Z"
)
_VERSION_WORD_BEFORE_RE = re.compile(
    r"(?i:(?<![A-Za-z])"
    r"(?:v|ver|version|build|release|rev|python|node|ios|android|windows|macos|kernel|firmware|update))\.?[ \t]*\Z"
)
_YEAR_RE = re.compile(r"(?:19|20)[0-9]{2}")
_GLUED_BEFORE_RE = re.compile(r"[^\W\d_][\-/_#]\Z")
_GLUED_AFTER_RE = re.compile(r"[\-/_#][^\W\d_]")


def announced_list(work: str, start: int) -> bool:
    """Does a word that announces a list of numbers end right before `start` ("scores were ")?"""
    return _LIST_WORD_BEFORE_RE.search(work, max(0, start - 24), start) is not None


def check_region(region: str) -> str:
    """`region` if phonenumbers knows it (ISO 3166 alpha-2, upper case), else ValueError."""
    if not isinstance(region, str) or region not in phonenumbers.SUPPORTED_REGIONS:
        raise ValueError(f"not a region phonenumbers supports: {region!r}")
    return region


@lru_cache(maxsize=4096)  # mask() reads its own output once more: the same candidates come back
def is_region_mobile(run: str, region: str) -> bool:
    """Are the digit groups of `run` a valid mobile number of `region` (national form, no "+"),
    in a grouping that is not a list's unless it is the region's own?"""
    groups = _MOBILE_GROUP_RE.findall(run)
    digits = "".join(groups)
    if not 8 <= len(digits) <= 11 or len(set(_SEPARATOR_RE.findall(run))) > 1:
        return False
    if all(_YEAR_RE.fullmatch(g) for g in groups):
        return False  # a range of years
    try:
        number = phonenumbers.parse(digits, region)
    except phonenumbers.NumberParseException:
        return False
    if (
        not phonenumbers.is_valid_number_for_region(number, region)
        or phonenumbers.number_type(number) not in _REGION_TYPES
    ):
        return False
    shape = [len(g) for g in groups]
    values = [int(g) for g in groups]
    blanks = " " in run  # lists are written with blanks; "612-679-790" is no list
    list_shape = blanks and (
        all(n == 2 for n in shape)
        or (len(groups) >= 3 and all(n == 3 for n in shape) and all(a < b for a, b in zip(values, values[1:])))
    )
    return not list_shape or _national_groups(number) == shape


@lru_cache(maxsize=256)
def region_mobile_stage(region: str):
    """The stage that masks `region`'s mobiles without a phone word (one function per region)."""
    check_region(region)

    def stage_region_mobile(work: str) -> list[Span]:
        if count_digits(work) < 8:
            return []
        out: list[Span] = []
        for m in _MOBILE_CANDIDATE_RE.finditer(work):
            run = m.group()
            if not 8 <= count_digits(run) <= 11 or is_date(run) or not is_region_mobile(run, region):
                continue
            before = work[max(0, m.start() - 24) : m.start()]
            if _GLUED_BEFORE_RE.search(before) or _GLUED_AFTER_RE.match(work, m.end()):
                continue  # part of a code with letters ("Order 2024-0012-A", "INV-2024-0012")
            if announced_list(work, m.start()) or ("." in run and _VERSION_WORD_BEFORE_RE.search(before)):
                continue
            out.append((m.start(), m.end(), "PHONE"))
        return out

    stage_region_mobile.region = region
    return stage_region_mobile
