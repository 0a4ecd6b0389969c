"""Attacks on the assistant page and the access log after they moved to `restrict(member, "keep")`
(8d89206): an assistant memory expired within its grace is listed, editable, reactivatable and
deletable; past its grace (not yet purged) or unreachable it is gone for every read and edit; no
one else's memory is ever reached; an access-log entry states what became of what it listed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.utils import timezone

from governance import actions as governance
from memoryapp import assistant
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion
from tests.pages.support import browser
from tests.support import client_for, error_code, make_agent

pytestmark = pytest.mark.django_db

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
WITHIN_GRACE = T0 + timedelta(days=95)  # 90 days of retention, 30 of grace
PAST_GRACE = T0 + timedelta(days=125)


def api(world, path: str = "") -> str:
    return f"/api/w/{world.workspace.pk}/ai-memory/memories{path}"


def page(world, memory_id, action: str) -> str:
    return f"/w/{world.workspace.pk}/ai-memory/{memory_id}/{action}/"


def add(world, topic: str, member=None) -> str:
    member = member or world.editor
    response = client_for(member).post(
        f"/api/w/{member.workspace_id}/ai-memory/memories",
        {"kind": "preference", "topic": topic, "summary": f"About {topic}."},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()["memory"]["id"]


def listing(world, member=None) -> tuple[list[str], list[str]]:
    response = client_for(member or world.editor).get(api(world))
    assert response.status_code == 200, response.content
    body = response.json()
    return [m["id"] for m in body["memories"]], [m["id"] for m in body["expired"]]


def test_expired_within_grace_is_listed_editable_reactivatable_and_deletable(world):
    with time_machine.travel(T0, tick=False):
        edited, revived, deleted = add(world, "edited_topic"), add(world, "revived_topic"), add(world, "deleted_topic")
    with time_machine.travel(WITHIN_GRACE, tick=False):
        active, expired = listing(world)
        assert active == [] and set(expired) == {edited, revived, deleted}
        assert assistant.has_assistant_topic(world.editor, "edited_topic")
        editor = browser(world.editor)
        for memory_id in (edited, deleted):
            assert editor.get(page(world, memory_id, "edit")).status_code == 200
            assert editor.get(page(world, memory_id, "delete")).status_code == 200
        patched = client_for(world.editor).patch(api(world, f"/{edited}"), {"summary": "Now current."}, format="json")
        assert patched.status_code == 200, patched.content
        assert client_for(world.editor).post(api(world, f"/{revived}/reactivate")).status_code == 200
        assert client_for(world.editor).delete(api(world, f"/{deleted}")).status_code == 200
        active, expired = listing(world)
        assert set(active) == {patched.json()["memory"]["id"], revived} and expired == []
        assert not MemoryVersion.objects.filter(pk=deleted).exists()


def test_past_grace_not_yet_purged_is_gone_for_the_list_edit_and_reactivation(world):
    with time_machine.travel(T0, tick=False):
        memory_id = add(world, "stale_topic")
    with time_machine.travel(PAST_GRACE, tick=False):
        assert MemoryVersion.objects.filter(pk=memory_id).exists()  # no grace purge ran
        assert listing(world) == ([], [])
        assert not assistant.has_assistant_topic(world.editor, "stale_topic")
        # before 8d89206 this PATCH answered 200 and stored the purge-bound memory as a new live version
        patched = client_for(world.editor).patch(api(world, f"/{memory_id}"), {"summary": "Revive?"}, format="json")
        assert patched.status_code == 404 and error_code(patched) == "MEMORY_NOT_FOUND"
        revived = client_for(world.editor).post(api(world, f"/{memory_id}/reactivate"))
        assert revived.status_code == 404 and error_code(revived) == "MEMORY_NOT_FOUND"
        editor = browser(world.editor)
        assert editor.get(page(world, memory_id, "edit")).status_code == 404
        assert editor.get(page(world, memory_id, "delete")).status_code == 404
        assert MemoryVersion.objects.filter(member=world.editor).count() == 1  # nothing stored by the attempts
        # the member may still erase it at once (it is theirs); never a 500
        assert client_for(world.editor).delete(api(world, f"/{memory_id}")).status_code in (200, 404)


def test_an_unreachable_assistant_memory_is_gone_for_every_read_and_edit(world):
    memory_id = add(world, "cascaded_topic")
    MemoryVersion.objects.filter(pk=memory_id).update(
        unreachable_at=timezone.now(), unreachable_reason="cascade_document"
    )
    assert listing(world) == ([], [])
    assert not assistant.has_assistant_topic(world.editor, "cascaded_topic")
    client = client_for(world.editor)
    assert client.patch(api(world, f"/{memory_id}"), {"summary": "x"}, format="json").status_code == 404
    assert client.post(api(world, f"/{memory_id}/reactivate")).status_code == 404
    assert client.delete(api(world, f"/{memory_id}")).status_code == 404
    assert browser(world.editor).get(page(world, memory_id, "edit")).status_code == 404


@pytest.mark.parametrize("attacker", ["owner", "viewer", "outsider"])
def test_no_one_else_reaches_a_members_assistant_memory_live_or_in_grace(world, attacker):
    member = getattr(world, attacker)
    with time_machine.travel(T0, tick=False):
        live_id, old_id = add(world, "live_topic"), add(world, "old_topic")
    with time_machine.travel(T0 + timedelta(days=80), tick=False):
        client_for(world.editor).post(api(world, f"/{live_id}/reactivate"))  # active: unchanged
        MemoryVersion.objects.filter(pk=live_id).update(retention_anchor=timezone.now())
    with time_machine.travel(WITHIN_GRACE, tick=False):
        ws = member.workspace_id
        client = client_for(member)
        assert client.get(f"/api/w/{ws}/ai-memory/memories").json() in (
            {"rememberMe": member.remember_me, "available": True, "memories": [], "expired": []},
            {"rememberMe": member.remember_me, "available": False, "memories": [], "expired": []},
        )
        for memory_id in (live_id, old_id):
            base = f"/api/w/{ws}/ai-memory/memories/{memory_id}"
            assert client.patch(base, {"summary": "mine now"}, format="json").status_code == 404
            assert client.post(f"{base}/reactivate").status_code == 404
            assert client.delete(base).status_code == 404
            assert browser(member).get(f"/w/{ws}/ai-memory/{memory_id}/edit/").status_code == 404
        assert not assistant.has_assistant_topic(member, "old_topic")
        assert MemoryVersion.objects.filter(member=world.editor).count() == 2
        assert listing(world) == ([live_id], [old_id])


def access_states(world) -> list[dict[str, str]]:
    response = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/ask-history/access-log")
    assert response.status_code == 200, response.content
    return [{m["id"]: m["state"] for m in entry["memories"]} for entry in response.json()["entries"]]


def test_an_access_log_entry_states_what_became_of_the_memories_it_listed(world):
    # 30 days of retention and 30 of grace: both ends fall inside the access log's own 90 days
    governance.update_settings(world.workspace, {"agentMemoryRetentionDays": 30}, actor=world.owner.user)
    agent = make_agent(world.editor)
    with time_machine.travel(T0, tick=False):
        note = agent.remember(namespace="prefs", text="Likes tea.").json()["memory"]["id"]
        topic = add(world, "tea_topic")
        assert agent.list().status_code == 200
        assert agent.list(namespace=ASSISTANT_NAMESPACE).status_code == 200
        assert access_states(world) == [{topic: "readable"}, {note: "readable", topic: "readable"}]
    with time_machine.travel(T0 + timedelta(days=40), tick=False):  # the agent memory expired; the topic in grace
        assert access_states(world) == [{topic: "readable"}, {note: "erased", topic: "readable"}]
    with time_machine.travel(T0 + timedelta(days=65), tick=False):  # not purged yet, but no longer kept
        assert access_states(world) == [{topic: "erased"}, {note: "erased", topic: "erased"}]


def test_an_access_log_never_opens_another_members_memory_listed_under_the_same_id(world):
    """Handed the editor's entries, another member's reading of them opens nothing (restrict
    "keep" is the member's own versions, whatever the role or workspace)."""
    from memoryapp import access_log
    from memoryapp.models import AccessEntry

    agent = make_agent(world.editor)
    note = agent.remember(namespace="prefs", text="Likes tea.").json()["memory"]["id"]
    agent.list()
    entries = list(AccessEntry.objects.all())
    assert [e.memory_ids for e in entries] == [[int(note)]]
    for member in (world.owner, world.viewer, world.outsider):
        visible, hidden = access_log.readable_versions(member, entries)
        assert visible == {} and hidden == set(), member
    assert set(access_log.readable_versions(world.editor, entries)[0]) == {int(note)}
