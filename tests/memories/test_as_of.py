"""asOf (SPEC §4.3): list and recall return the version current at that instant, bounds included and excluded, and
refuse an instant that is not one."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memoryapp.models import MemoryEmbedding, MemoryVersion
from retention.models import DeletionReceipt
from tests.recall.support import position, recall_ok, remember_ok, texts
from tests.support import _texts, error_code, make_agent

pytestmark = pytest.mark.django_db


def test_as_of_returns_the_version_current_at_that_instant_bounds_included_and_excluded(world, time_machine):
    agent = make_agent(world.editor)
    start = timezone.now().replace(microsecond=0)
    time_machine.move_to(start, tick=False)
    agent.remember(namespace="n", key="k", text="first")
    time_machine.move_to(start + timedelta(minutes=1), tick=False)
    agent.remember(namespace="n", key="k", text="second")
    time_machine.move_to(start + timedelta(minutes=2), tick=False)

    def at(instant):
        return _texts(agent.list(asOf=instant.isoformat()))

    assert at(start - timedelta(seconds=1)) == []
    assert at(start) == ["first"]  # validFrom <= asOf
    assert at(start + timedelta(seconds=59)) == ["first"]
    assert at(start + timedelta(minutes=1)) == ["second"]  # asOf < validTo: the closed one is out
    assert _texts(agent.list()) == ["second"]


@pytest.mark.parametrize(
    "as_of", ["2024-01-01T00:00:00", "2999-01-01T00:00:00Z", "yesterday", 5, "0001-01-01T00:00:00+14:00"]
)
def test_list_validates_as_of_like_recall(agent, as_of):
    response = agent.list(asOf=as_of)
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert "asOf" in response.json()["error"]["details"]["fields"]


def test_as_of_returns_what_was_current_then(agent, time_machine):
    start = timezone.now()
    time_machine.move_to(start)
    agent.remember(namespace="prefs", key="editor", text="Uses vim")
    time_machine.move_to(start + timedelta(hours=1))
    agent.remember(namespace="prefs", key="editor", text="Uses emacs")
    time_machine.move_to(start + timedelta(hours=2))
    between = (start + timedelta(minutes=30)).isoformat()
    before = (start - timedelta(minutes=1)).isoformat()
    assert [m["text"] for m in agent.list(asOf=between).json()["memories"]] == ["Uses vim"]
    assert agent.list(asOf=before).json()["memories"] == []
    assert [m["text"] for m in agent.list().json()["memories"]] == ["Uses emacs"]
    recalled = agent.recall(query="vim", asOf=between).json()["memories"]
    assert [m["text"] for m in recalled] == ["Uses vim"]


def test_forget_by_key_removes_every_version_and_every_as_of(agent, time_machine):
    start = timezone.now()
    time_machine.move_to(start)
    agent.remember(namespace="prefs", key="editor", text="Uses vim")
    time_machine.move_to(start + timedelta(hours=1))
    agent.remember(namespace="prefs", key="editor", text="Uses emacs")
    time_machine.move_to(start + timedelta(hours=2))
    response = agent.forget(namespace="prefs", key="editor")
    assert response.status_code == 200 and response.json()["forgotten"] == 2
    receipt = DeletionReceipt.objects.get(pk=response.json()["receiptId"])
    assert receipt.verification["clean"] is True and receipt.manifest["artifacts"]["memory_version"] == 2
    assert agent.list(asOf=(start + timedelta(minutes=30)).isoformat()).json()["memories"] == []
    assert MemoryVersion.objects.count() == 0 and MemoryEmbedding.objects.count() == 0


def test_as_of_recalls_what_was_current_then(agent, time_machine):
    start = timezone.now()
    time_machine.move_to(start)
    remember_ok(agent, namespace="prefs", key="editor", text="Uses vim for every editor task")
    remember_ok(agent, namespace="prefs", text="Keyless editor note")
    time_machine.move_to(start + timedelta(hours=1))
    remember_ok(agent, namespace="prefs", key="editor", text="Uses emacs for every editor task")
    time_machine.move_to(start + timedelta(hours=2))
    remember_ok(agent, namespace="prefs", text="Later editor note")

    now = recall_ok(agent, query="editor")
    assert sorted(texts(now)) == ["Keyless editor note", "Later editor note", "Uses emacs for every editor task"]
    between = recall_ok(agent, query="editor", asOf=(start + timedelta(minutes=30)).isoformat())
    assert sorted(texts(between)) == ["Keyless editor note", "Uses vim for every editor task"]
    assert between["considered"] == 2
    assert between["memories"][position(between, "Uses vim for every editor task")]["validTo"] is not None
    before = recall_ok(agent, query="editor", asOf=(start - timedelta(minutes=1)).isoformat())
    assert before["memories"] == [] and before["considered"] == 0
