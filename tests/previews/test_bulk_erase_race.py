"""Bulk erases are atomic with respect to remember (issue 22 review, hole E).

The member's "Delete all", the owner's bulk delete and the admin's member erase read the ids to
erase without the member lock a remember takes to supersede (the race forget had, issue 22 row 6):
a remember that superseded a listed version meanwhile left its new version behind, continuing a
chain the erase reported gone. Now each bulk erase takes the member row locks first, in id order
(several members: the owner's erase; one order, so no two writers wait on each other), then plans
and erases under them.

Rounds of three real threads on PostgreSQL released by one barrier: one erases (each kind in
turn), the others remember on the round's key. After every round the key holds nothing or a
gap-free chain from version 1, all of it written after the erase; every version written is either
still there or listed by exactly one of the round's receipts.
"""

from __future__ import annotations

import random
import threading

import pytest
from django.db import connection
from django.test import override_settings

from core.errors import ApiError
from governance.actions import create_credential
from memoryapp import actions, gates
from memoryapp.models import MemoryVersion
from retention import previews
from retention.models import DeletionReceipt
from tests.support import on_postgres

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not on_postgres(), reason="backend: row locks and real concurrency need PostgreSQL"),
]

ROUNDS = 300
WORKERS = 3
ERASES = ("member_delete_all", "owner_bulk_delete", "admin_erase")
GUARD = 60  # seconds a barrier waits before the test fails as hung (not a timing assertion)


def erase(kind: str, world) -> None:
    if kind == "member_delete_all":
        actions.delete_all_own_agent_memories(world.editor)
    elif kind == "owner_bulk_delete":
        actions.delete_all_agent_memories(world.workspace, actor=world.owner.user)
    else:
        previews.erase_member_memories(world.editor, actor=world.owner.user, reason="race test")


def check_round(world, key: str, written: set[int], receipts_before: int, kind: str) -> None:
    receipts = list(DeletionReceipt.objects.filter(pk__gt=receipts_before, member_ref=world.editor.pk))
    assert receipts, f"{key}: the {kind} wrote no receipt although version 1 existed when it started"
    erased = [int(i) for r in receipts for i in r.memory_version_ids]
    assert len(erased) == len(set(erased)), f"{key}: a version listed by two receipts"
    chain = list(MemoryVersion.objects.filter(member=world.editor, namespace="race", key=key).order_by("version"))
    left = {v.pk for v in chain}
    assert not (left & set(erased)), f"{key}: a version a receipt lists as erased is still stored"
    assert (left | set(erased)) & written == written, f"{key}: lost {sorted(written - left - set(erased))}"
    if not chain:
        return
    assert [v.version for v in chain] == list(range(1, len(chain) + 1)), (
        f"{key}: survivors of a {kind}: versions {[v.version for v in chain]}"
    )
    assert [v.valid_to is None for v in chain].count(True) == 1 and chain[-1].valid_to is None, key
    last_purge = max(r.purged_at for r in receipts)
    assert all(v.created_at > last_purge for v in chain), f"{key}: a version written before the {kind} survived it"


@override_settings(MEMORY_EMBEDDER="hashing", AGENT_REMEMBERS_PER_HOUR=1_000_000, MAX_VERSIONS_PER_MEMBER=1_000_000)
def test_bulk_erases_racing_remembers_leave_no_survivor(world):
    tokens = [
        create_credential(world.editor, name=f"racer {i}", scopes=["memory:read", "memory:write"])[1]
        for i in range(WORKERS)
    ]
    start, done = threading.Barrier(WORKERS + 1, timeout=GUARD), threading.Barrier(WORKERS + 1, timeout=GUARD)
    state: dict = {}
    written: list[int | None] = [None] * WORKERS
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for _ in range(ROUNDS):
                start.wait()
                written[i] = None
                try:
                    if state["eraser"] == i:
                        erase(state["kind"], world)
                    else:
                        remembered = actions.remember(
                            gates.admit(
                                tokens[i],
                                "remember",
                                {"namespace": "race", "key": state["key"], "text": f"{state['key']} from {i}"},
                            )
                        )
                        written[i] = remembered.memory.pk
                except ApiError as exc:
                    errors.append(exc)
                except BaseException as exc:  # reported by the main thread, after the round
                    errors.append(exc)
                done.wait()
        except threading.BrokenBarrierError:
            return
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(WORKERS)]
    for thread in threads:
        thread.start()
    rng = random.Random(22)
    try:
        for round_no in range(ROUNDS):
            key = f"k{round_no}"
            first, _ = actions.store_version(
                workspace=world.workspace,
                member=world.editor,
                credential=None,
                namespace="race",
                key=key,
                content=gates.mask_content(f"round {round_no} first", []),
                kind="",
                source="agent",
                collection_id=None,
                passages=[],
            )
            receipts_before = DeletionReceipt.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
            kind = ERASES[round_no % len(ERASES)]
            state.update(key=key, kind=kind, eraser=rng.randrange(WORKERS))
            start.wait()
            done.wait()
            assert not errors, errors
            check_round(world, key, {first.pk} | {pk for pk in written if pk is not None}, receipts_before, kind)
    finally:
        start.abort()
        done.abort()
        for thread in threads:
            thread.join(GUARD)
