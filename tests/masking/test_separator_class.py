"""Digit groups joined by any member of the separator class are masked (SPEC §4.1, issue 22 row 4):
a separator is a run of whitespace (spaces, tabs, no-break and narrow no-break spaces, at most one
line break) and/or one joiner — a dash of category Pd, a full stop or a look-alike (․ ･ ・ ．),
a comma (、 ，), a slash (∕ ⁄ ／). Generated: Faker cards, IBANs and long numbers in twelve
locales, joined by random members of the class inside each language's templates, are masked
and refused as a name; dates, times, versions, money amounts and lists of small numbers one a
line are not. No Django."""

from __future__ import annotations

import re

import pytest
from faker import Faker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryapp.masking import mask, name_kinds
from memoryapp.masking.text import Work
from tests.masking.forms_corpus import _DATE_SHAPE, DIGIT_TEMPLATES, LOCALES

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BLANKS = (" ", "\t", "\u00a0", "\u202f", "\u2009", "\u3000", "  ", " \t")
LINE_BREAKS = ("\n", "\r\n", "\r", "\u2028", " \n", "\n ")
DASHES = ("-", "\u2010", "\u2011", "\u2013", "\u2014", "\u2212", "\u058a", "\u05be", "\u30a0", "\ufe63", "\uff0d")
STOPS = (".", "\u2024", "\uff0e", "\u3002", "\uff65", "\u30fb", "\u00b7")
COMMAS = (",", "\u3001", "\uff0c", "\ufe50")
SLASHES = ("/", "\u2215", "\u2044", "\uff0f")
JOINERS = DASHES + STOPS + COMMAS + SLASHES

_FAKERS = {locale: Faker(locale) for locale in LOCALES}


@st.composite
def separators(draw, *, line_breaks: bool) -> str:
    """One member of the class: blanks, a line break, or a joiner with blanks on either side (a
    comma or a stop with a blank after it needs one before it too: "1, 2" is a list, "2019. 2020"
    two sentences)."""
    pick = draw(st.integers(0, 2 if line_breaks else 1))
    if pick == 0:
        return draw(st.sampled_from(BLANKS))
    if pick == 2:
        return draw(st.sampled_from(LINE_BREAKS))
    joiner = draw(st.sampled_from(JOINERS))
    before = draw(st.sampled_from(("", "", " ", "\t", "\u00a0")))
    after = draw(st.sampled_from(("", "", " ", "\t", "\u00a0")))
    if after and not before and joiner in COMMAS + STOPS:
        before = after
    return before + joiner + after


def _groups(draw, digits: str, *, min_size: int) -> list[str]:
    groups: list[str] = []
    pos = 0
    while pos < len(digits):
        left = len(digits) - pos
        size = draw(st.integers(min(min_size, left), min(max(min_size, 6), left)))
        if 0 < left - size < min_size:
            size = left
        groups.append(digits[pos : pos + size])
        pos += size
    return groups


def _digit_source(draw, fake: Faker) -> str:
    pick = draw(st.integers(0, 3))
    if pick == 0:
        return fake.credit_card_number()
    if pick == 1:
        return re.sub(r"\D", "", fake.iban())  # the digits of an IBAN: a long account number
    if pick == 2:
        return fake.msisdn()[:15]
    return str(draw(st.integers(1, 9))) + "".join(
        draw(st.sampled_from("0123456789")) for _ in range(draw(st.integers(9, 18)))
    )


def _is_excepted(value: str) -> bool:
    """The documented exceptions: a calendar date inside the groups, groups joined by full
    stops only (a decimal number, a version, an IPv4 address are written that way), or four or
    more numbers of at most three digits among blanks, some of one or two (a list of scores:
    ``catalogue._is_small_numbers``, which still masks such a run when it is a card or mobile)."""
    work = Work.of(value).text
    if _DATE_SHAPE.search(work):
        return True
    groups = re.split(r"[ \t]+", work)
    if len(groups) >= 4 and all(g.isdigit() and len(g) <= 3 for g in groups) and min(map(len, groups)) <= 2:
        return True
    seps = set(re.findall(r"[^0-9\s]", work))
    return seps == {"."}


@st.composite
def joined_numbers(draw) -> tuple[str, str, str]:
    """(locale, digits, text): a Faker number in groups joined by random members of the class.
    Over a line break, groups are written as numbers are (four or more digits; a list of small
    numbers one a line is the documented exception)."""
    locale = draw(st.sampled_from(LOCALES))
    fake = _FAKERS[locale]
    fake.seed_instance(draw(st.integers(0, 2**32)))
    digits = _digit_source(draw, fake)
    if not 10 <= len(digits) <= 19 or digits[0] == "0":
        digits = "7" + digits[1:19].ljust(11, "3")
    lines = draw(st.booleans())
    groups = _groups(draw, digits, min_size=4 if lines else 1)
    if len(groups) < 2:
        groups = [digits[:5], digits[5:]]
    seps = [draw(separators(line_breaks=lines)) for _ in groups[1:]]
    value = groups[0] + "".join(sep + group for sep, group in zip(seps, groups[1:], strict=True))
    template = draw(st.sampled_from(DIGIT_TEMPLATES[locale[:2]]))
    return locale, value, template.format(value)


@st.composite
def joined_ibans(draw) -> tuple[str, str, str]:
    """An IBAN written in its groups of four, joined by random members of the class."""
    locale = draw(st.sampled_from(LOCALES))
    fake = _FAKERS[locale]
    fake.seed_instance(draw(st.integers(0, 2**32)))
    iban = fake.iban()
    groups = [iban[i : i + 4] for i in range(0, len(iban), 4)]
    seps = [draw(separators(line_breaks=False)) for _ in groups[1:]]
    value = groups[0] + "".join(sep + group for sep, group in zip(seps, groups[1:], strict=True))
    template = draw(st.sampled_from(DIGIT_TEMPLATES[locale[:2]]))
    return locale, value, template.format(value)


def _digits_left(masked: str) -> str:
    return "".join(ch for ch in masked if ch.isdigit())


@SETTINGS
@given(joined_numbers())
def test_numbers_joined_by_any_member_of_the_class_are_masked_and_refused_as_names(sample):
    locale, value, text = sample
    if _is_excepted(value):
        return
    masked = mask(text).text
    assert len(_digits_left(masked)) < 4, (locale, text, masked)
    assert name_kinds(value), (locale, value)  # a namespace or key holding it is refused


@SETTINGS
@given(joined_ibans())
def test_ibans_joined_by_any_member_of_the_class_are_masked_and_refused_as_names(sample):
    locale, value, text = sample
    if _is_excepted(value):
        return
    masked = mask(text).text
    assert len(_digits_left(masked)) < 4, (locale, text, masked)
    assert name_kinds(value), (locale, value)


def test_the_generators_cover_twelve_locales():
    assert len(LOCALES) == 12 and set(_FAKERS) == set(LOCALES)


# --- what the class must not swallow ------------------------------------------------------------
@SETTINGS
@given(
    st.lists(st.integers(0, 999), min_size=2, max_size=40),
    st.lists(st.sampled_from(LINE_BREAKS), min_size=40, max_size=40),
)
def test_lists_of_small_numbers_one_a_line_are_not_masked(numbers, breaks):
    text = "counts:\n" + "".join(f"{n}{brk}" for n, brk in zip(numbers, breaks, strict=False)).rstrip()
    assert mask(text).text == text


@SETTINGS
@given(st.lists(st.integers(1950, 2049), min_size=3, max_size=12), st.sampled_from(LINE_BREAKS))
def test_years_one_a_line_are_not_masked(years, brk):
    text = "seasons" + brk + brk.join(map(str, years))
    assert mask(text).text == text


@SETTINGS
@given(
    st.dates(),
    st.times(),
    st.sampled_from(("%Y-%m-%d", "%d.%m.%Y", "%d/%m/%Y", "%Y/%m/%d")),
    st.sampled_from(BLANKS + LINE_BREAKS),
)
def test_dates_and_times_are_not_masked(day, moment, form, sep):
    date, minutes, seconds = day.strftime(form), moment.strftime("%H:%M"), moment.strftime("%H:%M:%S")
    text = f"on {date}{sep}{minutes}{sep}{date}{sep}{seconds}"
    if day.year < 1000:
        return
    assert mask(text).text == text


@SETTINGS
@given(
    st.lists(st.integers(0, 99), min_size=2, max_size=4),
    st.sampled_from(("v", "version ", "python ", "release ")),
    st.sampled_from(BLANKS + LINE_BREAKS),
)
def test_versions_are_not_masked(parts, word, sep):
    version = ".".join(map(str, parts))
    text = f"upgraded to {word}{version}{sep}from {word}{version}"
    assert mask(text).text == text


@SETTINGS
@given(
    st.integers(0, 999_999_999),
    st.integers(0, 99),
    st.sampled_from(("${:,}.{:02d}", "€{:,}.{:02d}", "{:,}.{:02d} EUR", "¥{:,}", "£ {:,}.{:02d}")),
    st.sampled_from(BLANKS + LINE_BREAKS),
)
def test_money_amounts_are_not_masked(amount, cents, form, sep):
    written = form.format(amount, cents) if "{:02d}" in form else form.format(amount)
    text = f"paid {written}{sep}then {written}"
    assert mask(text).text == text


@pytest.mark.parametrize(
    "text, kind",
    [
        ("call 555\t1234 today", "PHONE"),  # a phone word, then a local number copied with a tab
        ("tel 090\t1234\t5678 and +44\t20\t7946\t0958", "PHONE"),
        ("wire to GB33 OMUR 0650 4535 5126\t81", "BANK_ACCOUNT"),  # an IBAN, one group after a tab
        ("iban DE89\u20243704\u20240044\u20240532\u20240130\u202400", "BANK_ACCOUNT"),
        ("1950, 1980, 1982 were good years", None),  # years in a list pass Luhn, and are no card
    ],
)
def test_phones_and_ibans_take_the_same_class(text, kind):
    result = mask(text)
    if kind is None:
        assert result.text == text
    else:
        assert kind in result.kinds and len(_digits_left(result.text)) < 4, result.text
