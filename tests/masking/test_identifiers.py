"""Identifiers are not personal data (issue 34 row 3): UUID- and ULID-shaped names are accepted
by the check that refuses personal data in names stored as written (`name_kinds`, and conversation
ids and names: `kinds_outside_identifiers`), in any case, alone or inside a key; personal data
next to them is still refused, and no identifier joins digits around it into something that
passes. Generated: hypothesis UUIDs and ULIDs, Faker phones, cards and e-mails in twelve locales.
bench/identifier_keys.py measures the acceptance over 100,000 keys of each shape. No Django."""

from __future__ import annotations

import uuid

import pytest
from faker import Faker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryapp.masking import kinds_outside_identifiers, name_kinds
from memoryapp.masking.identifiers import identifier_spans, pieces_around_identifiers
from tests.masking.forms_corpus import LOCALES

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_FAKERS = {locale: Faker(locale) for locale in LOCALES}


def _spellings(value: uuid.UUID) -> list[str]:
    return [str(value), value.hex, str(value).upper(), value.hex.upper()]


@st.composite
def ulids(draw) -> str:
    first = draw(st.sampled_from("01234567"))
    rest = draw(st.text(alphabet=CROCKFORD, min_size=25, max_size=25))
    ulid = first + rest
    return ulid.lower() if draw(st.booleans()) else ulid


# Hypothesis's uuids() shrinks towards 0: many generated values are mostly zeros and digits, the
# hardest case for a digit-reading check. An all-digit one is refused on purpose (a number before
# an identifier), so the property holds for the ones with a letter, i.e. every real random one.
uuids_with_a_letter = st.uuids().filter(lambda u: any(c.isalpha() for c in u.hex))


@SETTINGS
@given(
    uuids_with_a_letter,
    st.sampled_from(["", "memory:", "user-", "thread_", "ns.", "item/"]),
    st.sampled_from(["", ":v2", "_notes", ".a"]),
)
def test_uuid_keys_of_every_spelling_are_accepted(value, before, after):
    for spelling in _spellings(value):
        assert name_kinds(f"{before}{spelling}{after}") == (), spelling
        assert kinds_outside_identifiers(f"{before}{spelling}{after}") == (), spelling


@SETTINGS
@given(ulids(), st.sampled_from(["", "run-", "job_"]))
def test_ulid_keys_are_accepted_when_they_hold_a_letter(ulid, before):
    if any(c.isalpha() for c in ulid):
        assert name_kinds(before + ulid) == ()


def test_uuid4_keys_sampled_are_all_accepted_and_were_not_before():
    """5,000 random uuid4s in each spelling (the bench samples 100,000): none refused now; read
    whole, as before, several hundred were (about 1 in 5)."""
    from bench.identifier_keys import whole_name_kinds

    values = [uuid.uuid4() for _ in range(1_250)]
    keys = [s for v in values for s in _spellings(v)]
    assert [k for k in keys if name_kinds(k)] == []
    assert sum(1 for k in keys if whole_name_kinds(k)) > 100  # the rule is what changed the answer


@pytest.mark.parametrize("locale", LOCALES)
def test_personal_data_next_to_an_identifier_is_still_refused(locale):
    fake = _FAKERS[locale]
    fake.seed_instance(34)
    for _ in range(10):
        ident = str(uuid.uuid4())
        card = fake.credit_card_number()
        email = fake.email()
        for value, kind in ((card, "CARD"), (email, "EMAIL")):
            for name in (f"{ident}_{value}", f"{value}:{ident}", f"user-{value}-{ident}", value):
                assert kind in name_kinds(name), (locale, name)


@pytest.mark.parametrize(
    "phone",
    ["+81 90-1234-5678", "090-1234-5678", "+1 (415) 555-2671", "+972 54-123-4567", "054-1234567", "+44 20 7946 0958"],
)
def test_phone_numbers_in_keys_with_identifiers_are_still_refused(phone):
    ident = uuid.uuid4().hex
    for name in (phone, f"{ident} {phone}", f"{phone}_{ident}", f"call:{phone}:{ident}"):
        assert name_kinds(name), name


def test_an_all_digit_token_of_identifier_length_is_a_number():
    """32 digits, 8-4-4-4-12 digits, 26 digits: numbers, read as such, refused."""
    for name in (
        "12345678901234567890123456789012",
        "12345678-1234-1234-1234-123456789012",
        "01234567890123456789012345",
    ):
        assert identifier_spans(name) == [] and name_kinds(name), name


@pytest.mark.parametrize(
    "joiner",
    ["\u200b", "\u2060", "\ufeff", "\u00ad", "\u0301", "\u20dd", "１", "٣", "a"],
    ids=[
        "zwsp",
        "word-joiner",
        "bom",
        "soft-hyphen",
        "combining",
        "enclosing-mark",
        "fullwidth-digit",
        "arabic-digit",
        "letter",
    ],
)
def test_an_identifier_glued_to_its_neighbours_is_not_cut_out(joiner):
    """An identifier touching a letter, a digit of any script or an invisible character is not a
    whole token: the detector drops invisible characters, so cutting it out there would split
    what it reads as one run. The name is then read whole, as before (digits on both sides)."""
    ident = "0901234567" + "ab" * 8  # ULID-shaped (26 Crockford characters, first 0-7)
    assert identifier_spans(ident) == [(0, 26)]
    glued = f"x{joiner}{ident}"
    assert identifier_spans(glued) == [] and name_kinds(glued)  # read whole: "0901234567" is a long number
    assert identifier_spans(f"{joiner}{ident}") == []  # glued to the name's first character too


def test_a_glued_identifier_does_not_end_the_search_for_the_next():
    """Each identifier-shaped token is judged on its own: one glued to a letter is read with the
    name, and a whole one after it is still cut out."""
    ident = "0901234567" + "ab" * 8
    uid = "0b3f2c1e-9a7d-4c2e-8f11-2d3e4f5a6b7c"
    name = f"x{ident} {uid}"
    assert identifier_spans(name) == [(len(name) - len(uid), len(name))]


def test_digits_on_both_sides_are_read_alone_not_joined():
    """'090-1234 <uuid> 5678': the pieces around the identifier are judged alone, as if it were
    not there; a full phone number on one side is refused."""
    ident = str(uuid.uuid4())
    assert name_kinds(f"090-1234-5678 {ident}")
    assert name_kinds(f"{ident} 090-1234-5678")


_OUTER = st.text(alphabet="xyé -_.:", max_size=6)  # no digit: cannot make an identifier of its own
_JOIN = st.text(alphabet=" -_.:/|,;=~#", min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(first=_OUTER, middle=_OUTER, last=_OUTER, joins=st.lists(_JOIN, min_size=4, max_size=4))
def test_pieces_lose_only_the_joiners_that_touch_an_identifier(first, middle, last, joins):
    """What joined a piece to an identifier goes with it; the name's own ends stay as written."""
    a, b, c, d = joins
    ulid = "01J9ZQ4X7KTRB3M5N8P2W6Y0HC"
    name = f"{first}{a}8f14e45f-ceea-467f-a8f1-3c1e0b0d9a2b{b}{middle}{c}{ulid.lower()}{d}{last}"
    assert len(identifier_spans(name)) == 2, name
    joiners = " -_.:/\\|,;=~#"
    expected = [(first + a).rstrip(joiners), (b + middle + c).strip(joiners), (d + last).lstrip(joiners)]
    assert pieces_around_identifiers(name) == [p for p in expected if p]
