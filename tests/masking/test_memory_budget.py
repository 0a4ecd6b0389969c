"""One memory's text and details share one phone budget (SPEC §4.7: no request costs more than a
bounded multiple of a typical one; issue 22 row 1, bench/worst_input.py "remember digits").

The cost is counted, not timed: phonenumbers.parse calls, the detector's unit of work."""

from __future__ import annotations

import re

import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryapp import masking
from memoryapp.gates import mask_content
from memoryapp.masking import phone

HOSTILE_LINE = ("order 12 34 56 78 90 " * 30)[:500]


@pytest.fixture()
def parses(monkeypatch):
    calls = [0]
    real = phonenumbers.parse

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(phone.phonenumbers, "parse", counted)
    return calls


def test_twenty_hostile_detail_lines_cost_what_the_shared_budget_allows(parses):
    mask_content("a note", [HOSTILE_LINE])
    one_line = parses[0]
    parses[0] = 0
    mask_content("a note", [HOSTILE_LINE] * 20)
    twenty = parses[0]
    assert twenty < 5 * one_line  # not 20x: the lines share one budget (two texts' worth of checks)
    parses[0] = 0
    for _ in range(20):
        masking.mask(HOSTILE_LINE)
    assert parses[0] > 4 * twenty  # what each line on its own budget costs (the old behaviour)


def test_what_the_budget_does_not_reach_is_masked_by_shape():
    result = mask_content("a note", [HOSTILE_LINE] * 20)
    for line in result.details:
        assert not re.search(r"(?:\d[ ]?){10}", line), line  # no 10-digit run survives in any line


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["call 090 1234 5678", "tel +44 20 7946 0958", "order 12 34 56 78 90 12", "ring 555 0100 2233"]
        ),
        min_size=1,
        max_size=20,
    )
)
def test_a_shared_budget_masks_at_least_what_each_line_alone_masks(lines):
    shared = mask_content("a note", lines).details
    for alone, together in zip((masking.mask(line).text for line in lines), shared, strict=True):
        assert len(re.findall(r"\d", together)) <= len(re.findall(r"\d", alone)), (alone, together)


def test_the_budget_is_per_memory_not_per_process():
    with masking.one_memory_budget():
        for _ in range(40):
            masking.mask(HOSTILE_LINE)
    # a later memory starts with a full budget again: a phone it reads by the matcher keeps its label
    assert mask_content("call 090 1234 5678", []).text == "call [PHONE]"


def test_a_conversation_turns_messages_share_one_budget(parses, world):
    """A turn of 50 number-heavy messages cost ~10x the worst remember when each message was
    screened on its own budget (a re-review measured 18,000 parses); it is skipped all the same."""
    from memoryapp.consolidation import submit_turn
    from tests.credits.support import ai_agent

    agent = ai_agent(world)
    message = ("order 12 34 56 78 90 " * 40)[:640]
    submitted = submit_turn(
        workspace=world.workspace,
        member=world.editor,
        agent=agent,
        credential_id=None,
        conversation_id="c-budget",
        anonymous=False,
        messages=[{"role": "user", "content": message}] * 50,
    )
    assert parses[0] < 5 * 1200  # one shared budget, not fifty
    assert submitted.consolidation.reason == "personal_data"
