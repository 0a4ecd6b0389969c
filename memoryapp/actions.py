"""Every write to the memory store, and the agent reads, go through these functions.

REST views, MCP tools, pages, admin actions and Celery tasks call them; none re-implements a rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from core.cursors import decode_cursor, encode_cursor
from core.errors import ApiError, memory_not_found, unauthenticated, validation_error
from core.timestamps import iso, parse_instant
from governance.audit import Actor, actor_label, audit
from governance.models import AskHistorySettings, Credential, Member, Passage, Workspace
from memoryapp import gates
from memoryapp.models import MEMORY_KINDS, Citation, MemoryVersion, Source
from memoryapp.ratelimit import Slot, spend_slot
from memoryapp.recall.index import index_entry
from memoryapp.representation import memory_json
from memoryapp.visibility import CURRENT, CheckedCitation, Recheck, filtered_versions, recheck
from retention import previews
from retention.erasure import erase_memories
from retention.models import Operation


@dataclass
class Remembered:
    memory: MemoryVersion
    superseded: int
    json: dict[str, Any]
    slot: Slot | None = None


# --- the member lock ----------------------------------------------------------------------------
def lock_member(member: Member) -> tuple[int, datetime | None, int] | None:
    """Take the member's row lock for the rest of the transaction and answer its (id, left_at,
    period) as committed then. Every write that reads a key's chain and then changes it
    (store_version's supersession and cap, forget, the member's own deletes, the bulk erases in
    retention.previews) takes it first, and so do removal and re-adding a member
    (governance.actions), so one waits for the other and none acts on a state read before the
    other committed. Lock order: member rows (by id, when several), then memory versions
    (erase_memories locks them by id), then the workspace's receipt chain head — the order
    remove_member's cascade takes too."""
    rows = Member.objects.filter(pk=member.pk).lock()
    return rows[0] if rows else None


def lock_active_member(member: Member) -> None:
    """`lock_member`, then refuse if the membership the caller admitted is over: the member was
    removed (or removed and re-added: a new period) after the gates passed. A write that waited
    for the removal's lock must not land after it, past the cascade that erased the member's
    memories. Refused as gate 1 refuses a credential whose member was removed (401)."""
    row = lock_member(member)
    if row is None or row[1] is not None or row[2] != member.period:
        raise unauthenticated("The member was removed from the workspace while this request ran; nothing was stored.")


# --- remember ------------------------------------------------------------------------------------
def remember(admission: gates.Admission) -> Remembered:
    """Rows 11 and 12 of SPEC §2, then the write. The rate-limit slot is handed back only if the
    write itself fails, so 120 means 120 stored remembers."""
    ctx = admission.ctx
    data = admission.data
    with spend_slot(ctx.credential, settings.AGENT_REMEMBERS_PER_HOUR) as slot:  # row 11
        version, superseded = store_version(
            workspace=ctx.workspace,
            member=ctx.member,
            credential=ctx.credential,
            namespace=data["namespace"],
            key=data.get("key"),
            content=admission.content,
            kind=data.get("kind", ""),
            source=data.get("source", Source.AGENT),
            collection_id=data.get("collectionId"),
            passages=admission.passages,
        )
    checked = fresh_check(version, admission.passages)
    return Remembered(
        memory=version, superseded=superseded, json=memory_json(version, checked, ctx.ask_history), slot=slot
    )


def fresh_check(version: MemoryVersion, passages: list[Passage]) -> Recheck:
    """A version just written cites passages checked readable in this request: all current,
    so its answer needs no re-check queries."""
    citations = [
        CheckedCitation(
            Citation(
                memory=version,
                position=i,
                passage_id=p.pk,
                document_id=p.document_id,
                document_version_id=p.version_id,
                sha256=p.sha256,
            ),
            CURRENT,
        )
        for i, p in enumerate(passages)
    ]
    return Recheck(
        visible=[version],
        hidden=0,
        citations={version.pk: citations},
        passage_ids={version.pk: [p.pk for p in passages]},
    )


def store_version(
    *,
    workspace: Workspace,
    member: Member,
    credential: Credential | None,
    namespace: str,
    key: str | None,
    content: gates.MaskedContent,
    kind: str,
    source: str,
    collection_id: int | None,
    passages: list[Passage],
) -> tuple[MemoryVersion, int]:
    """Store a new version (closing the current one of the same key). Row 12 — the cap — is
    counted under the member's row lock, which also serialises same-key supersession, so
    concurrent writers leave one current version and a gap-free chain. Under that lock the
    membership is checked again (`lock_active_member`): `member.period` is the period the caller
    admitted, so a removal, or a removal and re-add, that committed meanwhile refuses the write."""
    if kind and kind not in MEMORY_KINDS:  # every writer, whatever its interface (SPEC §4.1)
        raise validation_error({"kind": [f"Must be one of {', '.join(MEMORY_KINDS)}."]})
    entry = index_entry(MemoryVersion(text=content.text))  # CPU work before any lock is taken
    with transaction.atomic():
        lock_active_member(member)
        stored = MemoryVersion.objects.filter(member=member).count()
        if stored >= settings.MAX_VERSIONS_PER_MEMBER:
            raise ApiError(
                409,
                "AGENT_MEMORY_FULL",
                f"The member already has {settings.MAX_VERSIONS_PER_MEMBER} stored memory versions in this workspace.",
                {"limit": settings.MAX_VERSIONS_PER_MEMBER},
            )
        now = timezone.now()
        number, superseded = 1, 0
        if key is not None:
            current = MemoryVersion.objects.filter(member=member, namespace=namespace, key=key).current().first()
            if current is not None:
                MemoryVersion.objects.filter(pk=current.pk).update(valid_to=now)
                number, superseded = current.version + 1, 1
            else:  # a chain closed without a successor (its memory moved to another topic) continues
                last = (
                    MemoryVersion.objects.filter(member=member, namespace=namespace, key=key)
                    .order_by("-version")
                    .values_list("version", flat=True)
                    .first()
                )
                number = (last or 0) + 1
        version = MemoryVersion(
            workspace=workspace,
            member=member,
            credential=credential,
            source=source,
            namespace=namespace,
            key=key,
            text=content.text,
            masked_kinds=content.kinds,
            kind=kind or "",
            details="\n".join(content.details),
            collection_id=collection_id,
            version=number,
            valid_from=now,
            created_at=now,
            retention_anchor=now,
        )
        version.save()
        Citation.objects.bulk_create(
            Citation(
                memory=version,
                position=i,
                passage_id=p.pk,
                document_id=p.document_id,
                document_version_id=p.version_id,
                sha256=p.sha256,
            )
            for i, p in enumerate(passages)
        )
        entry.memory = version
        entry.save(force_insert=True)
    return version, superseded


# --- list --------------------------------------------------------------------------------------
def _cursor_scope(member: Member) -> str:
    return f"memories:{member.pk}"  # a cursor pages only the list of the member it was issued for


def encode_position(version: MemoryVersion, member: Member) -> str:
    return encode_cursor([iso(version.created_at), version.pk], scope=_cursor_scope(member))


def decode_position(cursor: str, member: Member) -> tuple[datetime, int]:
    created, pk = decode_cursor(cursor, scope=_cursor_scope(member))
    return parse_instant(created), int(pk)


def memory_page(admission: gates.Admission) -> dict[str, Any]:
    """One page of the member's memories, newest first, for `reads.list_memories` (which takes the
    read budget and writes the access entry around it)."""
    data = admission.data
    return paginate(
        filtered_versions(admission),
        admission.ctx.member,
        admission.ctx.ask_history,
        limit=data["limit"],
        cursor=data.get("cursor"),
    )


def paginate(
    queryset: QuerySet[MemoryVersion],
    member: Member,
    ask_history: AskHistorySettings,
    *,
    limit: int,
    cursor: str | None,
) -> dict[str, Any]:
    """Newest first. Hidden memories are skipped and counted; a page is refilled past them in
    growing batches, so the page stays full without one query per memory."""
    queryset = queryset.order_by("-created_at", "-id")
    if cursor:
        created, pk = decode_position(cursor, member)
        queryset = queryset.filter(Q(created_at__lt=created) | Q(created_at=created, id__lt=pk))
    scanned: list[tuple[MemoryVersion, bool]] = []
    merged = None
    batch_size = limit + 1
    visible_count = 0
    while True:
        batch_qs = queryset
        if scanned:
            after = scanned[-1][0]
            batch_qs = batch_qs.filter(
                Q(created_at__lt=after.created_at) | Q(created_at=after.created_at, id__lt=after.pk)
            )
        batch = list(batch_qs[:batch_size])
        checked = recheck(batch, member)
        if merged is None:
            merged = checked
        else:
            merged.citations.update(checked.citations)
        visible_ids = {v.pk for v in checked.visible}
        scanned.extend((v, v.pk in visible_ids) for v in batch)
        visible_count += len(visible_ids)
        if visible_count > limit or len(batch) < batch_size:
            break
        batch_size = min(batch_size * 2, 1000)
    visible = [v for v, ok in scanned if ok]
    page = visible[:limit]
    if len(visible) > limit:
        cut = next(i for i, (v, _) in enumerate(scanned) if v.pk == page[-1].pk)
        hidden = sum(1 for _, ok in scanned[: cut + 1] if not ok)
        next_cursor = encode_position(page[-1], member)
    else:
        hidden = sum(1 for _, ok in scanned if not ok)
        next_cursor = None
    return {
        "memories": [memory_json(v, merged, ask_history) for v in page],
        "hidden": hidden,
        "nextCursor": next_cursor,
    }


# --- forget ------------------------------------------------------------------------------------
def chain_ids(version: MemoryVersion) -> list[int]:
    """What erasing `version`'s memory erases: every version of its key (``key_chain_ids``)."""
    if version.key is None:
        return [version.pk]
    return key_chain_ids(version.member_id, version.namespace, version.key)


def key_chain_ids(member_id: int, namespace: str, key: str) -> list[int]:
    """Every version of the key, and of each chain a topic edit moved into it (`moved_from`)
    up to the move: the old topic's history goes with the memory it became. A chain later
    started again under the old key is another memory and stays."""
    ids: list[int] = []
    seen: set[tuple[str, Any]] = set()
    todo: list[tuple[str, Any]] = [(key, None)]
    while todo:
        chain_key, until = todo.pop()
        if (chain_key, until) in seen:
            continue
        seen.add((chain_key, until))
        versions = MemoryVersion.objects.filter(member_id=member_id, namespace=namespace, key=chain_key)
        if until is not None:
            versions = versions.filter(valid_from__lte=until)
        moved_from = []
        for pk, origin in versions.values_list("pk", "moved_from"):
            if pk not in ids:
                ids.append(pk)
            if origin is not None:
                moved_from.append(origin)
        origins = MemoryVersion.objects.filter(pk__in=moved_from, member_id=member_id, namespace=namespace)
        todo.extend(origins.values_list("key", "valid_from"))
    return ids


def forget(admission: gates.Admission) -> dict[str, Any]:
    """Erase every version of the key (SPEC §4.3). The ids are read and erased under the member
    lock a remember takes to supersede: a remember on the key either committed before (its version
    is read and erased) or waits and starts a new chain after the erase — never a survivor, never
    a version that is neither erased nor kept."""
    ctx, data = admission.ctx, admission.data
    with transaction.atomic():
        lock_member(ctx.member)
        live = MemoryVersion.objects.restrict(ctx.member, "view", ask_history=ctx.ask_history)
        if "memoryId" in data:
            version = live.filter(pk=data["memoryId"]).first()
            if version is None:
                raise memory_not_found()
            ids = chain_ids(version)
            filters = {"memoryId": str(data["memoryId"])}
        else:
            if not live.filter(namespace=data["namespace"], key=data["key"]).exists():
                raise memory_not_found()
            ids = key_chain_ids(ctx.member.pk, data["namespace"], data["key"])
            filters = {"namespace": data["namespace"], "key": data["key"]}
        gates.check_memory_in_scope(admission, ids)
        receipt = erase_memories(
            ids,
            operation=Operation.FORGET,
            workspace_id=ctx.workspace.pk,
            member_id=ctx.member.pk,
            actor_label=actor_label(ctx.credential),
            filters=filters,
        )
    if receipt is None:  # erased meanwhile by something that does not take the member lock (a sweep)
        raise memory_not_found()
    return {"forgotten": receipt.versions_erased, "receiptId": str(receipt.pk)}


# --- members and owners ------------------------------------------------------------------------
def member_label(member: Member) -> str:
    return f"member #{member.pk} ({member.user.email or member.user.username})"


def delete_own_memory(member: Member, memory_id: int, *, agent_only: bool) -> dict[str, Any]:
    """A member deletes one of their memories (every version of its key). Not theirs → 404.
    Under the member lock, like forget, so a concurrent remember on the key leaves no survivor."""
    with transaction.atomic():
        lock_member(member)
        queryset = MemoryVersion.objects.filter(member=member, workspace_id=member.workspace_id).reachable()
        queryset = queryset.agent() if agent_only else queryset.assistant()
        version = queryset.filter(pk=memory_id).first()
        if version is None:
            raise memory_not_found()
        receipt = erase_memories(
            chain_ids(version),
            operation=Operation.MEMBER_DELETE,
            workspace_id=member.workspace_id,
            member_id=member.pk,
            actor=member.user,
            actor_label=member_label(member),
            filters={"memoryId": str(memory_id)},
        )
    if receipt is None:
        raise memory_not_found()
    return {"deleted": receipt.versions_erased, "receiptId": str(receipt.pk)}


def delete_all_own_agent_memories(
    member: Member, *, dry_run: bool = False, confirmed: str | None = None
) -> dict[str, Any]:
    """The member erases every agent memory of theirs; `dry_run` answers the manifest (and the
    plan token a confirmation sends back) instead. `confirmed`: the token of the preview the
    member confirmed; if the memories changed since, 409 PREVIEW_OUTDATED and nothing erased.
    Planned and erased under the member lock, like forget: no remember lands between the two."""
    with transaction.atomic():
        if not dry_run:
            lock_member(member)  # before the ids are read: a remember on a listed key waits, then starts a new chain
        plan = previews.plan_member_delete_all(member)
        if dry_run:
            return {"dryRun": True, "manifest": plan.manifest(), "planToken": previews.plan_token(plan)}
        previews.check_confirmed(plan, confirmed)
        receipts = previews.execute(plan, actor=member.user, actor_label=member_label(member))
    return {"deleted": sum(r.versions_erased for r in receipts), "receiptId": str(receipts[0].pk) if receipts else None}


def delete_all_agent_memories(
    workspace: Workspace, *, actor: Actor, dry_run: bool = False, confirmed: str | None = None
) -> dict[str, Any]:
    """The owner erases every agent memory of the workspace, reading ids only, never content.

    One receipt per member (so each member finds it among their own receipts), all in one
    transaction; the answer carries the totals and the receipt ids. `dry_run` answers the
    manifest (counts only, and the plan token) instead, and writes nothing. `confirmed`: the
    token of the preview the owner confirmed; if the memories changed since, 409
    PREVIEW_OUTDATED and nothing erased. Planned and erased under every member's lock, taken in
    id order first."""
    with transaction.atomic():
        if not dry_run:
            # every member's lock, in id order (the order every multi-member writer takes), before the ids are read
            Member.objects.filter(workspace=workspace).lock()
        plan = previews.plan_owner_bulk_delete(workspace)
        if dry_run:
            return {"dryRun": True, "manifest": plan.manifest(), "planToken": previews.plan_token(plan)}
        previews.check_confirmed(plan, confirmed)
        receipts = previews.execute(plan, actor=actor, actor_label=actor_label(actor))
        totals = {"memory_version": 0, "citation": 0, "memory_embedding": 0}
        for receipt in receipts:
            for artifact, count in receipt.manifest["artifacts"].items():
                totals[artifact] = totals.get(artifact, 0) + count
        receipt_ids = [str(r.pk) for r in receipts]
        members = len(plan.batches)
        audit(
            "memories.bulk_deleted",
            workspace=workspace,
            actor=actor,
            target="agent memories",
            changes={"counts": totals, "members": members, "receiptIds": receipt_ids},
        )
    return {
        "deleted": totals,
        "members": members,
        "receiptId": receipt_ids[0] if receipt_ids else None,
        "receiptIds": receipt_ids,
    }


# --- the admin's audited content step (SPEC §10) ------------------------------------------------------
@transaction.atomic
def view_content_as_admin(version: MemoryVersion, *, actor: Actor, reason: str) -> dict[str, str]:
    """A platform admin reads one version's content (`ADMIN_MAY_VIEW_MEMORY_CONTENT`; the admin
    checks who may): the audit event — who, which version, why, never the content — is written
    first, in the transaction that reads it, so no content is shown without its record."""
    audit(
        "memory.content_viewed",
        workspace=version.workspace,
        actor=actor,
        target=f"memory version #{version.pk}",
        changes={"memberId": version.member_id, "namespace": version.namespace, "version": version.version},
        reason=reason,
    )
    stored = MemoryVersion.objects.filter(
        pk=version.pk
    ).first()  # opened (decrypted) here, and only here, for the admin
    if stored is None:  # its data key is gone (an erase's leftover) or it does not open
        return {"text": "(unreadable: its data key is gone or its content does not open)", "details": ""}
    return {"text": stored.text, "details": stored.details}
