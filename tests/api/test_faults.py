"""Faults: what users see when a dependency fails. Nothing may become unlimited, nothing partial."""

import pytest
from django.db import DatabaseError
from django.test import override_settings

from memoryapp.models import Citation, MemoryEmbedding, MemoryVersion
from tests.support import error_code


@override_settings(RATE_LIMIT_BACKEND="redis", REDIS_URL="redis://127.0.0.1:1/0")
def test_redis_down_refuses_remembers_with_503_while_reads_keep_working(agent):
    response = agent.remember(namespace="n", text="must not be stored without a counter")
    assert response.status_code == 503 and error_code(response) == "RATE_LIMIT_UNAVAILABLE"
    assert response["Retry-After"]
    assert MemoryVersion.objects.count() == 0
    assert agent.list().status_code == 200
    assert agent.recall(query="anything").status_code == 200


def test_a_database_failure_mid_remember_leaves_no_partial_chain_and_returns_the_slot(agent, monkeypatch):
    first = agent.remember(namespace="n", key="k", text="version one")
    assert first.status_code == 201
    real_save = MemoryEmbedding.save

    def failing_save(self, *args, **kwargs):
        raise DatabaseError("connection dropped")

    monkeypatch.setattr(MemoryEmbedding, "save", failing_save)
    with pytest.raises(DatabaseError):
        agent.remember(namespace="n", key="k", text="version two")
    monkeypatch.setattr(MemoryEmbedding, "save", real_save)
    # the whole write rolled back: version one is still the only, current version
    chain = list(MemoryVersion.objects.filter(namespace="n", key="k"))
    assert [(v.version, v.valid_to) for v in chain] == [(1, None)]
    assert Citation.objects.count() == 0 and MemoryEmbedding.objects.count() == 1
    from django.conf import settings

    if settings.RATE_LIMIT_BACKEND == "database":
        from memoryapp.models import RateLimitSlot

        assert RateLimitSlot.objects.count() == 1  # the failed remember handed its slot back
    listed = agent.list().json()
    assert [m["text"] for m in listed["memories"]] == ["version one"]


def test_broker_down_at_delete_time_the_cascade_sweep_still_erases(
    world, agent, monkeypatch, django_capture_on_commit_callbacks
):
    from governance import actions
    from retention import lifecycle, tasks
    from retention.models import DeletionReceipt

    collection = actions.create_collection(world.workspace, name="c")
    document = actions.create_document(collection, title="d", text="cited passage")
    agent.remember(namespace="n", text="cites it", citations=[str(document.current_version.passages.first().pk)])

    def broker_down(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(tasks.erase_unreachable_task, "delay", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        actions.delete_document(document, actor=world.owner.user)
    assert MemoryVersion.objects.count() == 1  # not erased yet: the task never left
    assert agent.list().json()["memories"] == []  # but unreachable at once
    lifecycle.cascade_sweep()
    assert MemoryVersion.objects.count() == 0
    assert DeletionReceipt.objects.filter(operation="cascade_document").count() == 1
