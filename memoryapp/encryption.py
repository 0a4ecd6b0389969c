"""Sealing rows stored before encryption, and rotating the key-encryption key (SPEC §8.2).

`manage.py encrypt_memories` and `manage.py rotate_kek` call these, and the beat job
`kek_rotation` calls `scheduled_rotation()` (every KEK_ROTATION_HOURS). They work in
chunks, one transaction each, and pick up where an interrupted run stopped (what is done no longer
matches their selection), so running any of them twice changes nothing the second time.

`kek_schedule()` says when the KEKs that exist now will be destroyed: a deletion receipt's
`residualUntil` (retention.erasure) is that instant.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Min
from django.utils import timezone

from core.timestamps import iso
from credits.models import Consolidation
from memoryapp.kek import KekSource, Retirement
from memoryapp.keyring import KekRecord, KekRotationLease, kek_source, key_store
from memoryapp.models import MemoryEmbedding, MemoryVersion
from memoryapp.sealing import prepare_keys, sealed_fields
from retention.models import DeletionReceipt

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
        rows = list(
            Consolidation.objects.select_for_update()
            .filter(key_id__isnull=True, messages__isnull=False)
            .order_by("pk")[:chunk]
        )
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
    """Re-wrap every data key under the current KEK, chunk by chunk (one pass in key id order). A
    key that no configured KEK unwraps is logged and left (rotate_kek reports how many remain)."""
    store = key_store()
    after = None
    while True:
        done, after = store.rewrap(limit=chunk, after=after)
        if after is None:
            return
        yield done


#: How long a rotation waits after writing a new KEK before it re-wraps: a process that read the
#: key file just before the rewrite may still be storing keys wrapped by the old KEK; they commit
#: within this and the re-wrap pass then takes them too.
SETTLE_SECONDS = 2.0
MAX_PASSES = 5


@dataclass(frozen=True)
class RotationResult:
    began: bool  # a new KEK was made (False: a rotation under way was resumed, or MEMORY_KEK is set)
    current: str  # the id of the KEK every key is now wrapped by
    rewrapped: int
    left: int  # keys no configured KEK unwraps: they stay under their KEK, which stays configured
    retirement: Retirement

    def as_dict(self) -> dict:
        return {
            "began": self.began,
            "currentKek": self.current,
            "rewrapped": self.rewrapped,
            "notRewrapped": self.left,
            "destroyedKeks": self.retirement.destroyed,
            "removeFromRetiredKeks": self.retirement.for_the_operator,
        }


class KekRotation:
    """A key-encryption key rotation (SPEC §8.2), in three steps any caller can drive
    (`manage.py rotate_kek` with a progress bar, a periodic job with `run()`): `begin()` makes a
    new current KEK and keeps the old one as retired (or resumes an unfinished rotation),
    `rewrap()` re-wraps every data key wrapped by another KEK under the current one in chunks
    (passes repeat, at most MAX_PASSES), `finish()` destroys each retired KEK no stored data key
    names any more (or, configured in RETIRED_KEKS, names it for the operator to remove). A crash
    at any point leaves a state the next run completes: docs/encryption.md, "Rotating the KEK".
    """

    def __init__(self, source: KekSource | None = None, *, chunk: int = CHUNK, settle: float = SETTLE_SECONDS):
        self.source = source or kek_source()
        self.store = key_store()
        self.chunk = max(1, chunk)
        self.settle = settle
        self.began = False
        self.rewrapped = 0

    def begin(self) -> int:
        """Step 1; returns how many keys are to be re-wrapped. The KEK records (`KekRecord`) get
        the old KEK (if it had none) and the new one, made now."""
        KekRecord.objects.observe(self.source.keys().current_id, origin=self.source.origin)
        self.began = self.source.begin_rotation()
        if self.began:
            KekRecord.objects.observe(self.source.keys().current_id, origin=self.source.origin)
        if self.began and self.settle:
            time.sleep(self.settle)
        return self.store.not_current()

    def rewrap(self) -> Iterator[int]:
        """Step 2: yields how many keys each chunk re-wrapped."""
        for _ in range(MAX_PASSES):
            this_pass = 0
            for count in rewrap_keys(self.chunk):
                this_pass += count
                yield count
            self.rewrapped += this_pass
            if not this_pass:
                return

    def finish(self) -> RotationResult:
        needed = self.store.kek_ids()
        current = self.source.keys().current_id
        retirement = self.source.retire_unneeded(needed)
        KekRecord.objects.mark_destroyed(retirement.destroyed)  # after the key file no longer holds them
        return RotationResult(
            began=self.began,
            current=current,
            rewrapped=self.rewrapped,
            left=self.store.not_current(),
            retirement=retirement,
        )

    def run(self) -> RotationResult:
        self.begin()
        for _ in self.rewrap():
            pass
        return self.finish()


# --- the scheduled rotation --------------------------------------------------------------------------
ROTATION_LEASE = "kek-rotation"
#: A rotation renews its lease after every chunk; a crashed holder's lapses after this.
LEASE_TTL = timedelta(minutes=10)
#: How often beat asks whether a rotation is due (config.settings: the "kek-rotation" entry).
ROTATION_CHECK = timedelta(minutes=10)
#: Promised beyond a KEK's due instant: the check's period, a rotation's own time and a lapsed lease.
ROTATION_ALLOWANCE = timedelta(hours=1)

#: What `kek_schedule().state` can be.
SCHEDULED = "scheduled"  # rotated every KEK_ROTATION_HOURS by the beat job
OFF = "off"  # KEK_ROTATION_HOURS is 0
OPERATOR = "operator"  # MEMORY_KEK or RETIRED_KEKS: the operator rotates and destroys them


@dataclass(frozen=True)
class KekSchedule:
    """The KEKs that exist now and when they are destroyed."""

    state: str
    hours: int
    current: str
    live: tuple[str, ...]  # every configured KEK id (current first): each may have wrapped a key
    created_at: datetime

    @property
    def due_at(self) -> datetime | None:
        """When the current KEK is due to be replaced (None unless scheduled)."""
        return self.created_at + timedelta(hours=self.hours) if self.state == SCHEDULED else None

    def destroyed_by(self, now: datetime) -> datetime | None:
        """The latest instant by which every KEK that exists at `now` is destroyed: the current
        one's due instant (or now, if overdue) plus ROTATION_ALLOWANCE. A retired KEK still held
        goes before: a rotation under way destroys it when it finishes. None unless scheduled."""
        due = self.due_at
        return None if due is None else max(due, now) + ROTATION_ALLOWANCE


def kek_schedule() -> KekSchedule:
    source = kek_source()
    current = source.keys().current_id
    record = KekRecord.objects.observe(current, origin=source.origin)
    configured = source.configured()
    hours = int(settings.KEK_ROTATION_HOURS)
    if hours <= 0:
        state = OFF
    elif not source.makes_keys or any(c.origin != source.origin for c in configured):
        state = OPERATOR  # a key the operator configured is destroyed when the operator removes it
    else:
        state = SCHEDULED
    live = (current, *sorted({c.id for c in configured} - {current}))
    return KekSchedule(state=state, hours=hours, current=current, live=live, created_at=record.created_at)


def _promised_by_receipts(schedule: KekSchedule) -> datetime | None:
    """When the current KEK must be gone by what receipts already promised: the earliest
    `residualUntil` of an erase made while it existed, less the allowance the promise included.
    Equal to its due instant unless KEK_ROTATION_HOURS was raised since (a longer period must not
    carry a KEK past an instant a receipt already named). An erase made under this KEK promised at
    least its creation + KEK_ROTATION_HOURS + the allowance; one made under the KEK before it, no
    later than this one's creation + the allowance (that KEK was rotated once due, or earlier by
    hand: then this merely rotates early). Selected by that, not by `purged_at`: the first KEK's
    record is made at the first erase, a moment after that erase's `purged_at`."""
    earliest = DeletionReceipt.objects.filter(residual_until__gt=schedule.created_at + ROTATION_ALLOWANCE).aggregate(
        earliest=Min("residual_until")
    )["earliest"]
    return None if earliest is None else earliest - ROTATION_ALLOWANCE


def scheduled_rotation(
    *, now: datetime | None = None, settle: float = SETTLE_SECONDS, chunk: int = CHUNK
) -> dict[str, Any]:
    """The beat job: rotate the KEK when the current one is KEK_ROTATION_HOURS old, or finish a
    rotation an earlier run left (a crash, a lapsed lease). One run at a time across every worker
    (`KekRotationLease`, renewed after each chunk); a run that loses its lease stops before it
    destroys anything. The retired KEK is destroyed only by `finish()`, once no stored key names
    it, so a crash at any step loses nothing (tests/erasure/test_kek_rotation.py)."""
    schedule = kek_schedule()
    summary: dict[str, Any] = {
        "state": schedule.state,
        "currentKek": schedule.current,
        "recordedDestroyed": KekRecord.objects.reconcile(schedule.live),
    }
    if schedule.state != SCHEDULED:
        return {**summary, "rotation": "not_scheduled"}
    holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    if not KekRotationLease.objects.claim(ROTATION_LEASE, holder, ttl=LEASE_TTL):
        return {**summary, "rotation": "busy"}
    try:
        now = now or timezone.now()
        unfinished = len(schedule.live) > 1 or key_store().not_current() > 0
        due = min(schedule.due_at, _promised_by_receipts(schedule) or schedule.due_at)
        if not unfinished and due > now:
            return {**summary, "rotation": "not_due", "dueAt": iso(due)}
        rotation = KekRotation(chunk=chunk, settle=settle)
        rotation.begin()
        for _ in rotation.rewrap():
            if not KekRotationLease.objects.claim(ROTATION_LEASE, holder, ttl=LEASE_TTL):
                return {**summary, "rotation": "lease_lost", "rewrapped": rotation.rewrapped}
        result = rotation.finish()
        return {**summary, "rotation": "rotated" if result.began else "resumed", **result.as_dict()}
    finally:
        KekRotationLease.objects.release(ROTATION_LEASE, holder)
