"""Issue 33 row 3 measured UK National Insurance numbers surviving 12 of 12; main masks them only
in capitals (`catalogue._NINO_RE` is case-sensitive), while the other catalogue identifiers are
matched whatever their case (`cf: rssmra85t10a562s` is masked). People type them in lower case in
chat, and a label does not help: `NINO jg 10 37 59 a` is stored as written. Found while verifying
issue 33 as an attacker; not fixed (matching lower case without a label needs its false positives
measured on the everyday corpus first)."""

from __future__ import annotations

import pytest

from memoryapp.masking import mask


@pytest.mark.parametrize(
    "text",
    [
        "my NI number is jg103759a",
        "NINO jg 10 37 59 a",
        "national insurance: jg-10-37-59-a",
        "ni number Jg103759A",
    ],
)
def test_a_labelled_national_insurance_number_in_lower_case_is_masked(text):
    masked = mask(text).text
    assert "103759" not in masked.replace(" ", "").replace("-", ""), masked
