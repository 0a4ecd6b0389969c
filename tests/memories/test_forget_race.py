"""Forget is atomic with respect to remember on the same key (SPEC §4.3, issue 22 row 6).

1,000 short rounds of three real threads released by one barrier: some remember on the round's key,
the others erase it (an agent's forget by key or by the id of its first version, or the member's
own delete). After every round the key holds either nothing or a gap-free chain from version 1
with one current version, all of it written after the last erase; every version written is either
still there or counted in exactly one receipt; an erase's answer, its receipt and what it erased
agree. Before the fix the first round already left versions 2… of a forgotten key behind.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

import pytest
from django.db import connection
from django.test import override_settings

from core.errors import ApiError
from governance.actions import create_credential
from memoryapp import actions, gates
from memoryapp.models import MemoryVersion
from retention.models import DeletionReceipt
from tests.support import on_postgres

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not on_postgres(), reason="backend: row locks and real concurrency need PostgreSQL"),
]

ROUNDS = 1000
WORKERS = 3  # 1 or 2 erasers and the rest remembers, each round
DEADLOCK_GUARD = 60  # seconds a barrier waits before the test fails as hung (not a timing assertion)


@dataclass
class Outcome:
    op: str
    status: int
    body: dict = field(default_factory=dict)


def roles(round_no: int) -> list[str]:
    """1 or 2 erasers — an agent's forget by key or by the first version's id, or the member's own
    delete from the pages' API — among remembers, shuffled so each thread plays every role."""
    rng = random.Random(round_no)
    erasers = rng.choice((1, 1, 2))
    ops = [rng.choice(("forget_key", "forget_id", "forget_id", "member_delete")) for _ in range(erasers)] + [
        "remember"
    ] * (WORKERS - erasers)
    rng.shuffle(ops)
    return ops


def check_round(member, key: str, first_id: int, outcomes: list[Outcome]) -> None:
    written = {first_id} | {o.body["memory"]["id"] for o in outcomes if o.op == "remember"}
    written = {int(i) for i in written}
    assert all(o.status == 201 for o in outcomes if o.op == "remember"), outcomes
    forgets = [o for o in outcomes if o.op != "remember"]
    assert all(o.status in (200, 404) for o in forgets), forgets
    answered = [o for o in forgets if o.status == 200]
    assert answered, f"{key}: every forget answered 404 although version 1 existed when they started: {forgets}"

    erased: list[int] = []
    last_purge = None
    for o in answered:
        receipt = DeletionReceipt.objects.get(pk=o.body["receiptId"])
        assert receipt.versions_erased == o.body["forgotten"] == len(receipt.memory_version_ids), (key, o.body)
        assert receipt.manifest["artifacts"]["memory_version"] == o.body["forgotten"], (key, receipt.manifest)
        erased.extend(receipt.memory_version_ids)
        last_purge = receipt.purged_at if last_purge is None else max(last_purge, receipt.purged_at)
    assert len(erased) == len(set(erased)), f"{key}: a version was counted by two forgets"

    chain = list(MemoryVersion.objects.filter(member=member, namespace="race", key=key).order_by("version"))
    left = {v.pk for v in chain}
    assert not (left & set(erased)), f"{key}: a version a receipt counts as erased is still stored"
    assert left | set(erased) == written, (
        f"{key}: lost {sorted(written - left - set(erased))}, unknown {sorted((left | set(erased)) - written)}"
    )
    if not chain:
        return
    assert [v.version for v in chain] == list(range(1, len(chain) + 1)), (
        f"{key}: survivors of a forget: versions {[v.version for v in chain]}"
    )
    assert [v.valid_to is None for v in chain].count(True) == 1 and chain[-1].valid_to is None, key
    for older, newer in zip(chain, chain[1:]):
        assert older.valid_to == newer.valid_from, key
    assert all(v.created_at > last_purge for v in chain), (
        f"{key}: a version written before the forget's erase survived it"
    )


@override_settings(MEMORY_EMBEDDER="hashing", AGENT_REMEMBERS_PER_HOUR=1_000_000, MAX_VERSIONS_PER_MEMBER=1_000_000)
def test_forget_racing_remembers_on_one_key_leaves_no_survivor_and_loses_no_version(world):
    tokens = [
        create_credential(world.editor, name=f"racer {i}", scopes=["memory:read", "memory:write"])[1]
        for i in range(WORKERS)
    ]
    start, done = (
        threading.Barrier(WORKERS + 1, timeout=DEADLOCK_GUARD),
        threading.Barrier(WORKERS + 1, timeout=DEADLOCK_GUARD),
    )
    round_state: dict = {}
    outcomes: list[Outcome | None] = [None] * WORKERS
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for round_no in range(ROUNDS):
                start.wait()
                op, key, first_id = round_state["ops"][i], round_state["key"], round_state["first_id"]
                try:
                    if op == "remember":
                        remembered = actions.remember(
                            gates.admit(
                                tokens[i],
                                "remember",
                                {"namespace": "race", "key": key, "text": f"round {round_no} from {i}"},
                            )
                        )
                        outcomes[i] = Outcome(op, 201, {"memory": remembered.json})
                    elif op == "member_delete":
                        deleted = actions.delete_own_memory(world.editor, first_id, agent_only=True)
                        outcomes[i] = Outcome(
                            op, 200, {"forgotten": deleted["deleted"], "receiptId": deleted["receiptId"]}
                        )
                    else:
                        body = {"namespace": "race", "key": key} if op == "forget_key" else {"memoryId": str(first_id)}
                        outcomes[i] = Outcome(op, 200, actions.forget(gates.admit(tokens[i], "forget", body)))
                except ApiError as exc:
                    outcomes[i] = Outcome(op, exc.status)
                except BaseException as exc:  # reported by the main thread, after the round
                    errors.append(exc)
                    outcomes[i] = Outcome(op, 0)
                done.wait()
        except threading.BrokenBarrierError:
            return  # the main thread aborted the round (its own failure is what the test reports)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(WORKERS)]
    for thread in threads:
        thread.start()
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
            round_state.update(key=key, first_id=first.pk, ops=roles(round_no))
            start.wait()
            done.wait()
            assert not errors, errors
            check_round(world.editor, key, int(round_state["first_id"]), list(outcomes))
    finally:
        start.abort()
        done.abort()
        for thread in threads:
            thread.join(DEADLOCK_GUARD)
