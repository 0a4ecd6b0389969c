"""UK National Insurance numbers typed in lower or mixed case are masked (issue 33 row 3): people
type them so in chat. Capitals are masked whatever the letters; another case after a NI label, or
unlabelled as one token HMRC could issue (prefix and suffix rules), which keeps prose words out."""

from __future__ import annotations

import random

import pytest
from faker import Faker

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


def test_generated_numbers_in_every_case_are_masked():
    """Faker's (`ZZ … T`, a prefix HMRC never issues) and issuable ones after a label, spaced or not;
    issuable ones without a label when written as one token."""
    fake = Faker("en_GB")
    fake.seed_instance(33)
    rng = random.Random(33)
    issuable = [
        rng.choice("ABCEGHJKLMNPRSTWXYZ")
        + rng.choice("ABCEGHJKLMNPRSTWXYZ")
        + f"{rng.randrange(10**6):06d}"
        + rng.choice("ABCD")
        for _ in range(300)
    ]
    issuable = [n for n in issuable if n[:2] not in {"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"}]
    labelled = [(fake.ssn(), "NI number: ") for _ in range(150)] + [(n, "nino ") for n in issuable[:150]]
    for number, label in labelled + [(n, "") for n in issuable]:
        compact = number.replace(" ", "")
        spaced = " ".join([compact[:2], compact[2:8], compact[8:]]).lower()
        # unlabelled, only as one token: spaced, a two-letter word and small numbers are prose
        for typed in (compact.lower(), compact.capitalize(), *([number.lower(), spaced] if label else [])):
            result = mask(f"{label}{typed} thanks")
            assert result.kinds and compact[2:8] not in result.text.replace(" ", ""), (typed, result)


@pytest.mark.parametrize("text", ["we 12 34 56 e", "do 10 20 30 a", "gb 12 34 56 a", "ab 12 34 56 z"])
def test_lower_case_that_hmrc_never_issues_is_left_alone(text):
    assert mask(text).text == text
