"""Lists (SPEC §3, §4.3): newest first by creation then id, filters by namespace, key and collection, and nothing to
show hides nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from governance import actions as gov_actions
from memoryapp.models import MemoryVersion
from tests.support import _texts, make_agent

pytestmark = pytest.mark.django_db


def test_list_filters_by_namespace_key_and_collection(world):
    agent = make_agent(world.editor)
    collection = gov_actions.create_collection(world.workspace, name="C")
    agent.remember(namespace="a", key="x", text="a x")
    agent.remember(namespace="a", key="y", text="a y", collectionId=str(collection.pk))
    agent.remember(namespace="b", key="x", text="b x")
    assert _texts(agent.list(namespace="a")) == ["a y", "a x"]
    assert _texts(agent.list(key="x")) == ["b x", "a x"]
    assert _texts(agent.list(namespace="a", key="x")) == ["a x"]
    assert _texts(agent.list(collectionId=str(collection.pk))) == ["a y"]


def test_nothing_to_show_hides_nothing(world):
    listed = make_agent(world.editor).list().json()
    assert listed["memories"] == [] and listed["hidden"] == 0
    recalled = make_agent(world.editor).recall(query="anything").json()
    assert recalled["memories"] == [] and recalled["hidden"] == 0


def test_lists_are_newest_first_by_creation_then_by_id(world, time_machine):
    agent = make_agent(world.editor)
    start = timezone.now().replace(microsecond=0)
    time_machine.move_to(start + timedelta(minutes=5), tick=False)
    agent.remember(namespace="n", text="created later, stored first")
    time_machine.move_to(start, tick=False)
    agent.remember(namespace="n", text="created earlier, stored second")
    agent.remember(namespace="n", text="same instant, stored third")
    time_machine.move_to(start + timedelta(minutes=10), tick=False)
    assert _texts(agent.list()) == [
        "created later, stored first",
        "same instant, stored third",
        "created earlier, stored second",
    ]


def test_list_paginates_newest_first_with_a_stable_cursor(agent):
    for i in range(7):
        agent.remember(namespace="n", text=f"note {i}")
    seen, cursor = [], None
    while True:
        body = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = agent.list(**body).json()
        seen += [m["text"] for m in page["memories"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [f"note {i}" for i in reversed(range(7))]


def test_list_refills_a_page_past_hidden_memories_and_counts_them(agent, world, docs):
    _, document, passages = docs
    agent.remember(namespace="n", text="visible old")
    for i in range(4):
        agent.remember(namespace="n", text=f"cites {i}", citations=[str(passages[0].pk)])
    document.expires_at = timezone.now() - timedelta(seconds=1)
    document.save()
    page = agent.list(limit=1).json()
    assert (
        [m["text"] for m in page["memories"]] == ["visible old"] and page["hidden"] == 4 and page["nextCursor"] is None
    )


def test_list_query_count_does_not_grow_with_citations(agent, docs, django_assert_max_num_queries):
    _, _, passages = docs
    for i in range(30):
        agent.remember(namespace="n", text=f"note {i}", citations=[str(p.pk) for p in passages])
    with django_assert_max_num_queries(
        15
        # 8 for the read, 7 for its read-budget slot on the database limiter (lock, trim and count the
        # credential's slots, trim and count the member's, insert, and the member's live credentials that size
        # its bound; Redis: none)
    ):
        response = agent.list(limit=100)
    assert len(response.json()["memories"]) == 30


def test_member_versions_are_newest_first_by_creation_then_by_id(world):
    """The read order (SPEC §4.2 list): `created_at` descending, ties by id descending — not id alone."""
    agent = make_agent(world.editor)
    ids = [int(agent.remember(namespace="n", text=f"note {n}").json()["memory"]["id"]) for n in range(3)]
    now = timezone.now()
    MemoryVersion.objects.filter(pk=ids[0]).update(created_at=now)  # the oldest id, created last
    MemoryVersion.objects.filter(pk__in=ids[1:]).update(created_at=now - timedelta(minutes=1))  # a tie
    ordered = list(MemoryVersion.objects.restrict(world.editor, "view").matching().values_list("pk", flat=True))
    assert ordered == [ids[0], ids[2], ids[1]]
