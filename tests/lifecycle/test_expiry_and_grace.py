"""Retention (SPEC §8) with time travel: agent memories expire and are erased, assistant memories
expire into "Expired memories", can be reactivated during the grace period, and are purged."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import CommandError, call_command

from governance import actions as governance
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryEmbedding, MemoryState, MemoryVersion
from retention import erasure, lifecycle
from retention.models import DeletionReceipt, Operation
from tests.lifecycle.support import plant_expired
from tests.support import client_for, error_code

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


def remember(agent, text: str = "Prefers short answers in the morning.", **body) -> str:
    response = agent.remember(namespace=body.pop("namespace", "prefs"), text=text, **body)
    assert response.status_code == 201, response.content
    return response.json()["memory"]["id"]


def listed(agent, **body) -> list[str]:
    response = agent.list(**body)
    assert response.status_code == 200, response.content
    return [m["id"] for m in response.json()["memories"]]


def recalled(agent, query: str = "short answers morning") -> list[str]:
    response = agent.recall(query=query)
    assert response.status_code == 200, response.content
    return [m["id"] for m in response.json()["memories"]]


def set_retention(world, **changes) -> None:
    governance.update_settings(world.workspace, changes, actor=world.owner.user)


# --- agent memories ----------------------------------------------------------------------------
def test_agent_memory_is_hidden_at_expiry_before_any_sweep_then_erased_by_it(world, agent):
    with time_machine.travel(T0, tick=False):
        memory_id = remember(agent)
        assert listed(agent) == [memory_id]
    with time_machine.travel(T0 + timedelta(days=90) - timedelta(seconds=1), tick=False):
        assert listed(agent) == [memory_id]
        assert recalled(agent) == [memory_id]
    with time_machine.travel(T0 + timedelta(days=90), tick=False):
        assert listed(agent) == []
        assert recalled(agent) == []
        assert listed(agent, asOf=(T0 + timedelta(hours=1)).isoformat()) == []
        member_api = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/ask-history/agent-memories")
        assert member_api.json()["memories"] == []
        assert MemoryVersion.objects.filter(pk=memory_id).exists()  # hidden, not yet erased

        result = lifecycle.expiry_sweep()

    assert result["agentVersionsErased"] == 1
    assert not MemoryVersion.objects.filter(pk=memory_id).exists()
    assert not MemoryEmbedding.objects.filter(memory_id=memory_id).exists()
    receipt = DeletionReceipt.objects.get(operation=Operation.EXPIRY)
    assert receipt.member_ref == world.editor.pk
    assert receipt.memory_version_ids == [int(memory_id)]
    assert receipt.unreachable_at == T0 + timedelta(days=90)
    assert receipt.purged_at == T0 + timedelta(days=90)
    assert receipt.manifest["filters"]["retentionDays"] == 90
    assert receipt.verification["clean"] is True


def test_expiry_sweep_keeps_live_memories_and_other_workspaces(world, agent):
    from tests.support import make_agent

    outsider_agent = make_agent(world.outsider)
    with time_machine.travel(T0, tick=False):
        old = remember(agent, "An old note about deployments.")
        other = remember(outsider_agent, "An old note in another workspace.")
    governance.update_settings(world.other_workspace, {"agentMemoryRetentionDays": 200}, actor=world.outsider.user)
    with time_machine.travel(T0 + timedelta(days=60), tick=False):
        fresh = remember(agent, "A fresh note about deployments.")
    with time_machine.travel(T0 + timedelta(days=100), tick=False):
        lifecycle.expiry_sweep()
        assert listed(agent) == [fresh]
        assert listed(outsider_agent) == [other]
    assert not MemoryVersion.objects.filter(pk=old).exists()


def test_every_version_of_a_key_expires_by_its_own_creation(world, agent):
    with time_machine.travel(T0, tick=False):
        first = remember(agent, "Version one of the plan.", key="plan")
    with time_machine.travel(T0 + timedelta(days=50), tick=False):
        second = remember(agent, "Version two of the plan.", key="plan")
    with time_machine.travel(T0 + timedelta(days=95), tick=False):
        assert listed(agent) == [second]
        assert listed(agent, asOf=(T0 + timedelta(days=10)).isoformat()) == []
        lifecycle.expiry_sweep()
    assert not MemoryVersion.objects.filter(pk=first).exists()
    assert MemoryVersion.objects.filter(pk=second).exists()


def test_a_shorter_retention_applies_to_existing_memories_at_once(world, agent):
    with time_machine.travel(T0, tick=False):
        memory_id = remember(agent)
    with time_machine.travel(T0 + timedelta(days=20), tick=False):
        assert listed(agent) == [memory_id]
        set_retention(world, agentMemoryRetentionDays=10)
        assert listed(agent) == []
        assert recalled(agent) == []
        lifecycle.expiry_sweep()
    receipt = DeletionReceipt.objects.get(operation=Operation.EXPIRY)
    assert receipt.unreachable_at == T0 + timedelta(days=10)  # when read paths stopped returning it
    assert not MemoryVersion.objects.filter(pk=memory_id).exists()


def test_a_longer_retention_brings_back_a_memory_no_sweep_has_erased(world, agent):
    with time_machine.travel(T0, tick=False):
        memory_id = remember(agent)
    with time_machine.travel(T0 + timedelta(days=100), tick=False):
        assert listed(agent) == []
        set_retention(world, agentMemoryRetentionDays=120)
        assert listed(agent) == [memory_id]
        assert lifecycle.expiry_sweep()["agentVersionsErased"] == 0
    with time_machine.travel(T0 + timedelta(days=120), tick=False):
        assert listed(agent) == []
        assert lifecycle.expiry_sweep()["agentVersionsErased"] == 1


def test_expiry_sweep_is_idempotent(world, agent):
    with time_machine.travel(T0, tick=False):
        remember(agent)
    with time_machine.travel(T0 + timedelta(days=91), tick=False):
        assert lifecycle.expiry_sweep()["receipts"] == 1
        assert lifecycle.expiry_sweep() == {
            "agentVersionsErased": 0,
            "receipts": 0,
            "assistantExpired": 0,
            "assistantRestored": 0,
            "vacuumed": False,
        }
    assert DeletionReceipt.objects.count() == 1


# --- assistant memories ------------------------------------------------------------------------
def add_assistant(world, topic: str = "preferred_language", summary: str = "Answers in Japanese.") -> str:
    response = client_for(world.editor).post(
        f"/api/w/{world.workspace.pk}/ai-memory/memories",
        {"kind": "preference", "topic": topic, "summary": summary},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()["memory"]["id"]


def ai_memory(world) -> dict:
    response = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/ai-memory/memories")
    assert response.status_code == 200
    return response.json()


def reactivate(world, memory_id: str):
    return client_for(world.editor).post(f"/api/w/{world.workspace.pk}/ai-memory/memories/{memory_id}/reactivate")


def test_assistant_memory_expires_reactivates_and_expires_again(world, agent):
    with time_machine.travel(T0, tick=False):
        memory_id = add_assistant(world)
        assert listed(agent, namespace=ASSISTANT_NAMESPACE) == [memory_id]
    with time_machine.travel(T0 + timedelta(days=91), tick=False):
        page = ai_memory(world)
        assert page["memories"] == []
        assert [m["id"] for m in page["expired"]] == [memory_id]  # shown before any sweep
        assert page["expired"][0]["erasedAt"] == "2030-05-01T09:00:00Z"  # expiry (day 90) + 30 grace days
        assert listed(agent, namespace=ASSISTANT_NAMESPACE) == []  # invisible to agents and recall
        assert recalled(agent, "Japanese") == []
        assert lifecycle.expiry_sweep()["assistantExpired"] == 1
        version = MemoryVersion.objects.get(pk=memory_id)
        assert version.state == MemoryState.EXPIRED
        assert version.expired_at == T0 + timedelta(days=90)
        assert DeletionReceipt.objects.count() == 0  # expired, not erased

        response = reactivate(world, memory_id)
        assert response.status_code == 200, response.content
        assert response.json()["memory"]["state"] == "active"
        assert [m["id"] for m in ai_memory(world)["memories"]] == [memory_id]
        assert listed(agent, namespace=ASSISTANT_NAMESPACE) == [memory_id]
    reactivated = T0 + timedelta(days=91)
    with time_machine.travel(reactivated + timedelta(days=89), tick=False):
        lifecycle.expiry_sweep()
        assert [m["id"] for m in ai_memory(world)["memories"]] == [memory_id]
    with time_machine.travel(reactivated + timedelta(days=90), tick=False):
        assert [m["id"] for m in ai_memory(world)["expired"]] == [memory_id]
        assert lifecycle.expiry_sweep()["assistantExpired"] == 1
        assert MemoryVersion.objects.get(pk=memory_id).state == MemoryState.EXPIRED


def test_grace_purge_erases_expired_assistant_memories_after_the_grace_period(world):
    with time_machine.travel(T0, tick=False):
        memory_id = add_assistant(world)
    with time_machine.travel(T0 + timedelta(days=100), tick=False):
        lifecycle.expiry_sweep()
        assert lifecycle.grace_purge()["assistantVersionsErased"] == 0
    with time_machine.travel(T0 + timedelta(days=120), tick=False):
        assert ai_memory(world)["expired"] == []  # the grace period is over: nothing to reactivate
        response = reactivate(world, memory_id)
        assert response.status_code == 404 and error_code(response) == "MEMORY_NOT_FOUND"
        assert lifecycle.grace_purge()["assistantVersionsErased"] == 1
        assert lifecycle.grace_purge()["assistantVersionsErased"] == 0
    assert not MemoryVersion.objects.filter(pk=memory_id).exists()
    receipt = DeletionReceipt.objects.get()
    assert receipt.operation == Operation.GRACE_PURGE
    assert receipt.member_ref == world.editor.pk
    assert receipt.unreachable_at == T0 + timedelta(days=90)
    assert receipt.manifest["filters"]["expiredGraceDays"] == 30


def test_grace_purge_needs_no_prior_expiry_sweep_and_zero_grace_erases_at_expiry(world):
    set_retention(world, expiredGraceDays=0)
    with time_machine.travel(T0, tick=False):
        memory_id = add_assistant(world)
    with time_machine.travel(T0 + timedelta(days=90), tick=False):
        assert ai_memory(world)["expired"] == []
        assert reactivate(world, memory_id).status_code == 404
        assert lifecycle.grace_purge()["assistantVersionsErased"] == 1


def test_a_longer_retention_restores_an_assistant_memory_the_sweep_had_expired(world):
    with time_machine.travel(T0, tick=False):
        memory_id = add_assistant(world)
    with time_machine.travel(T0 + timedelta(days=95), tick=False):
        lifecycle.expiry_sweep()
        assert MemoryVersion.objects.get(pk=memory_id).state == MemoryState.EXPIRED
        set_retention(world, agentMemoryRetentionDays=180)
        assert lifecycle.expiry_sweep()["assistantRestored"] == 1
        assert [m["id"] for m in ai_memory(world)["memories"]] == [memory_id]
        assert MemoryVersion.objects.get(pk=memory_id).expired_at is None


def test_reactivating_an_active_memory_changes_nothing_and_someone_elses_is_not_found(world):
    with time_machine.travel(T0, tick=False):
        memory_id = add_assistant(world)
    with time_machine.travel(T0 + timedelta(days=10), tick=False):
        response = reactivate(world, memory_id)
        assert response.status_code == 200
        assert MemoryVersion.objects.get(pk=memory_id).retention_anchor == T0
    with time_machine.travel(T0 + timedelta(days=95), tick=False):
        other = client_for(world.viewer).post(f"/api/w/{world.workspace.pk}/ai-memory/memories/{memory_id}/reactivate")
        assert other.status_code == 404 and error_code(other) == "MEMORY_NOT_FOUND"


def test_an_edit_restarts_an_assistant_memorys_retention(world):
    with time_machine.travel(T0, tick=False):
        memory_id = add_assistant(world)
    with time_machine.travel(T0 + timedelta(days=80), tick=False):
        response = client_for(world.editor).patch(
            f"/api/w/{world.workspace.pk}/ai-memory/memories/{memory_id}",
            {"summary": "Answers in English."},
            format="json",
        )
        assert response.status_code == 200
        edited = response.json()["memory"]["id"]
    with time_machine.travel(T0 + timedelta(days=120), tick=False):
        lifecycle.expiry_sweep()
        lifecycle.grace_purge()  # the superseded version (day 0) is past expiry + grace: erased
        assert [m["id"] for m in ai_memory(world)["memories"]] == [edited]
    assert not MemoryVersion.objects.filter(pk=memory_id).exists()


# --- chunking, interruption, the command --------------------------------------------------------


def receipt_ids(operation: str) -> list[int]:
    return [
        pk
        for ids in DeletionReceipt.objects.filter(operation=operation).values_list("memory_version_ids", flat=True)
        for pk in ids
    ]


def test_an_interrupted_sweep_rerun_loses_nothing_and_erases_nothing_twice(world, monkeypatch):
    planted = plant_expired(world.editor, 70) + plant_expired(world.viewer, 50)
    real = erasure.erase_memories
    calls = {"n": 0}

    def crashing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("worker killed mid-sweep")
        return real(*args, **kwargs)

    monkeypatch.setattr(erasure, "erase_memories", crashing)
    with pytest.raises(RuntimeError):
        lifecycle.expiry_sweep(chunk=25)
    done = receipt_ids(Operation.EXPIRY)
    assert len(done) == 50  # two chunks committed, the third rolled back whole
    assert MemoryVersion.objects.count() == len(planted) - 50

    monkeypatch.setattr(erasure, "erase_memories", real)
    result = lifecycle.expiry_sweep(chunk=25)
    assert result["agentVersionsErased"] == len(planted) - 50
    erased = receipt_ids(Operation.EXPIRY)
    assert sorted(erased) == sorted(planted)  # every version in exactly one receipt
    assert MemoryVersion.objects.count() == 0 and MemoryEmbedding.objects.count() == 0
    for receipt in DeletionReceipt.objects.all():
        assert receipt.member_ref in (world.editor.pk, world.viewer.pk)
        assert len(receipt.memory_version_ids) <= 25


def test_run_periodic_jobs_runs_every_job_or_only_the_named_ones(world):
    plant_expired(world.editor, 3)
    out = io.StringIO()
    call_command("run_periodic_jobs", "--only", "expiry_sweep", "--json", stdout=out)
    assert json.loads(out.getvalue())["expiry_sweep"]["agentVersionsErased"] == 3
    out = io.StringIO()
    call_command("run_periodic_jobs", stdout=out)
    assert {line.split(":")[0] for line in out.getvalue().splitlines()} >= {
        "expiry_sweep",
        "cascade_sweep",
        "grace_purge",
    }
    with pytest.raises(CommandError):
        call_command("run_periodic_jobs", "--only", "no_such_job")


def test_every_beat_entry_names_a_registered_task_and_expires(world):
    from django.conf import settings

    from config.celery import app
    from retention.jobs import JOBS

    app.loader.import_default_modules()
    for name in ("expiry_sweep", "cascade_sweep", "grace_purge"):
        assert name in JOBS
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        assert entry["options"]["expires"] > 0
        if entry["task"].split(".")[-1] in JOBS:
            assert entry["task"] in app.tasks


def test_the_sweeps_receipts_state_the_rule_and_the_cutoff_they_applied(world, agent):
    """The expiry and grace receipts' filters say which setting erased what, and the exact cutoff
    instant (the receipt is the member's proof of why it went)."""
    from memoryapp.assistant import add_assistant_memory

    governance.update_settings(
        world.workspace, {"agentMemoryRetentionDays": 30, "expiredGraceDays": 10}, actor=world.owner.user
    )
    old = remember(agent, text="An old agent note.")
    topic, _ = add_assistant_memory(world.editor, kind="preference", topic="response_style", summary="Short answers.")
    MemoryVersion.objects.filter(pk__in=[int(old), topic.pk]).update(retention_anchor=T0 - timedelta(days=45))
    lifecycle.expiry_sweep(now=T0)
    lifecycle.grace_purge(now=T0)
    expiry = DeletionReceipt.objects.get(operation=Operation.EXPIRY)
    assert expiry.manifest["filters"] == {
        "rule": "agentMemoryRetentionDays",
        "retentionDays": 30,
        "createdBefore": (T0 - timedelta(days=30)).isoformat(),
        "namespaces": "every namespace except assistant",
    }
    assert expiry.memory_version_ids == [int(old)] and expiry.member_ref == world.editor.pk
    grace = DeletionReceipt.objects.get(operation=Operation.GRACE_PURGE)
    assert grace.manifest["filters"] == {
        "rule": "agentMemoryRetentionDays + expiredGraceDays",
        "retentionDays": 30,
        "expiredGraceDays": 10,
        "namespace": ASSISTANT_NAMESPACE,
        "lastUpdatedBefore": (T0 - timedelta(days=40)).isoformat(),
    }
    assert grace.memory_version_ids == [topic.pk]
    assert (
        expiry.unreachable_at == grace.unreachable_at == T0 - timedelta(days=15)
    )  # anchor + 30 days: when each expired
