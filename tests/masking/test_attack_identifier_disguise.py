"""Attack on memoryapp/masking/identifiers.py (merged in 5077f25): personal data dressed as a
UUID/ULID passes the name check that refused it before (bcf1d29). An agent writes a key whose
identifier-shaped token *starts* with a real card number or a national phone number and pads it
with hex/Crockford letters; the token is cut out before the detector reads the name.

Generated: Faker card numbers (Luhn-valid, 16 digits) and Faker phone numbers of locales whose
national format starts with 0 (a valid ULID first character). Both were refused at bcf1d29.
Marked xfail(strict) until identifiers refuse a token whose leading digit run is itself personal
data (the fix changes the false-positive rate measured in bench/identifier_keys.py, so it is
left to the owner of that trade-off). No Django."""

from __future__ import annotations

import re

import pytest
from faker import Faker
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memoryapp.masking import name_kinds

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_CARD_FAKER = Faker("en_US")


def _as_uuid(digits: str, pad: str) -> str:
    """`digits` then `pad` letters to 32 hex, spelled 8-4-4-4-12."""
    hex32 = (digits + pad * 32)[:32]
    return f"{hex32[:8]}-{hex32[8:12]}-{hex32[12:16]}-{hex32[16:20]}-{hex32[20:]}"


def _as_ulid(digits: str, pad: str) -> str:
    return (digits + pad * 26)[:26]


@pytest.mark.xfail(strict=True, reason="a Luhn-valid card dressed as a UUID passes name_kinds since 5077f25")
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), pad=st.sampled_from("abcdefABCDEF"), hexform=st.booleans())
def test_card_dressed_as_uuid_is_refused(seed: int, pad: str, hexform: bool) -> None:
    _CARD_FAKER.seed_instance(seed)
    card = _CARD_FAKER.credit_card_number(card_type="visa16")
    token = _as_uuid(card, pad)
    if hexform:
        token = token.replace("-", "")
    assert name_kinds(card), card  # the bare card is refused …
    assert name_kinds(f"card-{token}"), token  # … and must stay refused as a UUID


@pytest.mark.xfail(strict=True, reason="a national phone (leading 0) dressed as a ULID passes name_kinds since 5077f25")
@SETTINGS
@given(
    locale=st.sampled_from(["en_GB", "en_AU", "fr_FR", "de_DE", "nl_NL"]),
    seed=st.integers(0, 2**32 - 1),
    pad=st.sampled_from("ABCDEFGHJKMNPQRSTVWXYZ"),
)
def test_national_phone_dressed_as_ulid_is_refused(locale: str, seed: int, pad: str) -> None:
    fake = Faker(locale)
    fake.seed_instance(seed)
    digits = re.sub(r"\D", "", fake.phone_number())
    if not digits.startswith("0") or not 9 <= len(digits) <= 12:
        digits = {"en_GB": "02079460958", "en_AU": "0412345678", "fr_FR": "0612345678"}.get(locale, "0612345678")
    assume(name_kinds(digits))  # the bare number is refused …
    token = _as_ulid(digits, pad)
    assert name_kinds(token), token  # … and must stay refused in a ULID's clothes


def test_examples_refused_before_the_change() -> None:
    """Plain (not xfail) guard: these still pass and must keep passing."""
    assert name_kinds("4111111111111111-01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert name_kinds("tel:+1-212-555-0199/01ARZ3NDEKTSV4RRFFQ69G5FAV")


@pytest.mark.xfail(strict=True, reason="an e-mail whose domain holds a ULID label passes since 5077f25")
def test_email_with_ulid_label_is_refused() -> None:
    assert name_kinds("john.smith@01ARZ3NDEKTSV4RRFFQ69G5FAV.gmail.com")
