"""A re-review found: a card whose groups are joined by a line break then a look-alike
joiner is stored in clear, while the same card with the ASCII joiner is masked. text.Work folds a
look-alike only when blanks without a line break precede it (`_JOINER_BETWEEN_RE`: `[^\\S\\n]{0,3}`),
and DIGIT_SEP allows a line break before the joiner."""

from __future__ import annotations

import pytest

from memoryapp.masking import mask


@pytest.mark.parametrize("joiner", ["-", "\u058a", "\u3001", "\u2215", "\u2024"])
def test_a_card_joined_by_a_line_break_and_a_joiner_is_masked_whatever_the_joiner(joiner):
    text = f"card 4111\n{joiner}1111\n{joiner}1111\n{joiner}1111"
    assert "4111" not in mask(text).text
