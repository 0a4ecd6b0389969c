"""Previews of bulk erases (SPEC §8.1 "Preview"): the manifest an erase would write, before it runs.

Every bulk erase is planned here first, and the erase runs the plan: the same version ids, in the
same batches (one `erase_memories` call, hence one receipt, per batch), so the preview and the
receipts that follow cannot disagree. A plan reads ids and counts only, never content, and writes
nothing. `manifest()` answers what the receipts' manifests will add up to:

- `artifacts`: memory_version, citation, memory_embedding, access_log_entry, access_log_reference
  (the same classes and counts as a receipt's `manifest.artifacts`, summed over its receipts);
- `memories`: how many of the erased versions are current (the others are earlier versions);
- `members` and `receipts`: whose memories, and how many receipts the erase writes;
- `assistantMemories` where assistant memories are erased too (the admin's erase).

Lowering retention (`plan_retention`) adds what moves to Expired and back, and splits the erase
into the agent memories past retention and the expired assistant memories past their grace.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, QuerySet
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac

from core.chunks import CHUNK
from core.errors import ApiError
from core.timestamps import iso
from governance.actions import settings_json, update_settings
from governance.audit import Actor, audit
from governance.audit import actor_label as label_of
from governance.models import AskHistorySettings, Member, Workspace
from memoryapp.access_log import ENTRY_ARTIFACT, REFERENCE_ARTIFACT, strike_counts_in_order
from memoryapp.models import MemoryVersion, assistant_q, current_q
from retention.erasure import count_remaining, erase_memories
from retention.lifecycle import EXPIRY_ORDER, RetentionScope, apply_retention, members_with, retention_scope
from retention.models import DeletionReceipt, Operation

PREVIEW_OUTDATED = "PREVIEW_OUTDATED"
ARTIFACTS = ("memory_version", "citation", "memory_embedding", ENTRY_ARTIFACT, REFERENCE_ARTIFACT)


def id_chunks(ids: Sequence[int]) -> list[Sequence[int]]:
    size = 900 if connection.vendor == "sqlite" else 10_000  # SQLite's bound-parameter cap
    return [ids[start : start + size] for start in range(0, len(ids), size)]


def _empty() -> dict[str, int]:
    return dict.fromkeys(ARTIFACTS, 0)


@dataclass
class Batch:
    """One `erase_memories` call: one member's version ids, one receipt."""

    member_id: int
    ids: list[int]


@dataclass
class ErasePlan:
    operation: str
    workspace_id: int
    batches: list[Batch] = field(default_factory=list)
    filters: dict[str, Any] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        return {"operation": self.operation, **counts_of(self.batches), "filters": self.filters}


def plan_token(*plans: ErasePlan) -> str:
    """A fingerprint of exactly what the plans erase (operation, workspace, every batch's ids),
    carried from the preview to the confirmation. Keyed with SECRET_KEY: a bare hash of the ids
    would let the owner test guesses of another member's memory ids against it."""
    body = json.dumps(
        [[str(plan.operation), plan.workspace_id, [[b.member_id, b.ids] for b in plan.batches]] for plan in plans],
        separators=(",", ":"),
    )
    return salted_hmac("retention.previews.plan", body, algorithm="sha256").hexdigest()


def check_confirmed(plan: ErasePlan, confirmed: str | None) -> None:
    """`confirmed`: the token of the preview the person confirmed (None: no preview to hold the
    erase to). If what the plan erases now is not what was previewed, nothing is erased and the
    new preview is refused back (409), so an erase is never larger or other than the one shown."""
    if confirmed is not None and not constant_time_compare(str(confirmed), plan_token(plan)):
        raise ApiError(
            409,
            PREVIEW_OUTDATED,
            "The memories this erase covers changed since the preview; check the new preview and confirm again.",
            {"manifest": plan.manifest(), "planToken": plan_token(plan)},
        )


def execute(plan: ErasePlan, *, actor: Actor, actor_label: str) -> list[DeletionReceipt]:
    """Erase what the plan lists, batch by batch (call inside a transaction for all-or-nothing,
    after taking the lock of every member the plan may cover — `Member.objects.lock()`, in id
    order — and planning under them: a remember superseding a listed version would otherwise
    leave its new version behind). A batch a concurrent eraser emptied first writes no receipt."""
    receipts = []
    for batch in plan.batches:
        receipt = erase_memories(
            batch.ids,
            operation=plan.operation,
            workspace_id=plan.workspace_id,
            member_id=batch.member_id,
            actor=actor,
            actor_label=actor_label,
            filters=plan.filters,
        )
        if receipt is not None:
            receipts.append(receipt)
    return receipts


def counts_of(batches: Sequence[Batch]) -> dict[str, Any]:
    """The artifact counts the erase of these batches will write, in this order, and the counts
    of memories, members and receipts. Reads ids and counts only."""
    artifacts = _empty()
    memories = assistant = 0
    by_member: dict[int, list[list[int]]] = defaultdict(list)
    for batch in batches:
        if batch.ids:
            by_member[batch.member_id].append(batch.ids)
    for member_id, member_batches in by_member.items():
        ids = sorted({pk for ids in member_batches for pk in ids})
        for chunk in id_chunks(ids):
            remaining = count_remaining(chunk)  # the erase's own verification query: the same three tables
            current, current_assistant = _current_counts(chunk)
            for artifact in ("memory_version", "citation", "memory_embedding"):
                artifacts[artifact] += remaining[artifact]
            memories += current
            assistant += current_assistant
        for artifact, count in strike_counts_in_order(member_batches, member_id=member_id).items():
            artifacts[artifact] += count
    counts: dict[str, Any] = {
        "artifacts": artifacts,
        "memories": memories,
        "members": len(by_member),
        "receipts": sum(len(b) for b in by_member.values()),
    }
    if assistant:
        counts["assistantMemories"] = assistant
    return counts


def _current_counts(ids: Sequence[int]) -> tuple[int, int]:
    """How many of these versions are current, and how many of those are assistant memories."""
    versions = MemoryVersion.objects.all()
    if connection.vendor == "postgresql":
        # one array parameter rather than one per id (a workspace's erase may name 100,000 versions)
        versions = versions.extra(where=[f"{MemoryVersion._meta.db_table}.id = ANY(%s)"], params=[list(ids)])
    else:
        versions = versions.filter(pk__in=ids)
    counts = versions.aggregate(
        current=Count("id", filter=current_q()), assistant=Count("id", filter=current_q() & assistant_q())
    )
    return counts["current"], counts["assistant"]


def _by_member(queryset: QuerySet[MemoryVersion]) -> list[Batch]:
    grouped: dict[int, list[int]] = defaultdict(list)
    for pk, member_id in queryset.order_by("member_id", "pk").values_list("pk", "member_id"):
        grouped[member_id].append(pk)
    return [Batch(member_id, ids) for member_id, ids in sorted(grouped.items())]


# --- the member's and the owner's "Delete all" ------------------------------------------------------
def own_agent_memories(member: Member) -> QuerySet[MemoryVersion]:
    return MemoryVersion.objects.filter(member=member, workspace_id=member.workspace_id).agent()


def plan_member_delete_all(member: Member) -> ErasePlan:
    ids = list(own_agent_memories(member).order_by("pk").values_list("pk", flat=True))
    return ErasePlan(
        Operation.MEMBER_DELETE,
        member.workspace_id,
        [Batch(member.pk, ids)] if ids else [],
        {"scope": "all own agent memories"},
    )


def plan_owner_bulk_delete(workspace: Workspace) -> ErasePlan:
    """One receipt per member, so each member finds it among their own receipts."""
    queryset = MemoryVersion.objects.filter(workspace=workspace).agent()
    return ErasePlan(
        Operation.OWNER_BULK_DELETE,
        workspace.pk,
        _by_member(queryset),
        {"scope": "every agent memory in the workspace"},
    )


def plan_admin_erase(member: Member, reason: str = "") -> ErasePlan:
    """Every memory of the member, agent and assistant alike."""
    ids = list(MemoryVersion.objects.filter(member=member).order_by("pk").values_list("pk", flat=True))
    return ErasePlan(
        Operation.ADMIN_ERASE,
        member.workspace_id,
        [Batch(member.pk, ids)] if ids else [],
        {"member": member.pk, "reason": reason},
    )


def erase_member_memories(member: Member, *, actor: Actor, reason: str = "") -> int:
    """A platform admin erases every memory of one member (with a receipt and an audit event),
    planned and erased under the member's lock (memoryapp.actions.lock_member's order)."""
    with transaction.atomic():
        Member.objects.filter(pk=member.pk).lock()
        receipts = execute(plan_admin_erase(member, reason), actor=actor, actor_label=label_of(actor))
        versions = sum(receipt.versions_erased for receipt in receipts)
        audit(
            "memories.admin_erased",
            workspace=member.workspace,
            actor=actor,
            target=f"member #{member.pk}",
            changes={"versions": versions},
            reason=reason,
        )
    return versions


def preview_member_erase(member: Member, *, actor: Actor) -> dict[str, Any]:
    """The admin's confirmation page: the manifest, and an audit event that it was shown (the
    one write a preview makes; counts only, no reason yet)."""
    manifest = plan_admin_erase(member).manifest()
    audit(
        "memories.admin_erase_previewed",
        workspace=member.workspace,
        actor=actor,
        target=f"member #{member.pk}",
        changes={"artifacts": manifest["artifacts"], "memories": manifest["memories"]},
    )
    return manifest


# --- lowering (or raising) retention ----------------------------------------------------------------
def _sweep_batches(queryset: QuerySet[MemoryVersion], chunk: int) -> list[Batch]:
    """The batches `lifecycle._erase_expired` erases: per member, oldest first, `chunk` at a time."""
    batches = []
    for member_id in members_with(queryset):
        ids = list(queryset.filter(member_id=member_id).order_by(*EXPIRY_ORDER).values_list("pk", flat=True))
        batches.extend(Batch(member_id, ids[start : start + chunk]) for start in range(0, len(ids), chunk))
    return batches


@dataclass
class RetentionPlan:
    workspace_id: int
    days: int
    grace: int
    now: datetime
    previous_days: int
    previous_grace: int
    expiry: ErasePlan
    grace_purge: ErasePlan
    assistant_expired: int
    assistant_restored: int

    @property
    def token(self) -> str:
        return plan_token(self.grace_purge, self.expiry)

    @property
    def erases(self) -> bool:
        return bool(self.expiry.batches or self.grace_purge.batches)

    @property
    def changes_anything(self) -> bool:
        return self.erases or bool(self.assistant_expired or self.assistant_restored)

    def manifest(self) -> dict[str, Any]:
        # The grace purge runs first, then the expiry erase: an access entry listing memories of
        # both is struck by the first and erased by the second, so the access log is counted
        # over both in that order (the per-erase parts below count the memory tables only).
        total = counts_of(self.grace_purge.batches + self.expiry.batches)
        expiry, purge = counts_of(self.expiry.batches), counts_of(self.grace_purge.batches)
        for part in (expiry, purge):
            for artifact in (ENTRY_ARTIFACT, REFERENCE_ARTIFACT):
                part["artifacts"].pop(artifact)
        return {
            "operation": "retention_change",
            "asOf": iso(self.now),
            "agentMemoryRetentionDays": [self.previous_days, self.days],
            "expiredGraceDays": [self.previous_grace, self.grace],
            "artifacts": total["artifacts"],
            "memories": total["memories"],
            **({"assistantMemories": total["assistantMemories"]} if "assistantMemories" in total else {}),
            "members": total["members"],
            "receipts": total["receipts"],
            "agentMemories": {
                "memories": expiry["memories"],
                "versions": expiry["artifacts"]["memory_version"],
                "members": expiry["members"],
            },
            "expiredAssistantMemoriesErased": purge["artifacts"]["memory_version"],
            "assistantMemoriesToExpired": self.assistant_expired,
            "assistantMemoriesRestored": self.assistant_restored,
            "erases": {
                Operation.EXPIRY.value: {**expiry, "filters": self.expiry.filters},
                Operation.GRACE_PURGE.value: {**purge, "filters": self.grace_purge.filters},
            },
        }


def plan_retention(
    ask_history: AskHistorySettings, *, days: int, grace: int, now: datetime, chunk: int = CHUNK
) -> RetentionPlan:
    """What `lifecycle.apply_retention(…, days, grace, now, chunk)` would do to the workspace."""
    scope: RetentionScope = retention_scope(ask_history.workspace_id, days, grace, now)
    return RetentionPlan(
        workspace_id=ask_history.workspace_id,
        days=days,
        grace=grace,
        now=now,
        previous_days=ask_history.agent_memory_retention_days,
        previous_grace=ask_history.expired_grace_days,
        expiry=ErasePlan(
            Operation.EXPIRY,
            ask_history.workspace_id,
            _sweep_batches(scope.agent_expired, chunk),
            scope.expiry_filters(days),
        ),
        grace_purge=ErasePlan(
            Operation.GRACE_PURGE,
            ask_history.workspace_id,
            _sweep_batches(scope.grace_due, chunk),
            scope.grace_filters(days, grace),
        ),
        # the grace purge runs first: what it erases does not also move to Expired
        assistant_expired=scope.assistant_to_expire.within_grace(days, grace, at=now).count(),
        assistant_restored=scope.assistant_to_restore.count(),
    )


# --- the settings change: preview, then save and apply ----------------------------------------------
def _plan_for(ask_history: AskHistorySettings, changes: dict[str, Any], now: datetime) -> RetentionPlan:
    return plan_retention(
        ask_history,
        days=int(changes.get("agentMemoryRetentionDays", ask_history.agent_memory_retention_days)),
        grace=int(changes.get("expiredGraceDays", ask_history.expired_grace_days)),
        now=now,
    )


def preview_summary(manifest: dict[str, Any]) -> dict[str, int]:
    """The numbers a person confirms on the settings page; the save refuses if they moved."""
    return {
        "agentMemories": manifest["agentMemories"]["memories"],
        "agentVersions": manifest["agentMemories"]["versions"],
        "assistantErased": manifest["expiredAssistantMemoriesErased"],
        "assistantToExpired": manifest["assistantMemoriesToExpired"],
        "assistantRestored": manifest["assistantMemoriesRestored"],
    }


def save_settings_and_apply_retention(
    workspace: Workspace,
    changes: dict[str, Any],
    *,
    actor: Actor,
    dry_run: bool = False,
    confirmed: dict[str, int] | None = None,
    confirmed_plan: str | None = None,
) -> dict[str, Any]:
    """Save the ask-history settings and apply a changed retention at once (retroactive, SPEC §8):
    what the new setting erases is erased now, with receipts, and assistant memories move to
    Expired (or back). `dry_run` answers the settings it would save and the manifest, and writes
    nothing. `confirmed` (the page's confirmation step) holds the numbers the person saw and
    `confirmed_plan` the preview's plan token: if either moved meanwhile (the same counts of other
    memories move the token), nothing is saved and the new preview is refused back (409)."""
    now = timezone.now()
    ask_history = AskHistorySettings.objects.get(workspace=workspace)
    plan = _plan_for(ask_history, changes, now)
    manifest = plan.manifest()
    if dry_run:
        return {
            "dryRun": True,
            "settings": settings_json(ask_history.with_api_changes(changes)),
            "manifest": manifest,
            "planToken": plan.token,
        }
    moved = confirmed is not None and confirmed != preview_summary(manifest)
    if moved or (confirmed_plan is not None and not constant_time_compare(str(confirmed_plan), plan.token)):
        raise ApiError(
            409,
            PREVIEW_OUTDATED,
            "The memories this change erases changed since the preview; check the new preview and confirm again.",
            {"manifest": manifest, "planToken": plan.token},
        )
    saved = update_settings(workspace, changes, actor=actor)
    applied = None
    retention_changed = any(name in changes for name in AskHistorySettings.RETENTION_API_FIELDS) and (
        plan.days,
        plan.grace,
    ) != (plan.previous_days, plan.previous_grace)
    if retention_changed:
        applied = apply_retention(
            workspace.pk, plan.days, plan.grace, now, actor_label=f"{label_of(actor)} (retention setting changed)"
        )
    return {"settings": settings_json(saved), "applied": applied, "manifest": manifest if retention_changed else None}


def save_settings_or_ask_confirmation(
    workspace: Workspace,
    changes: dict[str, Any],
    *,
    actor: Actor,
    confirmed: dict[str, int] | None,
    confirmed_plan: str | None,
) -> dict[str, Any]:
    """The settings page's rule (SPEC §8.1 preview): a change not yet confirmed that would erase
    or move any memory saves nothing and answers `{"needsConfirmation": True, "manifest",
    "planToken"}` for the person to confirm; a change that moves nothing, or a confirmed one
    (`confirmed`: the numbers they saw, `confirmed_plan`: the preview's token), is saved and
    applied (`save_settings_and_apply_retention`; 409 `PREVIEW_OUTDATED` if what it moves changed since)."""
    if confirmed is None:
        preview = save_settings_and_apply_retention(workspace, changes, actor=actor, dry_run=True)
        if any(preview_summary(preview["manifest"]).values()):
            return {"needsConfirmation": True, "manifest": preview["manifest"], "planToken": preview["planToken"]}
        confirmed_plan = None
    return {
        "needsConfirmation": False,
        **save_settings_and_apply_retention(
            workspace, changes, actor=actor, confirmed=confirmed, confirmed_plan=confirmed_plan
        ),
    }
