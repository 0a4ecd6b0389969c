"""Two sweeps at once (PostgreSQL, real threads and connections): chunks are claimed with SKIP
LOCKED, so together they erase everything exactly once — no double receipt, nothing missed."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection, transaction

from governance.models import Member
from memoryapp.models import MemoryEmbedding, MemoryVersion
from retention import cascades, erasure, lifecycle
from retention.models import DeletionReceipt, Operation
from tests.lifecycle.support import plant_expired
from tests.support import on_postgres

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def run_twice_at_once(job) -> list:
    barrier = threading.Barrier(2)
    results, errors = [], []

    def worker():
        try:
            barrier.wait(timeout=10)
            results.append(job())
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(results) == 2
    return results


def erased_once(operation: str, planted: list[int]) -> None:
    ids = Counter(
        pk
        for ids in DeletionReceipt.objects.filter(operation=operation).values_list("memory_version_ids", flat=True)
        for pk in ids
    )
    assert sorted(ids) == sorted(planted)
    assert max(ids.values()) == 1
    assert not MemoryVersion.objects.filter(pk__in=planted).exists()
    assert not MemoryEmbedding.objects.filter(memory_id__in=planted).exists()


@pytest.mark.skipif(not on_postgres(), reason="backend: SKIP LOCKED needs PostgreSQL")
def test_two_expiry_sweeps_at_once_erase_everything_exactly_once(world):
    planted = []
    for member in (world.owner, world.editor, world.viewer):
        planted += plant_expired(member, 600)
    results = run_twice_at_once(lambda: lifecycle.expiry_sweep(chunk=100))
    assert sum(r["agentVersionsErased"] for r in results) == len(planted)
    erased_once(Operation.EXPIRY, planted)


@pytest.mark.skipif(not on_postgres(), reason="backend: SKIP LOCKED needs PostgreSQL")
def test_two_cascade_sweeps_at_once_erase_everything_exactly_once(world):
    planted = []
    for member in (world.owner, world.editor):
        planted += plant_expired(member, 500, days_old=1)
    cascades.mark_unreachable(MemoryVersion.objects.filter(pk__in=planted), Operation.MEMBER_REMOVAL)
    results = run_twice_at_once(lambda: lifecycle.cascade_sweep(chunk=100))
    assert sum(r["versionsErased"] for r in results) == len(planted)
    erased_once(Operation.MEMBER_REMOVAL, planted)


@pytest.mark.skipif(not on_postgres(), reason="backend: SKIP LOCKED needs PostgreSQL")
def test_grace_purge_and_reactivation_at_once_never_both_happen(world):
    from datetime import timedelta

    from django.utils import timezone

    from core.errors import ApiError
    from memoryapp import assistant

    ids = plant_expired(world.editor, 1, namespace="assistant", days_old=150)
    MemoryVersion.objects.filter(pk__in=ids).update(
        key="topic_one", retention_anchor=timezone.now() - timedelta(days=120, minutes=-5)
    )
    # grace ends in 5 minutes: reactivation is allowed now; the purge runs "6 minutes later"
    outcomes = []

    def reactivate():
        try:
            assistant.reactivate_assistant_memory(world.editor, ids[0])
            outcomes.append("reactivated")
        except ApiError:
            outcomes.append("not found")

    def purge():
        erased = lifecycle.grace_purge(now=timezone.now() + timedelta(minutes=6))["assistantVersionsErased"]
        outcomes.append(f"purged {erased}")

    barrier = threading.Barrier(2)

    def run(fn):
        try:
            barrier.wait(timeout=10)
            fn()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(fn,)) for fn in (reactivate, purge)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    exists = MemoryVersion.objects.filter(pk=ids[0]).exists()
    assert sorted(outcomes) in (["purged 0", "reactivated"], ["not found", "purged 1"])
    assert exists == ("reactivated" in outcomes)


def _erase_while_held(world, planted: list[int], hold) -> erasure.Tally:
    """Run a chunked erase of `planted` while another connection holds the lock `hold` takes;
    a sweep that waited for it would hit the 3 s lock timeout instead of finishing."""
    held, release = threading.Event(), threading.Event()

    def holder():
        try:
            with transaction.atomic():
                hold()
                held.set()
                release.wait(timeout=60)
        finally:
            connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(timeout=10)
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '3s'")
            return erasure.erase_in_chunks(
                MemoryVersion.objects.filter(pk__in=planted, member__workspace=world.workspace),
                operation=Operation.EXPIRY,
                workspace_id=world.workspace.pk,
                member_id=world.editor.pk,
                actor_label="system: expiry sweep",
                filters={},
                chunk=10,
            )
    finally:
        release.set()
        thread.join(timeout=30)


@pytest.mark.skipif(not on_postgres(), reason="backend: SKIP LOCKED needs PostgreSQL")
def test_a_sweep_skips_a_memory_another_transaction_holds_and_erases_the_rest(world):
    planted = plant_expired(world.editor, 3)
    tally = _erase_while_held(world, planted, lambda: MemoryVersion.objects.select_for_update().get(pk=planted[0]))
    assert tally.versions == 2
    assert list(MemoryVersion.objects.filter(pk__in=planted).values_list("pk", flat=True)) == [planted[0]]


@pytest.mark.skipif(not on_postgres(), reason="backend: SKIP LOCKED needs PostgreSQL")
def test_a_sweep_locks_the_memories_alone_not_the_member_a_write_holds(world):
    # A remember holds its member's row lock (one writer per member); a sweep whose selection
    # joins the member must neither wait for that lock nor skip the member's memories.
    planted = plant_expired(world.editor, 3)
    tally = _erase_while_held(world, planted, lambda: Member.objects.select_for_update().get(pk=world.editor.pk))
    assert tally.versions == 3 and not MemoryVersion.objects.filter(pk__in=planted).exists()
