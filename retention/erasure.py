"""`erase_memories` is the one way memories are erased.

It removes every stored artifact of the given memory versions (versions, citation rows,
embeddings; no cache ever holds memory content) and writes a deletion receipt in the same
transaction, verified by re-querying each store. Forget, member and owner deletes, expiry,
grace purge, cascades and admin actions all call it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Min
from django.utils import timezone

from memoryapp.models import Citation, MemoryEmbedding, MemoryVersion
from retention.models import DeletionReceipt

# SQLite caps bound parameters per statement; PostgreSQL is happy with large IN lists.
_IN_CHUNK = 900


def _chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    size = _IN_CHUNK if connection.vendor == "sqlite" else 10_000
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def residual_window(purged_at: datetime) -> dict[str, Any]:
    days = settings.BACKUP_RETENTION_DAYS
    if days <= 0:
        return {"backups": {"retentionDays": 0, "until": None, "statement": "No database backups are configured; nothing remains outside the application."}}
    return {
        "backups": {
            "retentionDays": days,
            "until": (purged_at + timedelta(days=days)).isoformat(),
            "statement": f"Database backups taken before the purge keep these rows until they rotate out, at most {days} days.",
        }
    }


def count_remaining(ids: Sequence[int]) -> dict[str, int]:
    remaining = {"memory_version": 0, "citation": 0, "memory_embedding": 0}
    for chunk in _chunks(list(ids)):
        remaining["memory_version"] += MemoryVersion.objects.filter(pk__in=chunk).count()
        remaining["citation"] += Citation.objects.filter(memory_id__in=chunk).count()
        remaining["memory_embedding"] += MemoryEmbedding.objects.filter(memory_id__in=chunk).count()
    return remaining


def verify(ids: Sequence[int]) -> dict[str, Any]:
    remaining = count_remaining(ids)
    # Caches are listed so the check is explicit: the application never caches memory content.
    remaining["cache"] = 0
    return {"checkedAt": timezone.now().isoformat(), "remaining": remaining, "clean": not any(remaining.values())}


def erase_memories(
    version_ids: Sequence[int],
    *,
    operation: str,
    workspace_id: int,
    actor_label: str,
    actor=None,
    member_id: int | None = None,
    filters: dict[str, Any] | None = None,
    requested_at: datetime | None = None,
    dedupe_key: str | None = None,
) -> DeletionReceipt | None:
    """Erase these memory versions with a receipt. Returns None when `dedupe_key` was already
    used (another worker erased the same work) — the caller then has nothing to do."""
    requested_at = requested_at or timezone.now()
    ids = sorted(set(int(i) for i in version_ids))
    try:
        with transaction.atomic():
            if dedupe_key and DeletionReceipt.objects.filter(dedupe_key=dedupe_key).exists():
                return None
            # Lock and re-read: a concurrent eraser may have taken some of these already.
            present: list[int] = []
            unreachable_at = None
            for chunk in _chunks(ids):
                rows = MemoryVersion.objects.select_for_update().filter(pk__in=chunk)
                present.extend(rows.values_list("pk", flat=True))
                earliest = rows.aggregate(at=Min("unreachable_at"))["at"]
                if earliest and (unreachable_at is None or earliest < unreachable_at):
                    unreachable_at = earliest
            if not present:
                return None  # someone else erased them first: no empty or double receipt
            counts = {"memory_version": 0, "citation": 0, "memory_embedding": 0}
            for chunk in _chunks(present):
                counts["citation"] += Citation.objects.filter(memory_id__in=chunk)._raw_delete(connection.alias)
                counts["memory_embedding"] += MemoryEmbedding.objects.filter(memory_id__in=chunk)._raw_delete(connection.alias)
                counts["memory_version"] += MemoryVersion.objects.filter(pk__in=chunk)._raw_delete(connection.alias)
            purged_at = timezone.now()
            return DeletionReceipt.objects.create(
                operation=operation,
                workspace_ref=workspace_id,
                member_ref=member_id,
                actor=actor,
                actor_label=actor_label,
                manifest={"artifacts": counts, "filters": filters or {}, "requestedIds": len(ids)},
                memory_version_ids=present,
                requested_at=requested_at,
                unreachable_at=unreachable_at or purged_at,
                purged_at=purged_at,
                residual=residual_window(purged_at),
                verification=verify(present),
                dedupe_key=dedupe_key,
            )
    except IntegrityError:
        if dedupe_key and DeletionReceipt.objects.filter(dedupe_key=dedupe_key).exists():
            return None
        raise
