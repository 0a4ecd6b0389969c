"""Attack on the hyphen fix (7e1b59a): the plain address followed by "-" is masked, but the same
address in its other written forms still is not: a quoted local part ('"john doe"@example.com-x',
whose regex keeps the old "-" lookahead), a spaced "@" ("john @ example.com-draft") and the spelled
forms ("john at example dot com- thanks", "dana アット example ドット com-x"), where the last label
"com-" / "com-x" is read as one label that is no TLD."""

from __future__ import annotations

import pytest

from memoryapp.masking import mask

FORMS = [
    '"john doe"@example.com-x',
    '"john doe"@example.com- thanks',
    "john @ example.com-draft",
    "john at example dot com- thanks",
    "john at example dot com-x",
    "john at example.com-draft",
    "dana アット example ドット com-x",
]


@pytest.mark.parametrize("text", FORMS)
def test_every_written_form_of_an_address_is_masked_before_a_hyphen(text):
    result = mask(text)
    assert "EMAIL" in result.kinds, (text, result.text)
    assert "example" not in result.text, (text, result.text)
