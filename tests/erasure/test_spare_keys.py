"""Spare data keys (memoryapp.keyring.SpareKeys): new rows' keys are stored and committed in
batches, handed out once each, never older than KEY_GRACE / 2, never across a fork, and the sweep
and the erase treat them like any other key."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
import time_machine
from django.utils import timezone

from memoryapp import keyring, sealing
from memoryapp.keyring import KEY_GRACE, SPARE_MAX_AGE, DataKey, SpareKeys
from memoryapp.models import MemoryVersion
from retention import keysweep
from tests.support import make_agent

OWNER = "memoryapp.memoryversion"


class RecordingStore:
    """A key store that keeps what it is given (the pool's logic without a database)."""

    def __init__(self):
        self.puts: list[tuple[dict[UUID, bytes], str, datetime]] = []
        self.lock = threading.Lock()

    def put(self, keys, *, owner, created_at=None):
        with self.lock:
            self.puts.append((dict(keys), owner, created_at))

    def stored(self) -> set[UUID]:
        return {key_id for keys, _, _ in self.puts for key_id in keys}


class Clock:
    def __init__(self):
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_spares_are_stored_in_batches_and_each_is_handed_out_once_across_threads():
    store = RecordingStore()
    pool = SpareKeys(store=lambda: store, batch=4)
    taken: list[UUID] = []
    lock = threading.Lock()

    def work():
        for _ in range(50):
            key_id, dek = pool.take(OWNER)
            assert len(dek) == 32
            with lock:
                taken.append(key_id)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(taken) == 400 and len(set(taken)) == 400  # no key handed out twice
    assert set(taken) <= store.stored()  # every key handed out was stored first
    assert len(store.puts) == 100 and all(len(keys) == 4 and owner == OWNER for keys, owner, _ in store.puts)


def test_a_key_is_handed_out_only_while_younger_than_half_the_sweeps_grace():
    assert SPARE_MAX_AGE == KEY_GRACE / 2
    store, clock = RecordingStore(), Clock()
    pool = SpareKeys(store=lambda: store, batch=4, clock=clock)
    handed: dict[UUID, datetime] = {}  # key id -> when it was handed out

    def take() -> UUID:
        key_id, _ = pool.take(OWNER)
        handed[key_id] = clock.now
        return key_id

    first = take()
    ((batch, _, stamp),) = store.puts
    assert first in batch and stamp == clock.now  # the stored created_at is the age's origin
    clock.now += SPARE_MAX_AGE - timedelta(seconds=1)
    second = take()
    assert second in batch and len(store.puts) == 1  # still young enough: from the same batch
    clock.now += timedelta(seconds=1)  # the two spares left are now SPARE_MAX_AGE old
    third = take()
    assert third not in batch and len(store.puts) == 2  # never the old ones: a new batch
    assert store.puts[-1][2] == clock.now
    # The invariant: every key was stored less than SPARE_MAX_AGE before it was handed out.
    stamps = {key_id: created for keys, _, created in store.puts for key_id in keys}
    assert all(when - stamps[key_id] < SPARE_MAX_AGE for key_id, when in handed.items())


def test_each_owner_has_its_own_spares():
    store = RecordingStore()
    pool = SpareKeys(store=lambda: store, batch=3)
    pool.take(OWNER)
    pool.take("credits.consolidation")
    assert [owner for _, owner, _ in store.puts] == [OWNER, "credits.consolidation"]
    assert pool.count(OWNER) == 2 and pool.count("credits.consolidation") == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_hands_out_its_parents_spares():
    store = RecordingStore()
    pool = SpareKeys(store=lambda: store, batch=8)
    pool.take(OWNER)
    parents_spares = store.stored()
    assert pool.count(OWNER) == 7
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it sees and hands out, then leave without cleanup
        try:
            count = pool.count(OWNER)
            key_id, _ = pool.take(OWNER)
            os.write(write, f"{count} {key_id}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        count, key_id = pipe.read().split()
    os.waitpid(pid, 0)
    assert int(count) == 0  # the child started with an empty pool
    assert UUID(key_id) not in parents_spares  # and made its own batch
    assert pool.count(OWNER) == 7  # the parent's spares are untouched


def test_unused_spares_are_orphans_the_sweep_destroys_after_the_grace(world, settings):
    settings.KEYRING_SPARE_KEYS = 8
    agent = make_agent(world.editor)
    response = agent.remember(namespace="notes", text="kept with its key")
    assert response.status_code == 201
    version = MemoryVersion.objects.get(pk=response.json()["memory"]["id"])
    assert DataKey.objects.count() == 8 and keyring.spare_keys().count(OWNER) == 7
    assert keysweep.sweep_keyring(now=timezone.now() + KEY_GRACE - timedelta(minutes=1))["orphanedKeysDestroyed"] == 0
    assert keysweep.sweep_keyring(now=timezone.now() + KEY_GRACE + timedelta(seconds=1))["orphanedKeysDestroyed"] == 7
    assert list(DataKey.objects.values_list("key_id", flat=True)) == [version.key_id]
    assert [m["text"] for m in agent.list(limit=10).json()["memories"]] == ["kept with its key"]


def test_a_remember_after_half_the_grace_takes_a_fresh_key_not_an_old_spare(world, settings):
    settings.KEYRING_SPARE_KEYS = 4
    agent = make_agent(world.editor)
    with time_machine.travel(timezone.now(), tick=False) as traveller:
        agent.remember(namespace="notes", text="first")
        old_spares = set(DataKey.objects.values_list("key_id", flat=True)) - set(
            MemoryVersion.objects.values_list("key_id", flat=True)
        )
        assert len(old_spares) == 3
        traveller.shift(SPARE_MAX_AGE)
        response = agent.remember(namespace="notes", text="second")
        version = MemoryVersion.objects.get(pk=response.json()["memory"]["id"])
        assert version.key_id not in old_spares
        assert DataKey.objects.get(pk=version.key_id).created_at > timezone.now() - SPARE_MAX_AGE
        assert DataKey.objects.count() == 8  # the old spares stay for the sweep, a new batch of 4


def test_erase_destroys_the_key_it_was_handed_and_no_other(world, settings):
    settings.KEYRING_SPARE_KEYS = 4
    agent = make_agent(world.editor)
    ids = [int(agent.remember(namespace="notes", text=text).json()["memory"]["id"]) for text in ("gone soon", "stays")]
    gone, stays = (MemoryVersion.objects.get(pk=pk) for pk in ids)
    assert gone.key_id != stays.key_id
    spares = set(DataKey.objects.values_list("key_id", flat=True)) - {gone.key_id, stays.key_id}
    assert len(spares) == 2
    receipt = agent.forget(memoryId=str(gone.pk)).json()
    assert receipt["receiptId"]
    assert not DataKey.objects.filter(pk=gone.key_id).exists()
    assert set(DataKey.objects.values_list("key_id", flat=True)) == spares | {stays.key_id}
    assert [m["text"] for m in agent.list(limit=10).json()["memories"]] == ["stays"]
    # the remaining spares are handed out next: still unique, still opening only their own row
    third = MemoryVersion.objects.get(pk=agent.remember(namespace="notes", text="third").json()["memory"]["id"])
    assert third.key_id in spares and sealing.fetch_keys([third.key_id])
