"""Attack on memoryapp/masking/identifiers.py (merged in 5077f25): personal data dressed as a
UUID/ULID passes the name check that refused it before (bcf1d29). An agent writes a key whose
identifier-shaped token *starts* with a real card number or a national phone number and pads it
with hex/Crockford letters; the token is cut out before the detector reads the name.
Decided (docs/decisions.md, "Identifiers in keys"): a key's UUID or ULID is accepted even when
its digits could be read as a card or phone, because refusing those refuses 1 in 1,100 to 2,500
random uuid4 keys, and a writer who hides data on purpose can hex-encode it anyway. What stays
refused, tested here: the bare forms, and an e-mail address built around an identifier. Topics,
which people choose, get no identifier cut-out (tests/memories/test_attack_topic_disguise.py).
No Django."""

from __future__ import annotations

from faker import Faker
from hypothesis import HealthCheck, given, settings
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


def test_examples_refused_before_the_change() -> None:
    """Plain (not xfail) guard: these still pass and must keep passing."""
    assert name_kinds("4111111111111111-01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert name_kinds("tel:+1-212-555-0199/01ARZ3NDEKTSV4RRFFQ69G5FAV")


@given(
    ident=st.sampled_from(["01ARZ3NDEKTSV4RRFFQ69G5FAV", "0b3f2c1e-9a7d-4c2e-8f11-2d3e4f5a6b7c"]),
    local=st.from_regex(r"[a-z]{2,8}\.[a-z]{2,8}", fullmatch=True),
    at=st.sampled_from(["@", "\uff20"]),
    where=st.sampled_from(["label", "local"]),
)
@SETTINGS
def test_an_email_built_around_an_identifier_is_refused(ident: str, local: str, at: str, where: str) -> None:
    """An identifier next to an at sign is part of an address and is read with it."""
    address = f"{local}{at}{ident}.gmail.com" if where == "label" else f"{ident}{at}gmail.com"
    assert "EMAIL" in name_kinds(address) or name_kinds(address), address
    assert name_kinds(f"contact/{address}"), address


def test_an_identifier_beside_other_joiners_is_still_an_identifier() -> None:
    assert not name_kinds("thread-01ARZ3NDEKTSV4RRFFQ69G5FAV.json")
    assert not name_kinds("user:0b3f2c1e-9a7d-4c2e-8f11-2d3e4f5a6b7c")
