"""Retention and the periodic jobs of SPEC §8: expiry sweep, cascade sweep, grace purge.

Expiry is computed on read (`MemoryVersion.objects.live`), so nothing here decides what
a reader sees; these jobs only make the stores catch up with it:

- agent memories past `agentMemoryRetentionDays` are erased (receipt "expiry");
- assistant memories past it move to `expired` (kept for reactivation), and back to `active`
  if a longer retention un-expires them; `expiredGraceDays` after their expiry they are erased
  (receipt "grace_purge");
- memories depending on something deleted are marked unreachable and erased (receipts per cause).

Every job is chunked (one transaction per chunk), idempotent, and safe with two workers running it
at once: erasure goes through `retention.erasure.erase_in_chunks` (claims with SKIP LOCKED), and
state changes are conditional UPDATEs that re-check their condition.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from core.chunks import CHUNK, run_in_chunks
from credits.models import UsageRecord
from governance.models import AskHistorySettings, AuditEvent, Collection, Member, Passage, Workspace
from memoryapp import access_log, ratelimit
from memoryapp.models import (
    ASSISTANT_NAMESPACE,
    AccessEntry,
    Citation,
    MemoryEmbedding,
    MemoryState,
    MemoryVersion,
    RateLimitSlot,
    assistant_q,
    expiry_expression,
    grace_cutoff,
    past_retention_q,
    retention_cutoff,
    unreachable_q,
)
from retention import cascades
from retention.erasure import Tally, erase_in_chunks, reclaim_erased_space, truncate_wals
from retention.models import DeletionReceipt, Operation

SYSTEM_ACTOR = "system: retention"
EXPIRY_ORDER = ("retention_anchor", "pk")  # oldest first: the order of the sweeps' chunks


def _workspace_settings() -> list[tuple[int, int, int]]:
    return list(
        AskHistorySettings.objects.order_by("workspace_id").values_list(
            "workspace_id", "agent_memory_retention_days", "expired_grace_days"
        )
    )


def members_with(queryset: QuerySet[MemoryVersion]) -> list[int]:
    return sorted(queryset.order_by().values_list("member_id", flat=True).distinct())


def _update_in_chunks(queryset: QuerySet[MemoryVersion], chunk: int, **changes: Any) -> int:
    """A conditional UPDATE in bounded chunks: the ids are picked, then updated only where the
    condition still holds, so a concurrent run or a concurrent reactivation is never overridden."""

    def step() -> tuple[int, int]:
        ids = list(queryset.order_by("pk").values_list("pk", flat=True)[:chunk])
        return len(ids), queryset.filter(pk__in=ids).update(**changes) if ids else 0

    return run_in_chunks(step, chunk=chunk)


def _erase_expired(
    due: QuerySet[MemoryVersion],
    operation: str,
    workspace_id: int,
    days: int,
    chunk: int,
    filters: dict[str, Any],
    *,
    actor_label: str = SYSTEM_ACTOR,
) -> Tally:
    """Erase what `due` selects in one workspace, one member at a time (a receipt per member and
    chunk), oldest first; the receipts' unreachable time is the computed expiry."""
    erased = Tally()
    for member_id in members_with(due):
        erased.add(
            erase_in_chunks(
                due.filter(member_id=member_id),
                operation=operation,
                workspace_id=workspace_id,
                member_id=member_id,
                actor_label=actor_label,
                filters=filters,
                chunk=chunk,
                expired_after_days=days,
                order_by=EXPIRY_ORDER,
            )
        )
    return erased


# --- expiry -----------------------------------------------------------------------------------
@dataclass
class RetentionScope:
    """What one workspace's retention selects at `now`: the querysets the sweeps act on, and the
    ones the preview (`retention.previews`) counts, so the two cannot disagree."""

    agent_expired: QuerySet[MemoryVersion]  # agent memories past retention: erased (receipt "expiry")
    assistant_to_expire: QuerySet[MemoryVersion]  # active assistant memories past retention
    assistant_to_restore: QuerySet[MemoryVersion]  # expired ones a longer retention un-expires
    grace_due: QuerySet[MemoryVersion]  # assistant memories past retention + grace: erased (receipt "grace_purge")
    cutoff: datetime
    grace_cutoff: datetime

    def expiry_filters(self, days: int) -> dict[str, Any]:
        return {
            "rule": "agentMemoryRetentionDays",
            "retentionDays": days,
            "createdBefore": self.cutoff.isoformat(),
            "namespaces": "every namespace except assistant",
        }

    def grace_filters(self, days: int, grace: int) -> dict[str, Any]:
        return {
            "rule": "agentMemoryRetentionDays + expiredGraceDays",
            "retentionDays": days,
            "expiredGraceDays": grace,
            "namespace": ASSISTANT_NAMESPACE,
            "lastUpdatedBefore": self.grace_cutoff.isoformat(),
        }


def retention_scope(workspace_id: int, days: int, grace: int, now: datetime) -> RetentionScope:
    in_workspace = MemoryVersion.objects.filter(workspace_id=workspace_id).reachable()
    assistant = in_workspace.assistant()
    return RetentionScope(
        agent_expired=in_workspace.past_retention(days, at=now).agent(),
        assistant_to_expire=assistant.filter(state=MemoryState.ACTIVE).past_retention(days, at=now),
        # Retention is retroactive both ways: a longer setting brings back what it un-expires.
        assistant_to_restore=assistant.filter(state=MemoryState.EXPIRED).within_retention(days, at=now),
        grace_due=assistant.past_grace(days, grace, at=now),
        cutoff=retention_cutoff(days, now),
        grace_cutoff=grace_cutoff(days, grace, now),
    )


def _expire_assistant(scope: RetentionScope, days: int, chunk: int) -> tuple[int, int]:
    expired = _update_in_chunks(
        scope.assistant_to_expire, chunk, state=MemoryState.EXPIRED, expired_at=expiry_expression(days)
    )
    restored = _update_in_chunks(scope.assistant_to_restore, chunk, state=MemoryState.ACTIVE, expired_at=None)
    return expired, restored


def expiry_sweep(now: datetime | None = None, chunk: int = CHUNK) -> dict[str, int]:
    """Erase expired agent memories; move expired assistant memories to `expired` (and back, when
    a longer retention has un-expired them)."""
    now = now or timezone.now()
    erased, expired, restored = Tally(), 0, 0
    for workspace_id, days, grace in _workspace_settings():
        scope = retention_scope(workspace_id, days, grace, now)
        erased.add(
            _erase_expired(scope.agent_expired, Operation.EXPIRY, workspace_id, days, chunk, scope.expiry_filters(days))
        )
        moved, back = _expire_assistant(scope, days, chunk)
        expired += moved
        restored += back
    return {
        "agentVersionsErased": erased.versions,
        "receipts": erased.receipts,
        "assistantExpired": expired,
        "assistantRestored": restored,
        "vacuumed": erased.versions > 0 and reclaim_erased_space(),
    }


def grace_purge(now: datetime | None = None, chunk: int = CHUNK) -> dict[str, int]:
    """Erase assistant memories whose grace period has ended: computed expiry + `expiredGraceDays`
    is past, whether or not the expiry sweep has marked them yet (0 days = at expiry)."""
    now = now or timezone.now()
    erased = Tally()
    for workspace_id, days, grace in _workspace_settings():
        scope = retention_scope(workspace_id, days, grace, now)
        erased.add(
            _erase_expired(
                scope.grace_due, Operation.GRACE_PURGE, workspace_id, days, chunk, scope.grace_filters(days, grace)
            )
        )
    return {
        "assistantVersionsErased": erased.versions,
        "receipts": erased.receipts,
        "vacuumed": erased.versions > 0 and reclaim_erased_space(),
    }


def apply_retention(
    workspace_id: int, days: int, grace: int, now: datetime, *, actor_label: str = SYSTEM_ACTOR, chunk: int = CHUNK
) -> dict[str, int]:
    """One workspace's retention, at once (a changed setting): the grace purge first, so what it
    erases is not also counted as moved to Expired, then the expiry erase and the assistant
    moves. What `retention.previews.plan_retention` counts for the same `now` and `chunk`."""
    scope = retention_scope(workspace_id, days, grace, now)
    purged = _erase_expired(
        scope.grace_due,
        Operation.GRACE_PURGE,
        workspace_id,
        days,
        chunk,
        scope.grace_filters(days, grace),
        actor_label=actor_label,
    )
    erased = _erase_expired(
        scope.agent_expired,
        Operation.EXPIRY,
        workspace_id,
        days,
        chunk,
        scope.expiry_filters(days),
        actor_label=actor_label,
    )
    expired, restored = _expire_assistant(scope, days, chunk)
    versions = purged.versions + erased.versions
    return {
        "agentVersionsErased": erased.versions,
        "assistantVersionsErased": purged.versions,
        "assistantExpired": expired,
        "assistantRestored": restored,
        "receipts": purged.receipts + erased.receipts,
        "vacuumed": versions > 0 and reclaim_erased_space(),
    }


# --- cascades ---------------------------------------------------------------------------------
def orphan_queries() -> dict[str, QuerySet[MemoryVersion]]:
    """Memories whose cause is gone but that were never marked: the cause's transaction raced a
    remember, or the deletion bypassed the actions. Keyed by the cause they are erased under."""
    pending = MemoryVersion.objects.reachable()
    missing_passage = Citation.objects.filter(~Exists(Passage.objects.filter(pk=OuterRef("passage_id"))))
    return {
        Operation.CASCADE_DOCUMENT: pending.filter(pk__in=missing_passage.values("memory_id")),
        Operation.CASCADE_COLLECTION: pending.filter(collection_id__isnull=False).filter(
            ~Exists(Collection.objects.filter(pk=OuterRef("collection_id")))
        ),
        Operation.MEMBER_REMOVAL: pending.filter(member__in=Member.objects.removed()),
        Operation.NON_RETAINING: pending.filter(workspace__retains_history=False),
    }


def cascade_sweep(now: datetime | None = None, chunk: int = CHUNK) -> dict[str, Any]:
    """Mark what a lost on-commit task or a racing write left behind, erase every unreachable
    memory, and drop the rate-limit counters their window (RATE_LIMIT_WINDOW_SECONDS) has let go."""
    now = now or timezone.now()
    marked = {
        str(reason): _update_in_chunks(queryset, chunk, unreachable_at=now, unreachable_reason=reason)
        for reason, queryset in orphan_queries().items()
    }
    erased = cascades.erase_unreachable(actor_label="system: cascade sweep", chunk=chunk)
    old_hits = ratelimit.expired_slots(now)

    def purge_counters() -> tuple[int, int]:
        ids = list(old_hits.order_by("pk").values_list("pk", flat=True)[:chunk])
        return len(ids), RateLimitSlot.objects.filter(pk__in=ids)._raw_delete(RateLimitSlot.objects.db) if ids else 0

    counters = run_in_chunks(purge_counters, chunk=chunk)
    return {
        "marked": marked,
        "versionsErased": erased,
        "rateLimitCountersPurged": counters,
        "vacuumed": erased > 0 and reclaim_erased_space(),
    }


def wal_sweep() -> dict[str, Any]:
    """SQLite: truncate the data's and the key store's WAL, outside any transaction, waiting a
    bounded time for readers. An erase checkpoints without waiting (a reader held open then keeps
    the erased frames in the WAL); this run removes them once the reader is gone (docs/encryption.md)."""
    return {"walsTruncated": truncate_wals()}


# --- the access log (SPEC §8.1) ----------------------------------------------------------------
def access_log_sweep(now: datetime | None = None, chunk: int = CHUNK) -> dict[str, int]:
    """Delete access entries older than ACCESS_LOG_RETENTION_DAYS (read paths already stopped
    showing them), and any left behind by a removed member. Entries hold ids, never content,
    so no receipt is written for their expiry; erasing memories strikes them with a receipt."""
    expired = AccessEntry.objects.past_retention(now)
    removed = AccessEntry.objects.of_removed_members()
    return {
        "accessEntriesExpired": run_in_chunks(lambda: access_log.delete_chunk(expired, chunk), chunk=chunk),
        "accessEntriesOfRemovedMembers": run_in_chunks(lambda: access_log.delete_chunk(removed, chunk), chunk=chunk),
    }


# --- what exists now (the lifecycle matrix's counts, SPEC §8) --------------------------------------
def artifact_counts(workspace: Workspace, *, member: Member | None = None) -> dict[str, int]:
    """How many of each stored artifact class exist now: the workspace's (`member` None, the
    owner's view, with its audit events) or one member's own."""
    versions = MemoryVersion.objects.filter(workspace=workspace)
    receipts = DeletionReceipt.objects.filter(workspace_ref=workspace.pk)
    usage = UsageRecord.objects.filter(workspace=workspace)
    access = AccessEntry.objects.filter(workspace=workspace)
    if member is not None:
        versions = versions.filter(member=member)
        receipts = receipts.filter(member_ref=member.pk)
        usage = usage.filter(member=member)
        access = access.filter(member=member)
    expired = past_retention_q(workspace.ask_history.agent_memory_retention_days)
    summary = versions.aggregate(
        total=Count("pk"),
        unreachable=Count("pk", filter=unreachable_q()),
        expired=Count("pk", filter=~unreachable_q() & (Q(state=MemoryState.EXPIRED) | expired)),
        assistant=Count("pk", filter=assistant_q()),
    )
    counts = {
        "memoryVersions": summary["total"],
        "assistantMemoryVersions": summary["assistant"],
        "expiredAwaitingPurge": summary["expired"],
        "pendingCascadeErasure": summary["unreachable"],  # the API's name (the lifecycle matrix's counts)
        "citations": Citation.objects.filter(memory__in=versions).count(),
        "embeddings": MemoryEmbedding.objects.filter(memory__in=versions).count(),
        "receipts": receipts.count(),
        "usageRecords": usage.count(),
        "accessLogEntries": access.count(),
    }
    if member is None:
        counts["auditEvents"] = AuditEvent.objects.filter(workspace_ref=workspace.pk).count()
    return counts


def counts_for(member: Member) -> tuple[str, dict[str, int]]:
    """The counts `member` may see, and their scope: the workspace's for an owner
    (`ask_history:manage`), their own for anyone else."""
    if member.has_perm("ask_history:manage"):
        return "workspace", artifact_counts(member.workspace)
    return "member", artifact_counts(member.workspace, member=member)
