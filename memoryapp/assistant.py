"""Assistant memories (seed 002, "AI memory"): the member's own page and API. They live in the
reserved namespace `assistant` with their topic as key, so a topic is updated, not duplicated."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from core.errors import ApiError, memory_not_found, validation_error
from governance.models import Member
from memoryapp import gates
from memoryapp.actions import lock_active_member, store_version
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryState, MemoryVersion, Source, retention_cutoff
from memoryapp.representation import detail_lines, memory_json

TOPIC = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


def check_topic(topic: str) -> None:
    if not TOPIC.match(topic) or len(topic) > 120:
        raise validation_error({"topic": ["Use English snake_case, for example preferred_language."]})
    # A topic is English words a person chose: no identifier is cut out of it before reading.
    gates.refuse_personal_data_in_names({"key": topic}, identifiers=False)


def assistant_json(version: MemoryVersion, member: Member, *, expired: bool) -> dict[str, Any]:
    return memory_json(version, None, member.workspace.ask_history, assistant=True, expired=expired)


def _current(member: Member) -> QuerySet[MemoryVersion]:
    return MemoryVersion.objects.restrict(member, "keep").assistant().current()


def list_assistant_memories(member: Member) -> dict[str, Any]:
    now = timezone.now()
    ask_history = member.workspace.ask_history
    versions = list(_current(member).order_by("-retention_anchor", "-id")[:500])
    active = [v for v in versions if v.is_live(ask_history, now)]
    expired = [v for v in versions if not v.is_live(ask_history, now) and v.grace_ends_at(ask_history) > now]
    return {
        "rememberMe": member.remember_me,
        "available": member.workspace.ai_memory_available,
        "memories": [assistant_json(v, member, expired=False) for v in active],
        "expired": [assistant_json(v, member, expired=True) for v in expired],
    }


def assistant_memories_writable(member: Member) -> bool:
    """Whether the member may add or edit assistant memories now (the gate rows `add_assistant_memory` runs)."""
    try:
        gates.check_memory_enabled(member.workspace, member, agent=False)
    except ApiError:
        return False
    return True


def add_assistant_memory(
    member: Member,
    *,
    kind: str,
    topic: str,
    summary: str,
    details: list[str] | None = None,
    source: str = Source.MANUAL,
) -> tuple[MemoryVersion, int]:
    gates.check_memory_enabled(member.workspace, member, agent=False)
    check_topic(topic)
    content = gates.mask_content(summary, details or [], region=member.workspace.ask_history.phone_region)
    return store_version(
        workspace=member.workspace,
        member=member,
        credential=None,
        namespace=ASSISTANT_NAMESPACE,
        key=topic,
        content=content,
        kind=kind,
        source=source,
        collection_id=None,
        passages=[],
    )


@transaction.atomic
def add_expired_assistant_memory(
    member: Member, *, kind: str, topic: str, summary: str, details: list[str] | None = None
) -> MemoryVersion:
    """An assistant memory stored as the member would store it, then anchored one day past the
    workspace's retention: expired, inside its grace period, so the member's page offers to
    reactivate it (the demo's seed, `seed_demo`). The grace purge erases it like any other."""
    version, _ = add_assistant_memory(member, kind=kind, topic=topic, summary=summary, details=details)
    ask_history = member.workspace.ask_history
    anchor = retention_cutoff(ask_history.agent_memory_retention_days + 1)  # one day past the expiry rule's cutoff
    # stored back then: its page dates (created, updated) agree with the anchor
    MemoryVersion.objects.filter(pk=version.pk).update(retention_anchor=anchor, created_at=anchor, valid_from=anchor)
    version.refresh_from_db()
    return version


def has_assistant_topic(member: Member, topic: str) -> bool:
    """Whether the member keeps a memory of this topic (live or expired within grace)."""
    return _current(member).filter(key=topic).exists()


def _own_current(member: Member, memory_id: int) -> MemoryVersion:
    version = _current(member).filter(pk=memory_id).first()
    if version is None:
        raise memory_not_found()
    return version


def edit_assistant_memory(
    member: Member,
    memory_id: int,
    *,
    kind: str | None,
    summary: str | None,
    details: list[str] | None,
    topic: str | None = None,
) -> MemoryVersion:
    """An edit is a new version of the same topic; the source stays what it was.

    A new `topic` moves the memory: its content is stored as a new version under the new key
    (version 1, or the next version of that topic if the member already has it, which it then
    replaces) and the old topic's chain is closed (`validTo` now), in one transaction under the
    member lock. The old chain's versions stay history — what an `asOf` read before the move
    returns — until retention erases them, or until the memory is deleted or forgotten: the new
    version keeps the old one's id (`moved_from`), and erasing its chain erases the old topic's
    versions up to the move with it (``actions.chain_ids``)."""
    if topic is not None:
        check_topic(topic)
    with transaction.atomic():
        lock_active_member(member)  # the move is one step: no write lands between the store and the close
        current = _own_current(member, memory_id)
        topic = current.key if topic is None else topic
        version, _ = add_assistant_memory(
            member,
            kind=current.kind if kind is None else kind,
            topic=topic,
            summary=current.text if summary is None else summary,
            details=detail_lines(current) if details is None else details,
            source=current.source,
        )
        if topic != current.key:
            MemoryVersion.objects.filter(pk=current.pk).current().update(valid_to=version.valid_from)
            # the link that makes deleting the moved memory erase the old topic's history too
            MemoryVersion.objects.filter(pk=version.pk).update(moved_from=current.pk)
            version.moved_from = current.pk
    return version


@transaction.atomic
def reactivate_assistant_memory(member: Member, memory_id: int) -> MemoryVersion:
    """An expired memory becomes active again; its retention restarts now. Only while its grace
    period lasts: past it the memory is erased (or about to be) and answers 404 like any memory
    that is gone. The conditional UPDATE and the grace purge's SKIP LOCKED claim exclude each
    other, so a memory is never both reactivated and erased. An active memory is left as it is."""
    gates.check_memory_enabled(member.workspace, member, agent=False)
    version = _own_current(member, memory_id)
    ask_history = member.workspace.ask_history
    now = timezone.now()
    if version.is_live(ask_history, now):
        return version
    days, grace = ask_history.agent_memory_retention_days, ask_history.expired_grace_days
    reactivated = (
        MemoryVersion.objects.filter(pk=version.pk)
        .reachable()
        .within_grace(days, grace, at=now)
        .update(state=MemoryState.ACTIVE, expired_at=None, retention_anchor=now)
    )
    if not reactivated:
        raise memory_not_found()
    version.refresh_from_db()
    return version
