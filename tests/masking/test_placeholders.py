"""Masking's placeholders (SPEC §4.1): each value is replaced by its typed placeholder, overlapping detections merge,
and only placeholders, spaces, punctuation and symbols count as empty."""

from __future__ import annotations

import pytest

from memoryapp import masking


def test_overlapping_detections_are_merged_never_dropped_and_keep_the_first_kind():
    # Whatever two detectors overlap on is masked as one span: no part of either stays visible.
    assert masking._select([(5, 9, "PHONE"), (0, 6, "CARD")]) == [(0, 9, "CARD")]
    assert masking._select([(0, 4, "NUMBER"), (0, 8, "CARD")]) == [(0, 8, "CARD")]  # longest on ties
    assert masking._select([(0, 4, "EMAIL"), (4, 8, "PHONE")]) == [
        (0, 4, "EMAIL"),
        (4, 8, "PHONE"),
    ]  # touching, not overlapping
    assert masking._select([(3, 3, "EMAIL"), (2, 1, "EMAIL")]) == []  # empty spans are nothing
    assert masking._select([(3, 3, "EMAIL"), (5, 9, "PHONE")]) == [(5, 9, "PHONE")]  # and do not stop the rest
    assert masking._select([(0, 10, "SECRET"), (2, 4, "EMAIL"), (6, 12, "PHONE")]) == [(0, 12, "SECRET")]


def test_mask_replaces_each_value_with_its_typed_placeholder_and_reports_sorted_kinds():
    result = masking.mask("Write ada@example.com or bo@example.org, card 4111 1111 1111 1111.")
    assert result.text == "Write [EMAIL] or [EMAIL], card [CARD]."
    assert result.kinds == ("CARD", "EMAIL")
    assert masking.mask("a@example.com,b@example.com").text == "[EMAIL],[EMAIL]"
    clean = masking.mask("Nothing personal here.")
    assert clean == masking.MaskResult("Nothing personal here.", ())
    assert masking.mask(result.text) == masking.MaskResult(result.text, ())  # idempotent: placeholders are not data
    with pytest.raises(TypeError):
        masking.mask(b"ada@example.com")


def test_contains_personal_data_and_detect_kinds_agree_with_mask():
    assert masking.contains_personal_data("call +1 212 555 0199") and masking.detect_kinds("call +1 212 555 0199") == (
        "PHONE",
    )
    assert not masking.contains_personal_data("call me later") and masking.detect_kinds("call me later") == ()


@pytest.mark.parametrize(
    ("masked", "empty"),
    [
        ("[EMAIL]", True),
        ("[EMAIL] [PHONE]、。「」!?", True),
        ("  \u200b\t", True),
        ("", True),
        ("[EMAIL] a", False),
        ("[CARD] 5", False),
        ("[EMAIL] 東京", False),
        ("[SECRET] \u0301", False),
        # the mathematical, currency and modifier symbols are not content; other symbols are (issue 33)
        ("[PHONE] + =", True),
        ("[CARD] € $", True),
        ("[EMAIL] ^ `", True),
        ("[EMAIL] 🙂", False),
    ],
)
def test_only_placeholders_spaces_punctuation_and_symbols_count_as_empty(masked, empty):
    assert masking.is_effectively_empty(masked) is empty
