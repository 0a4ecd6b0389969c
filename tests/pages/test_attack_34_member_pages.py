"""Attack on the member's AI-memory page of issue 34 §6 (seed 002): the editable topic and the
expired memory to reactivate. A member reaching another member's memory by its id (pages and
API), personal data smuggled through the new topic, and what a topic move leaves behind once
the member deletes the memory."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from memoryapp import assistant
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion
from tests.pages.support import browser, messages_of
from tests.support import client_for, make_agent

pytestmark = pytest.mark.django_db


def _edit_body(**fields) -> dict:
    return {"kind": "fact", "summary": "Codename is Aurora", "details": ""} | fields


def test_another_members_memory_is_out_of_reach_by_id(world):
    theirs, _ = assistant.add_assistant_memory(
        world.owner, kind="fact", topic="product_codename", summary="Codename is Aurora", details=[]
    )
    expired = assistant.add_expired_assistant_memory(
        world.owner, kind="preference", topic="delivery_window", summary="Mornings only", details=[]
    )
    before = list(
        MemoryVersion.objects.order_by("pk").values_list("pk", "key", "valid_to", "state", "retention_anchor")
    )
    ws = world.workspace.pk
    for intruder in (world.editor, world.viewer):
        page = browser(intruder)
        for memory in (theirs, expired):
            assert page.get(f"/w/{ws}/ai-memory/{memory.pk}/edit/").status_code == 404
            assert page.post(f"/w/{ws}/ai-memory/{memory.pk}/edit/", _edit_body(topic="moved_away")).status_code == 404
            assert page.get(f"/w/{ws}/ai-memory/{memory.pk}/delete/").status_code == 404
            assert page.post(f"/w/{ws}/ai-memory/{memory.pk}/delete/", follow=True).status_code == 200
            assert page.post(f"/w/{ws}/ai-memory/{memory.pk}/reactivate/", follow=True).status_code == 200
            api = client_for(intruder)
            assert (
                api.patch(
                    f"/api/w/{ws}/ai-memory/memories/{memory.pk}", {"topic": "moved_away"}, format="json"
                ).status_code
                == 404
            )
            assert (
                api.post(f"/api/w/{ws}/ai-memory/memories/{memory.pk}/reactivate", {}, format="json").status_code == 404
            )
    # another workspace's member, through their own workspace's URL
    outsider = browser(world.outsider)
    assert (
        outsider.post(
            f"/w/{world.other_workspace.pk}/ai-memory/{theirs.pk}/edit/", _edit_body(topic="moved_away")
        ).status_code
        == 404
    )
    assert (
        outsider.post(f"/w/{world.other_workspace.pk}/ai-memory/{expired.pk}/reactivate/", follow=True).status_code
        == 200
    )
    assert (
        list(MemoryVersion.objects.order_by("pk").values_list("pk", "key", "valid_to", "state", "retention_anchor"))
        == before
    )


@pytest.mark.parametrize(
    "topic",
    [
        "dana_at_example_dot_com",
        "call_4155550134",
        "card_4111111111111111",
        "password_is_hunter2",
        "note_0b3f2c1e9a7d4c2e8f112d3e4f5a6b7c4155550134",  # hex-shaped, digits read whole in a topic
        "dana_at_mail_dot_example_dot_com",
    ],
)
def test_a_moved_topic_cannot_carry_personal_data_on_the_page_or_the_api(world, topic):
    mine, _ = assistant.add_assistant_memory(
        world.editor, kind="fact", topic="product_codename", summary="Codename is Aurora", details=[]
    )
    response = browser(world.editor).post(f"/w/{world.workspace.pk}/ai-memory/{mine.pk}/edit/", _edit_body(topic=topic))
    assert response.status_code == 200 and response.context["form"].errors.get("topic")
    api = client_for(world.editor).patch(
        f"/api/w/{world.workspace.pk}/ai-memory/memories/{mine.pk}", {"topic": topic}, format="json"
    )
    assert api.status_code == 400
    assert not MemoryVersion.objects.filter(key=topic).exists()


def test_deleting_a_moved_memory_leaves_no_copy_under_its_old_topic(world):
    agent = make_agent(world.editor)
    old, _ = assistant.add_assistant_memory(
        world.editor, kind="fact", topic="health_note", summary="Takes insulin at noon", details=[]
    )
    time.sleep(0.01)
    before_move = timezone.now().isoformat()
    time.sleep(0.01)
    page = browser(world.editor)
    moved = page.post(
        f"/w/{world.workspace.pk}/ai-memory/{old.pk}/edit/",
        _edit_body(topic="daily_routine", summary="Takes insulin at noon"),
        follow=True,
    )
    assert "Memory moved to the new topic; the old topic is closed." in messages_of(moved)
    (new,) = MemoryVersion.objects.filter(member=world.editor, namespace=ASSISTANT_NAMESPACE, key="daily_routine")
    deleted = page.post(f"/w/{world.workspace.pk}/ai-memory/{new.pk}/delete/", follow=True)
    assert "Memory deleted." in messages_of(deleted)
    listed = agent.list(namespace=ASSISTANT_NAMESPACE, key="health_note", asOf=before_move)
    assert listed.status_code == 200 and listed.json()["memories"] == [], listed.json()
    assert not MemoryVersion.objects.filter(member=world.editor, namespace=ASSISTANT_NAMESPACE).exists()


def test_a_moved_memory_forgotten_by_key_takes_its_old_topics_history_and_not_a_later_chain(world):
    """Moves a → b → c, then the member starts topic a again: forgetting c by key erases c, b and
    a's history up to the first move, and leaves the new chain of a (another memory)."""
    agent = make_agent(world.editor)
    first, _ = assistant.add_assistant_memory(world.editor, kind="fact", topic="topic_a", summary="First wording")
    to_b = assistant.edit_assistant_memory(
        world.editor, first.pk, kind=None, summary=None, details=None, topic="topic_b"
    )
    to_c = assistant.edit_assistant_memory(
        world.editor, to_b.pk, kind=None, summary="Third wording", details=None, topic="topic_c"
    )
    again, _ = assistant.add_assistant_memory(world.editor, kind="fact", topic="topic_a", summary="A new memory")
    assert to_c.moved_from == to_b.pk and to_b.moved_from == first.pk
    forgotten = agent.forget(namespace=ASSISTANT_NAMESPACE, key="topic_c")
    assert forgotten.status_code == 200, forgotten.json()
    assert forgotten.json()["forgotten"] == 3
    left = MemoryVersion.objects.filter(member=world.editor, namespace=ASSISTANT_NAMESPACE)
    assert list(left.values_list("pk", flat=True)) == [again.pk]
