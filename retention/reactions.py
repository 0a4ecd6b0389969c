"""Retention's reactions to governance's signals (SPEC §8 cascades), connected in
`RetentionConfig.ready()`: what depends on a removed member, a deleted document or collection, a
non-retaining or deleted workspace becomes unreachable in the cause's own transaction, and is
erased with receipts by a task queued on commit (the cascade sweep catches what a lost task
leaves behind)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from governance import signals
from governance.audit import Actor, actor_label
from governance.models import Member, Workspace
from memoryapp import consolidation
from memoryapp.models import MemoryVersion
from retention import cascades, receipt_names
from retention.models import Operation


def erase_memories_of_removed_member(sender: type, *, member: Member, **kwargs: Any) -> None:
    cascades.mark_unreachable(MemoryVersion.objects.filter(member=member), Operation.MEMBER_REMOVAL)
    cascades.schedule_erase(member.workspace_id)


def forget_names_of_ended_membership(sender: type, *, member: Member, **kwargs: Any) -> None:
    """The membership's name key goes with it (on commit: a removal rolled back keeps it): its
    receipts' namespace and key digests resolve for nobody from then on (docs/receipts.md)."""
    workspace_id, ended = member.workspace_id, [(member.pk, member.period)]
    transaction.on_commit(lambda: receipt_names.destroy_for_members(workspace_id, ended))


def forget_names_of_deleted_workspace(sender: type, *, workspace: Workspace, **kwargs: Any) -> None:
    workspace_id, ended = workspace.pk, list(workspace.members.values_list("pk", "period"))  # the row is gone at commit
    transaction.on_commit(lambda: receipt_names.destroy_for_members(workspace_id, ended, workspace=True))


def discard_turns_of_removed_member(sender: type, *, member: Member, **kwargs: Any) -> None:
    """The consolidation input of the member's waiting turns goes with the membership (SPEC §8:
    an artifact class that depends on the membership)."""
    consolidation.discard_turns_of(member)


def erase_memories_of_deleted_member(sender: type, *, member: Member, actor: Actor, **kwargs: Any) -> int:
    """Now, not on commit: the member row (and every memory version cascading from it) goes with
    its user right after; the receipts, which hold no content, outlive both."""
    with transaction.atomic():
        cascades.mark_unreachable(MemoryVersion.objects.filter(member=member), Operation.MEMBER_REMOVAL)
    return cascades.erase_unreachable(member.workspace_id, actor_label=actor_label(actor))


def erase_memories_depending_on_documents(
    sender: type, *, workspace_id: int, document_ids: list[int], collection_id: int | None = None, **kwargs: Any
) -> None:
    if collection_id is None:
        dependents, cause = cascades.dependents_of_documents(workspace_id, document_ids), Operation.CASCADE_DOCUMENT
    else:
        dependents, cause = (
            cascades.dependents_of_collection(workspace_id, collection_id, document_ids),
            Operation.CASCADE_COLLECTION,
        )
    cascades.mark_unreachable(dependents, cause)
    cascades.schedule_erase(workspace_id)


def erase_memories_of_non_retaining_workspace(sender: type, *, workspace: Workspace, **kwargs: Any) -> None:
    cascades.mark_unreachable(MemoryVersion.objects.filter(workspace=workspace), Operation.NON_RETAINING)
    cascades.schedule_erase(workspace.pk)


def erase_memories_of_deleted_workspace(sender: type, *, workspace: Workspace, actor: Actor, **kwargs: Any) -> int:
    """Now, not on commit: the workspace's rows go right after, and its receipts outlive it."""
    with transaction.atomic():
        cascades.mark_unreachable(MemoryVersion.objects.filter(workspace=workspace), Operation.WORKSPACE_DELETION)
    return cascades.erase_unreachable(workspace.pk, actor_label=actor_label(actor))


def connect() -> None:
    signals.member_removed.connect(erase_memories_of_removed_member, dispatch_uid="retention.member_removed")
    signals.member_removed.connect(discard_turns_of_removed_member, dispatch_uid="retention.member_removed.turns")
    signals.member_deleting.connect(erase_memories_of_deleted_member, dispatch_uid="retention.member_deleting")
    signals.member_removed.connect(forget_names_of_ended_membership, dispatch_uid="retention.member_removed.names")
    signals.member_deleting.connect(forget_names_of_ended_membership, dispatch_uid="retention.member_deleting.names")
    signals.workspace_deleting.connect(
        forget_names_of_deleted_workspace, dispatch_uid="retention.workspace_deleting.names"
    )
    signals.documents_deleting.connect(
        erase_memories_depending_on_documents, dispatch_uid="retention.documents_deleting"
    )
    signals.history_stopped.connect(erase_memories_of_non_retaining_workspace, dispatch_uid="retention.history_stopped")
    signals.workspace_deleting.connect(erase_memories_of_deleted_workspace, dispatch_uid="retention.workspace_deleting")
