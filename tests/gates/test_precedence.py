"""Precedence between neighbouring gates (SPEC §2): each test sets up both conditions at once as well as each one
alone, so a swapped order fails it."""

from __future__ import annotations

import pytest
from django.test import override_settings

from governance import actions
from memoryapp.models import MemoryVersion
from tests.limits.support import _use_up_the_hour
from tests.support import error_code, make_agent

pytestmark = pytest.mark.django_db


def test_personal_data_in_a_key_beats_the_context_set_scope(bound):
    agent, collection, _, outside, _ = bound
    inside, pii_key = {"collectionId": str(collection.pk)}, "mail jane@example.com"
    assert (
        error_code(agent.remember(namespace="n", key=pii_key, text="x", **inside)) == "AGENT_MEMORY_PERSONAL_DATA"
    )  # 7 alone
    assert (
        error_code(agent.remember(namespace="n", key="fine", text="x", collectionId=str(outside.pk)))
        == "AGENT_CONTEXT_SET_SCOPE_REFUSED"
    )  # 8 alone
    assert (
        error_code(agent.remember(namespace="n", key=pii_key, text="x", collectionId=str(outside.pk)))
        == "AGENT_MEMORY_PERSONAL_DATA"
    )  # both


def test_the_context_set_scope_beats_an_invalid_citation(world, bound):
    agent, collection, passages, _, outside_passage = bound
    unbound = make_agent(world.editor)
    secret = actions.create_collection(world.workspace, name="Secret", restricted=True, readers=[world.owner])
    unreadable_outside = actions.create_document(secret, title="s", text="secret").current_version.passages.first()
    assert (
        error_code(unbound.remember(namespace="n", text="x", citations=["999999"])) == "AGENT_MEMORY_CITATION_INVALID"
    )  # 9 alone
    assert (
        error_code(agent.remember(namespace="n", text="x", citations=[str(outside_passage.pk)]))
        == "AGENT_CONTEXT_SET_SCOPE_REFUSED"
    )  # 8 alone
    for invalid in ("999999", str(unreadable_outside.pk)):  # both: outside the set and not a readable passage
        assert (
            error_code(agent.remember(namespace="n", text="x", citations=[str(passages[0].pk), invalid]))
            == "AGENT_CONTEXT_SET_SCOPE_REFUSED"
        )


def test_an_empty_text_beats_the_rate_limit(world):
    fresh = make_agent(world.editor)
    assert error_code(fresh.remember(namespace="n", text="jane@example.com")) == "AGENT_MEMORY_EMPTY"  # 10 alone
    agent = make_agent(world.editor)
    _use_up_the_hour(agent)
    assert error_code(agent.remember(namespace="n", text="still a note")) == "AGENT_MEMORY_RATE_LIMITED"  # 11 alone
    assert error_code(agent.remember(namespace="n", text="jane@example.com")) == "AGENT_MEMORY_EMPTY"  # both


@override_settings(MAX_VERSIONS_PER_MEMBER=120)
def test_the_rate_limit_beats_the_cap(world):
    agent = make_agent(world.editor)
    _use_up_the_hour(agent)  # 120 stored: the cap is reached and the hour is used up
    assert MemoryVersion.objects.filter(member=world.editor).count() == 120
    assert error_code(agent.remember(namespace="n", text="both")) == "AGENT_MEMORY_RATE_LIMITED"  # both
    fresh = make_agent(world.editor)
    assert error_code(fresh.remember(namespace="n", text="cap only")) == "AGENT_MEMORY_FULL"  # 12 alone
