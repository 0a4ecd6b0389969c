"""Attack on the name check's identifier cut-out after fbbfdb2 (issue 34 row 3): an identifier is
kept whole only when it touches an at sign, so an e-mail address whose identifier sits one label
further from the "@" ("john@mail.<uuid>.example.com"), behind another at-sign form ("﹫",
"(at)", "[at]"), or after a blank that is no joiner (U+2800) lost its domain to the cut and
passed, though the same name without the cut-out is refused. An identifier inside an address is
part of it: the name is read whole for addresses. What the cut-out is for (digits and random
letters of an identifier read as a phone, card or secret) stays as it was. No Django."""

from __future__ import annotations

import random
import uuid

import pytest

from memoryapp.masking import detect_kinds, kinds_outside_identifiers, name_kinds

UUID = "0b3f2c1e-9a7d-4c2e-8f11-2d3e4f5a6b7c"
IDENTIFIERS = (UUID, UUID.replace("-", ""), "01ARZ3NDEKTSV4RRFFQ69G5FAV", "01arz3ndektsv4rrffq69g5fav")
ADDRESSES = (
    "john@mail.{i}.example.com",
    "john.doe@x.{i}.com",
    "john@ex-{i}-ample.com",
    "john@mail.{i}.co.jp",
    "john@mail\u3002{i}\u3002com",
    "john\ufe6b{i}.com",
    "john\ufe6bmail.{i}.com",
    "john(at){i}.com",
    "john [at] {i} [dot] com",
    "john@\u2800{i}.example.com",
    "notes/john@mail.{i}.example.com",
)


@pytest.mark.parametrize("ident", IDENTIFIERS)
@pytest.mark.parametrize("form", ADDRESSES)
def test_an_address_with_an_identifier_inside_is_refused(form: str, ident: str) -> None:
    name = form.format(i=ident)
    assert "EMAIL" in detect_kinds(name), name  # an address, read whole
    assert "EMAIL" in name_kinds(name), name
    assert "EMAIL" in kinds_outside_identifiers(name), name  # conversation ids, credential names


def test_identifier_keys_without_an_address_stay_accepted() -> None:
    rng = random.Random(3434)
    for _ in range(300):
        u = uuid.UUID(int=rng.getrandbits(128), version=4)
        for name in (str(u), u.hex, f"thread-{u}", f"{u}.json", f"user:{u}", f"notes/{u.hex}.md"):
            assert not name_kinds(name), name


@pytest.mark.parametrize(
    "form", ["password={i}", "api_key={i}", "Authorization: Bearer {i}", "token: {i}", "password_is_{i}"]
)
def test_a_labelled_secret_whose_value_is_an_identifier_is_refused(form: str) -> None:
    name = form.format(i=UUID)
    assert "SECRET" in name_kinds(name, identifiers=False)  # refused when read whole
    assert "SECRET" in name_kinds(name)


@pytest.mark.parametrize(
    "name",
    [
        "session:{i}",
        "token:{i}",
        "key:{i}",
        "password_reset:{i}",
        "secret-{i}",
        "secret_{i}",
        "token_{i}",
        "tokens/{i}.json",
    ],
)
def test_an_identifier_joined_to_a_prefix_without_a_blank_is_still_an_identifier(name: str) -> None:
    """Decided (docs/decisions.md, "Identifiers in keys"): only an assignment or a header makes
    a label of the word before an identifier."""
    assert not name_kinds(name.format(i=UUID)), name
