"""Cascades (SPEC §8): deleting what memories depend on makes them unreachable in the same
transaction, and erases them with receipts in a task started on commit. The cascade sweep
(lifecycle) re-runs `erase_unreachable` for anything a lost task left behind."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from core.chunks import CHUNK
from core.task_queue import queue_task
from memoryapp.models import Citation, MemoryVersion
from retention.erasure import erase_in_chunks
from retention.models import Operation

log = logging.getLogger(__name__)
ERASE_TASK = "retention.tasks.erase_unreachable_task"


def mark_unreachable(queryset: QuerySet[MemoryVersion], reason: str) -> int:
    return queryset.reachable().update(unreachable_at=timezone.now(), unreachable_reason=reason)


def dependents_of_documents(workspace_id: int, document_ids) -> QuerySet[MemoryVersion]:
    cited = Citation.objects.filter(document_id__in=document_ids).values("memory_id")
    return MemoryVersion.objects.filter(workspace_id=workspace_id, pk__in=cited)


def dependents_of_collection(workspace_id: int, collection_id: int, document_ids) -> QuerySet[MemoryVersion]:
    cited = Citation.objects.filter(document_id__in=document_ids).values("memory_id")
    return MemoryVersion.objects.filter(
        Q(workspace_id=workspace_id) & (Q(collection_id=collection_id) | Q(pk__in=cited))
    )


def schedule_erase(workspace_id: int) -> None:
    """Start the erase once the cause is committed; if the broker is down the sweep catches it."""

    def enqueue() -> None:
        if not MemoryVersion.objects.filter(workspace_id=workspace_id).unreachable().exists():
            return  # the cause had no dependents: no task to run
        try:
            queue_task(ERASE_TASK, workspace_id)
        except Exception:  # broker unreachable: the periodic cascade sweep will erase them
            log.warning("cascade erase for workspace %s not queued; the sweep will run it", workspace_id)

    transaction.on_commit(enqueue)


def erase_unreachable(
    workspace_id: int | None = None, *, actor_label: str = "system: cascade", chunk: int = CHUNK
) -> int:
    """Erase every memory marked unreachable, one receipt per (workspace, member, cause) chunk.
    Safe to run twice at once: chunks are claimed with SKIP LOCKED (see `erase_in_chunks`)."""
    base = MemoryVersion.objects.unreachable()
    if workspace_id is not None:
        base = base.filter(workspace_id=workspace_id)
    groups = list(base.order_by().values_list("workspace_id", "member_id", "unreachable_reason").distinct())
    erased = 0
    for ws_id, member_id, reason in groups:
        tally = erase_in_chunks(
            base.filter(workspace_id=ws_id, member_id=member_id, unreachable_reason=reason),
            operation=reason or Operation.CASCADE_DOCUMENT,
            workspace_id=ws_id,
            member_id=member_id,
            actor_label=actor_label,
            filters={"cause": reason or Operation.CASCADE_DOCUMENT},
            chunk=chunk,
        )
        erased += tally.versions
    return erased
