"""Masking's normalised copy (SPEC §4.1): look-alikes, full-width digits and invisible characters do not hide a value;
what is not replaced stays exactly as written; a calendar date is never a phone or account number."""

from __future__ import annotations

import pytest

from memoryapp import masking


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail ada\u200b@example.com now", "mail [EMAIL] now"),  # zero-width space inside
        ("mail ada@exa\u00admple.com", "mail [EMAIL]"),  # soft hyphen inside: covered by the placeholder
        ("mail ada@example\u3002com", "mail [EMAIL]"),  # ideographic full stop
        ("mail ada\ufe6bexample.com", "mail [EMAIL]"),  # small commercial at
        ("mail ada\ufe0f@example.com", "mail [EMAIL]"),  # variation selector
        ("mail ada@exam\U000e0100ple.com", "mail [EMAIL]"),  # variation selector supplement
        ("card ４１１１ １１１１ １１１１ １１１１", "card [CARD]"),  # full-width digits
        ("card 4111\u20131111\u20131111\u20131111", "card [CARD]"),  # en dashes
        ("card \U0001d7d2\U0001d7cf\U0001d7cf\U0001d7cf 1111 1111 1111", "card [CARD]"),  # mathematical digits
        (
            "id \u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669\u0660\u0661\u0662",
            "id [NUMBER]",
        ),  # Arabic-Indic digits
        ("Ｔｅｌｌ ｍｅ ada@example.com", "Ｔｅｌｌ ｍｅ [EMAIL]"),  # the rest stays as written
        ("привет ada@example.com", "привет [EMAIL]"),  # a Cyrillic word is not folded
    ],
)
def test_normalisation_does_not_let_a_value_hide_and_keeps_the_rest(text, expected):
    assert masking.mask(text).text == expected


def test_look_alike_letters_in_a_label_do_not_hide_a_secret():
    masked = masking.mask("p\u0430ssword: Tr0ub4dor&3xyz")  # Cyrillic а in "password"
    assert "SECRET" in masked.kinds and "Tr0ub4dor" not in masked.text
    assert masked.text.startswith("p\u0430ssword")  # the label itself stays as written


def test_digits_joined_by_underscores_or_middle_dots_are_still_one_number():
    for text in ("ref 054_123_4567_89", "ref 054\u00b7123\u00b74567\u00b789"):
        masked = masking.mask(text)
        assert masked.kinds and not any(ch.isdigit() for ch in masked.text), text


def test_dates_and_short_numbers_are_not_personal_data():
    for text in ("on 2024-05-03", "on 03.05.2024", "on 5/3/24", "room 1204", "version 10.2.3"):
        assert masking.mask(text).text == text, text


# A calendar date is never a phone or account number (masking/common.py is_date: one separator,
# year first or day/month first, real month and day ranges, an optional hour).
@pytest.mark.parametrize(
    ("text", "is_date"),
    [
        ("2024-05-03", True),
        ("2024-01-01", True),
        ("2024-12-31", True),
        ("2024-05-03 12", True),
        ("2024-05-03T12", True),
        ("2024-13-01", False),
        ("2024-00-10", False),
        ("2024-01-32", False),
        ("2024-01-00", False),
        ("2024-13-15", False),
        ("0012-20-05", False),  # four digits first: a year, so 20 is a month
        ("01.01.2024", True),
        ("31.12.2024", True),
        ("12/31/2024", True),
        ("05.20.2024", True),
        ("5/3/24", True),
        ("32.01.2024", False),
        ("13.13.2024", False),
        ("32.05.2024", False),
        ("00.01.2024", False),
        ("01/13/2024", True),
        ("05.32.2024", False),
        ("13.01.2024", True),
        ("2024-05/03", False),
        ("12345", False),
        ("1.2", False),
    ],
)
def test_what_counts_as_a_calendar_date(text, is_date):
    from memoryapp.masking.common import is_date as date_check

    assert date_check(text) is is_date


@pytest.mark.parametrize(
    ("written", "read_as"),
    [
        # invisible: left out (category Cf, the extra list, both variation-selector blocks, their ends included)
        ("a\u200bb", "ab"),
        ("a\u00adb", "ab"),
        ("a\u034fb", "ab"),
        ("a\u3164b", "ab"),
        ("a\u2800b", "ab"),
        ("a\ufe00b", "ab"),
        ("a\ufe0fb", "ab"),
        ("a\U000e0100b", "ab"),
        ("a\U000e01efb", "ab"),
        # just outside those blocks: kept as written
        ("a\ufe10b", "a\ufe10b"),
        ("a\U000e01f0b", "a\U000e01f0b"),
        # full-width ASCII, its first and last characters; just past it: kept
        ("\uff01\uff5e\uff20\uff11", "!~@1"),
        ("\uff5f", "\uff5f"),
        # dashes, spaces, digits of other scripts, compatibility letters and digits, special stops
        ("\u2010\u2212", "--"),
        ("a\u00a0b\u3000c", "a b c"),
        ("\u0663\u096a", "34"),
        ("\U0001d400\u2460", "A1"),
        ("\u3002\u2028", ".\n"),
        ("é", "é"),
        # a separator between digits
        ("054_123\u00b74567", "054-123-4567"),
        ("a_b", "a_b"),
        ("5_x", "5_x"),
    ],
)
def test_the_normalised_copy_detectors_read(written, read_as):
    from memoryapp.masking.text import Work

    work = Work.of(written)
    assert work.text == read_as
    assert len(work.starts) == len(work.ends) == len(work.text)
    assert all(0 <= s < e <= len(written) for s, e in zip(work.starts, work.ends))
