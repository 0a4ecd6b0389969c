"""Review finding (SPEC §4.1: digit groups "joined by spaces, commas, dashes, dots, slashes, no-break
spaces or invisible characters"; "Unicode look-alikes ... do not hide a value"): a tab, a line
break, the ideographic comma and the division / fraction slashes join groups that are stored in
clear — a card copied from a spreadsheet cell, a Japanese phone number written with 、. No Django."""

from __future__ import annotations

import pytest

from memoryapp.masking import mask

CASES = [
    "card 4111\t1111\t1111\t1111 exp 12/29",
    "card\n4111\n1111\n1111\n1111",
    "4111 1111\t1111 1111",
    "tel\t090\t1234\t5678",
    "card 4111、1111、1111、1111",
    "口座番号 1234、5678、90",
    "card 4111\u22151111\u22151111\u22151111",
    "card 4111\u20441111\u20441111\u20441111",
    "ref 98\u202476\u202454\u202432\u202410",
]


@pytest.mark.parametrize("text", CASES)
def test_digit_groups_joined_by_other_whitespace_or_look_alike_separators_are_masked(text):
    masked = mask(text).text
    assert not any(group in masked for group in ("4111", "1234", "5678", "98", "76")), masked
