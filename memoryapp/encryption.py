"""Sealing rows stored before encryption, and re-wrapping data keys under a new KEK (SPEC §8.2).

`manage.py encrypt_memories` and `manage.py rotate_kek` call these. Both work in chunks, one
transaction each, and pick up where an interrupted run stopped (what is done no longer matches
their selection), so running either twice changes nothing the second time.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db import transaction

from credits.models import Consolidation
from memoryapp.keyring import key_store
from memoryapp.models import MemoryEmbedding, MemoryVersion
from memoryapp.sealing import prepare_keys, sealed_fields

CHUNK = 500


def legacy_counts() -> dict[str, int]:
    """Rows still stored unencrypted (what `encrypt_memories` has left to do)."""
    return {
        "memoryVersions": MemoryVersion.objects.filter(key_id__isnull=True).count(),
        "consolidationInputs": Consolidation.objects.filter(key_id__isnull=True, messages__isnull=False).count(),
    }


def _seal_versions(chunk: int) -> int:
    """One chunk of unencrypted memory versions and their index entries, sealed under new keys."""
    with transaction.atomic():
        versions = list(MemoryVersion.objects.select_for_update().filter(key_id__isnull=True).order_by("pk")[:chunk])
        if not versions:
            return 0
        # Read (as plaintext) before the versions get their key: an entry opens under its version's.
        entries = list(MemoryEmbedding.objects.filter(memory_id__in=[v.pk for v in versions]))
        prepare_keys(versions)  # one key-store write for the chunk, committed before the rows
        columns = ["key_id", *(f.name for f in sealed_fields(MemoryVersion))]
        by_pk = {v.pk: v for v in versions}
        for version in versions:
            version.save(update_fields=columns)
        for entry in entries:
            entry.memory = by_pk[entry.memory_id]
            entry.save(update_fields=[f.name for f in sealed_fields(MemoryEmbedding)])
    return len(versions)


def _seal_inputs(chunk: int) -> int:
    """One chunk of unencrypted consolidation inputs: sealed if the task still needs them, dropped
    if their consolidation is finished (their input is purged then anyway)."""
    with transaction.atomic():
        rows = list(Consolidation.objects.select_for_update().filter(key_id__isnull=True, messages__isnull=False).order_by("pk")[:chunk])
        if not rows:
            return 0
        finished = [row.pk for row in rows if row.input_purged_at is not None or row.finished_at is not None]
        if finished:
            Consolidation.objects.filter(pk__in=finished).update(messages=None)
        waiting = [row for row in rows if row.pk not in set(finished)]
        prepare_keys(waiting)
        for row in waiting:
            row.save(update_fields=["key_id", "messages"])
    return len(rows)


def encrypt_legacy_rows(chunk: int = CHUNK) -> Iterator[tuple[str, int]]:
    """Seal every row stored before encryption, chunk by chunk: yields (what, how many) per chunk."""
    for name, step in (("memoryVersions", _seal_versions), ("consolidationInputs", _seal_inputs)):
        while done := step(chunk):
            yield name, done
            if done < chunk:
                break


def rewrap_keys(chunk: int = CHUNK) -> Iterator[int]:
    """Re-wrap every data key under the current KEK (MEMORY_KEK), chunk by chunk. A key that no
    configured KEK unwraps is logged and left (rotate_kek reports how many remain)."""
    store = key_store()
    after = None
    while True:
        done, after = store.rewrap(limit=chunk, after=after)
        if after is None:
            return
        yield done
