"""Attack on lower-case National Insurance numbers (ee94d58). Unlabelled, a lower-case match is
masked when HMRC could issue it; but the commonest two-letter words of English (at, we, on, my,
me, by, be, am, an, as, he, or) are issuable prefixes and the article "a" is an issuable suffix, so
everyday sentences with three small numbers ("meet on 28 25 50 a bit later", "rooms booked my
44 31 11 a wing") are masked: 33 per 1,000 of the generated sentences below (115 with Faker filler; target: at most
1). And a label does not reach a number behind a quote, a bracket, a line break or "N.I.", because
the label must end right before the number."""

from __future__ import annotations

import random

import pytest

from memoryapp.masking import mask

TWO = "at we go in on to be by my me he so no up us it is am an as do of or if ok hi".split()
TEMPLATES = [
    "Sam said we could meet {w} {a} {b} {c} {l} bit later.",
    "{W} {a} {b} {c} {l} then home",
    "Rooms booked {w} {a} {b} {c} {l} wing, see Priya",
    "Scores {w} {a} {b} {c} {l} grade overall",
    "Lap times {w} {a} {b} {c} {l}.m. split",
    "Bus {w} {a}-{b}-{c} {l} stop",
    "seats {a} {b} {c} {l} row; {w} the left",
]


def _sentences(n: int) -> list[str]:
    rng = random.Random(33)
    out = []
    for _ in range(n):
        w = rng.choice(TWO)
        nums = [str(rng.choice([rng.randint(10, 99), rng.randint(0, 9)])) for _ in range(3)]
        out.append(
            rng.choice(TEMPLATES).format(
                w=w, W=w.capitalize(), a=nums[0], b=nums[1], c=nums[2], l=rng.choice("aaaiixbcd")
            )
        )
    return out


def test_everyday_sentences_with_small_numbers_are_left_alone():
    sentences = _sentences(1000)
    changed = [s for s in sentences if mask(s).text != s]
    assert len(changed) <= 1, (len(changed), changed[:5])


@pytest.mark.parametrize(
    "text",
    [
        "my ni number is\nzz 13 37 52 t",
        'NI number: "zz 13 37 52 t"',
        "NI number (zz 13 37 52 t)",
        "N.I. number zz 13 37 52 t",
        "ni number zz  13 37 52 t",
    ],
)
def test_a_labelled_number_is_masked_behind_a_quote_bracket_or_line_break(text):
    assert "133752" not in mask(text).text.replace(" ", ""), mask(text).text
