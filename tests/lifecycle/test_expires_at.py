"""expiresAt (SPEC §3, §8): a version expires exactly retention days after its anchor; the current retention counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from governance import actions
from memoryapp.models import ASSISTANT_NAMESPACE
from tests.support import _texts, client_for, make_agent

pytestmark = pytest.mark.django_db


def test_a_memory_expires_exactly_retention_days_after_its_anchor(world, time_machine):
    agent = make_agent(world.editor)
    start = timezone.now().replace(microsecond=0)
    time_machine.move_to(start, tick=False)
    memory = agent.remember(namespace="n", text="short lived").json()["memory"]
    days = world.workspace.ask_history.agent_memory_retention_days
    assert memory["expiresAt"].replace("Z", "+00:00") == (start + timedelta(days=days)).isoformat()
    time_machine.move_to(start + timedelta(days=days) - timedelta(seconds=1), tick=False)
    assert _texts(agent.list()) == ["short lived"]
    time_machine.move_to(start + timedelta(days=days), tick=False)
    assert _texts(agent.list()) == []


def test_expires_at_is_the_retention_anchor_plus_the_current_retention(world, agent):
    created = agent.remember(namespace="n", text="a note").json()["memory"]
    assert _instant(created["expiresAt"]) - _instant(created["createdAt"]) == timedelta(days=90)
    actions.update_settings(world.workspace, {"agentMemoryRetentionDays": 30}, actor=world.owner.user)
    listed = agent.list().json()["memories"][0]
    assert _instant(listed["expiresAt"]) - _instant(listed["createdAt"]) == timedelta(days=30)  # retroactive


def test_an_assistant_memory_expires_from_its_last_edit(world, agent, time_machine):
    api = client_for(world.editor)
    base = f"/api/w/{world.workspace.pk}/ai-memory/memories"
    created = api.post(base, {"kind": "preference", "topic": "tea", "summary": "likes green tea"}, format="json")
    assert created.status_code == 201, created.content
    memory_id = created.json()["memory"]["id"] if "memory" in created.json() else created.json()["id"]
    time_machine.move_to(timezone.now() + timedelta(days=10))
    api.patch(f"{base}/{memory_id}", {"summary": "likes jasmine tea"}, format="json")
    current = next(m for m in agent.list(namespace=ASSISTANT_NAMESPACE).json()["memories"] if m["key"] == "tea")
    assert abs(_instant(current["expiresAt"]) - (timezone.now() + timedelta(days=90))) < timedelta(seconds=5)


def _instant(value: str):
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00"))
