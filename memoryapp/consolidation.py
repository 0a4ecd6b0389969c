"""Conversation turns consolidated into assistant memories by the system model (SPEC §9, seed 002).

A turn is judged twice, when submitted (`queued`, or `skipped` with a reason) and again by the task,
since state may change while it waits; docs/consolidation.md "Skip reasons, in the order checked" lists
the reasons and the order. Skipped and failed consolidations charge nothing; one that succeeds is
charged even when it finds nothing, and its memories are stored in the same transaction as the charge.

Message content lives only in `Consolidation.messages` until the task ends (the task payload is the
id). A turn belongs to the membership period it was submitted in (`member_period`): once the member
is removed it stores nothing and charges nothing (`member_left`), however they were re-added.
An extracted topic is a key: it passes the personal-data refusal (`check_topic`) and is stored only
as a name of the fixed vocabulary (`memoryapp.topics`), never the model's or the member's words.
The owner's "Let agents keep memories" switch is not a reason: it governs credential-written memories.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from core.errors import ApiError, validation_error
from core.task_queue import queue_on_commit
from core.timestamps import iso
from credits import charging, pricing
from credits.models import Consolidation, ConsolidationStatus, UsageCategory, UsageRecord
from governance.audit import Actor, audit
from governance.models import Agent, Member, Workspace
from memoryapp import masking
from memoryapp.actions import lock_member
from memoryapp.assistant import add_assistant_memory, check_topic
from memoryapp.gates import AgentContext
from memoryapp.models import MemoryVersion, Source
from memoryapp.ratelimit import Slot, spend_slot
from memoryapp.sealing import destroy_keys_on_commit, is_unreadable
from memoryapp.system_models import ExtractedMemory, Extraction, SystemModel, SystemModelError, get_system_model
from memoryapp.topics import MAX_SLOTS, is_many, slot_key, slot_number, subject_of, vocabulary_topic

log = logging.getLogger(__name__)

#: `memoryapp.tasks.consolidate_turn`, queued by name with the consolidation id as its only payload.
CONSOLIDATE_TASK = "memoryapp.tasks.consolidate_turn"

REASON_MESSAGES = {
    "organization": "AI memory is not enabled for your organization.",
    "non_retaining": "This workspace keeps no history, so it keeps no memories.",
    "anonymous": "Conversations with anonymous visitors are not remembered.",
    "member_left": "The conversation partner was removed from the workspace.",
    "member": "The member has turned off 'Let the assistant remember me'.",
    "vector_memory": "This agent's vector memory is off.",
    "personal_data": "A message contains sensitive personal data, so the turn is not sent for consolidation.",
    charging.REASON_CREDITS: "The workspace does not have enough credits.",
    charging.REASON_MEMBER_QUOTA: "The member's credit quota for this period is used up.",
    charging.REASON_ROLE_QUOTA: "The credit quota of the member's role for this period is used up.",
    "model_error": "The system model failed; nothing was charged.",
    "expired": "The consolidation did not run in time; its input was discarded and nothing was charged.",
    "store_error": "The memories could not be stored; nothing was charged.",
}


# --- agents (assistant configurations) --------------------------------------------------------------
def create_agent(workspace: Workspace, *, name: str, vector_memory: bool, actor: Actor) -> Agent:
    with transaction.atomic():
        agent = Agent.objects.create(workspace=workspace, name=name, vector_memory=vector_memory)
        audit(
            "agent.created",
            workspace=workspace,
            actor=actor,
            target=f"agent #{agent.pk}",
            changes={"name": name, "vectorMemory": vector_memory},
        )
    return agent


def update_agent(agent: Agent, *, actor: Actor, name: str | None = None, vector_memory: bool | None = None) -> Agent:
    changes: dict[str, list[Any]] = {}
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=agent.pk)
        if name is not None and name != agent.name:
            changes["name"] = [agent.name, name]
            agent.name = name
        if vector_memory is not None and vector_memory != agent.vector_memory:
            changes["vectorMemory"] = [agent.vector_memory, vector_memory]
            agent.vector_memory = vector_memory
        if changes:
            agent.save(update_fields=["name", "vector_memory"])
            audit("agent.updated", workspace=agent.workspace, actor=actor, target=f"agent #{agent.pk}", changes=changes)
    return agent


def agent_json(agent: Agent) -> dict[str, Any]:
    return {
        "id": str(agent.pk),
        "name": agent.name,
        "vectorMemory": agent.vector_memory,
        "createdAt": iso(agent.created_at),
    }


# --- submission ---------------------------------------------------------------------------------------
def skip_reason(workspace: Workspace, member: Member | None, agent: Agent | None, *, anonymous: bool) -> str | None:
    """The first switch that says "do not consolidate", or None. Credits are checked separately."""
    if not workspace.ai_memory_available:
        return "organization"
    if anonymous or member is None:
        return "anonymous"
    if not member.is_active:
        return "member_left"
    if not member.remember_me:
        return "member"
    if agent is None or not agent.vector_memory:
        return "vector_memory"
    return None


@dataclass
class Submitted:
    consolidation: Consolidation
    personal_data: list[dict[str, Any]]  # which messages held which kinds: never the content

    def json(self) -> dict[str, Any]:
        c = self.consolidation
        data: dict[str, Any] = {"id": str(c.pk), "status": c.status, "reason": c.reason or None}
        if c.reason:
            data["message"] = REASON_MESSAGES.get(c.reason, "")
        if c.reason == "personal_data":
            data["personalData"] = self.personal_data
        return {"consolidation": data}


def submit_agent_turn(
    ctx: AgentContext, *, agent_id: int, conversation_id: str, anonymous: bool, messages: list[dict[str, str]]
) -> tuple[Submitted, Slot]:
    """An agent's turn (`POST …/conversations/turns`, after rows 1–4 of the gate and a valid
    body): the agent must be the workspace's (404 `AGENT_NOT_FOUND`), then the turn spends one
    slot of the credential's AGENT_TURNS_PER_HOUR — a budget of its own, remembers keep theirs —
    handed back if recording the turn fails."""
    agent = Agent.objects.filter(pk=agent_id, workspace=ctx.workspace).first()
    if agent is None:
        raise ApiError(404, "AGENT_NOT_FOUND", "No such agent in this workspace.")
    with spend_slot(ctx.credential, settings.AGENT_TURNS_PER_HOUR, bucket="turn", what="conversation turns") as slot:
        submitted = submit_turn(
            workspace=ctx.workspace,
            member=ctx.member,
            agent=agent,
            credential_id=ctx.credential.pk,
            conversation_id=conversation_id,
            anonymous=anonymous,
            messages=messages,
        )
    return submitted, slot


def submit_turn(
    *,
    workspace: Workspace,
    member: Member,
    agent: Agent,
    credential_id: int | None,
    conversation_id: str,
    anonymous: bool,
    messages: list[dict[str, str]],
) -> Submitted:
    """Record the turn and queue its consolidation, or record why it is skipped.

    A turn whose messages contain personal data is skipped and stored without any content, so
    such a message never reaches the model, the task queue or the database."""
    partner = None if anonymous else member
    reason = skip_reason(workspace, partner, agent, anonymous=anonymous)
    report: list[dict[str, Any]] = []
    if reason is None:
        region = workspace.ask_history.phone_region
        with masking.one_memory_budget():  # a turn's messages share one masking budget, as a memory's fields do
            for index, message in enumerate(messages):
                kinds = masking.detect_kinds(message["content"], region)
                if kinds:
                    report.append({"index": index, "role": message["role"], "kinds": list(kinds)})
        if report:
            reason = "personal_data"
    if reason is None:
        reason = charging.precheck(workspace, partner)
    now = timezone.now()
    with transaction.atomic():
        consolidation = Consolidation.objects.create(
            workspace=workspace,
            member=partner,
            agent=agent,
            credential_ref=credential_id,
            member_period=partner.period if partner is not None else None,
            conversation_id=conversation_id,
            anonymous=anonymous,
            status=ConsolidationStatus.SKIPPED if reason else ConsolidationStatus.QUEUED,
            reason=reason or "",
            messages=None if reason else [{"role": m["role"], "content": m["content"]} for m in messages],
            message_count=len(messages),
            finished_at=now if reason else None,
            input_purged_at=now if reason else None,
            created_at=now,
        )
        if reason is None:
            queue_on_commit(CONSOLIDATE_TASK, consolidation.pk)
    return Submitted(consolidation, report)


# --- the task -----------------------------------------------------------------------------------------
class _StoreRefused(Exception):
    pass


def run_consolidation(consolidation_id: int, *, model: SystemModel | None = None) -> dict[str, Any]:
    """Consolidate one queued turn. Claimed by a conditional UPDATE, so a redelivered task is a
    no-op; whatever happens, the stored input is emptied when it ends."""
    claimed = Consolidation.objects.filter(pk=consolidation_id, status=ConsolidationStatus.QUEUED).update(
        status=ConsolidationStatus.RUNNING
    )
    if not claimed:
        return {"status": "not_queued"}
    consolidation = (
        Consolidation.objects.keep_unreadable()
        .select_related("workspace", "member", "member__workspace", "member__workspace__ask_history", "agent")
        .get(pk=consolidation_id)
    )
    if (
        is_unreadable(consolidation) or consolidation.messages is None
    ):  # its key is gone or its input corrupted (logged)
        return _finish(consolidation, ConsolidationStatus.FAILED, "input_unreadable")
    workspace = consolidation.workspace
    member = consolidation.member
    reason = skip_reason(workspace, member, consolidation.agent, anonymous=consolidation.anonymous)
    if (
        reason is None
        and member is not None
        and consolidation.member_period is not None
        and member.period != consolidation.member_period
    ):
        reason = "member_left"  # removed and re-added since: the turn belongs to the period that ended
    if reason is None and not workspace.retains_history:
        reason = "non_retaining"
    if reason is None:
        # Defence in depth: the submission stored clean messages only.
        region = workspace.ask_history.phone_region
        with masking.one_memory_budget():
            if any(masking.contains_personal_data(m.get("content", ""), region) for m in consolidation.messages):
                reason = "personal_data"
    if reason is None:
        reason = charging.precheck(workspace, member)
    if reason is not None:
        return _finish(consolidation, ConsolidationStatus.SKIPPED, reason)

    try:
        model = model or get_system_model()
        extraction = model.extract(consolidation.messages)
    except SystemModelError as exc:
        log.warning("consolidation #%s: system model failed: %s", consolidation_id, exc)
        return _finish(consolidation, ConsolidationStatus.FAILED, "model_error", model_name=getattr(model, "name", ""))
    except Exception as exc:  # a bug in a backend must not charge, nor leave the turn running
        log.error("consolidation #%s: system model raised %s", consolidation_id, type(exc).__name__)
        return _finish(consolidation, ConsolidationStatus.FAILED, "model_error", model_name=getattr(model, "name", ""))

    price = pricing.system_model_price(extraction.model_name)
    input_cost, output_cost = pricing.cost_of(price, extraction.input_tokens, extraction.output_tokens)
    try:
        with transaction.atomic():
            record = charging.charge(
                workspace=workspace,
                member=member,
                category=UsageCategory.AI_MEMORY,
                model_name=extraction.model_name,
                conversation_id=consolidation.conversation_id,
                input_tokens=extraction.input_tokens,
                output_tokens=extraction.output_tokens,
                input_cost=input_cost,
                output_cost=output_cost,
            )
            stored_ids, dropped = _store(member, extraction)
    except charging.CreditRefused as exc:
        return _finish(consolidation, ConsolidationStatus.SKIPPED, exc.reason, model_name=extraction.model_name)
    except _StoreRefused as exc:
        if str(exc) == "UNAUTHENTICATED":  # the member was removed while the model worked (store_version's re-check)
            return _finish(consolidation, ConsolidationStatus.SKIPPED, "member_left", model_name=extraction.model_name)
        log.warning("consolidation #%s: store refused (%s)", consolidation_id, exc)
        return _finish(consolidation, ConsolidationStatus.FAILED, "store_error", model_name=extraction.model_name)
    return _finish(
        consolidation,
        ConsolidationStatus.DONE,
        "",
        model_name=extraction.model_name,
        usage_record=record,
        found=len(extraction.memories),
        stored_ids=stored_ids,
        dropped=dropped,
    )


# Refusals that drop one extracted memory; any other refusal fails the whole consolidation.
_DROPPABLE = {"VALIDATION_ERROR", "AGENT_MEMORY_EMPTY", "AGENT_MEMORY_PERSONAL_DATA"}


def extracted_key(member: Member, memory: ExtractedMemory, claimed: dict[str, str]) -> str:
    """The key an extracted memory is stored under: its vocabulary topic; for a topic that holds
    several memories, the slot whose memory has the same subject (it is updated), else the first
    free one (`deadline`, `deadline_2`, …). `claimed`: the keys this turn already wrote, with their
    subjects. Called under the member lock, so two consolidations do not pick one free slot."""
    topic = vocabulary_topic(memory.topic, memory.kind)
    if not is_many(topic):
        return topic
    subject = subject_of(memory.summary)
    taken: dict[int, str] = {}
    family = (
        MemoryVersion.objects.filter(member=member, workspace_id=member.workspace_id, key__startswith=topic)
        .assistant()
        .reachable()
        .current()
    )
    for version in family:
        number = slot_number(version.key, topic)
        if number is not None:
            taken[number] = claimed.get(version.key, subject_of(version.text))
    for key, claimed_subject in claimed.items():
        number = slot_number(key, topic)
        if number is not None:
            taken[number] = claimed_subject
    for number, held in sorted(taken.items()):
        if held == subject:
            return slot_key(topic, number)
    free = next((n for n in range(1, MAX_SLOTS + 1) if n not in taken), None)
    if free is None:
        raise validation_error({"topic": [f"The topic {topic} already holds {MAX_SLOTS} memories."]})
    return slot_key(topic, free)


def _store(member: Member, extraction: Extraction) -> tuple[list[int], int]:
    stored: list[int] = []
    dropped = 0
    claimed: dict[str, str] = {}
    lock_member(member)  # the slots are chosen and written under the lock store_version takes anyway
    for memory in extraction.memories:
        try:
            with transaction.atomic():  # a dropped memory rolls back alone
                check_topic(memory.topic)  # a model that leaks personal data into a topic loses the memory
                key = extracted_key(member, memory, claimed)
                version, _ = add_assistant_memory(
                    member,
                    kind=memory.kind,
                    topic=key,
                    summary=memory.summary,
                    details=list(memory.details),
                    source=Source.AI_EXTRACTED,
                )
        except ApiError as exc:
            if exc.code in _DROPPABLE:
                dropped += 1
                continue
            raise _StoreRefused(exc.code) from None
        claimed[key] = subject_of(memory.summary)
        stored.append(version.pk)
    return stored, dropped


def _finish(
    consolidation: Consolidation,
    status: str,
    reason: str,
    *,
    model_name: str = "",
    usage_record: UsageRecord | None = None,
    found: int = 0,
    stored_ids: list[int] | None = None,
    dropped: int = 0,
) -> dict[str, Any]:
    now = timezone.now()
    purge_input(
        Consolidation.objects.filter(pk=consolidation.pk),
        status=status,
        reason=reason,
        model_name=model_name,
        usage_record=usage_record,
        memories_found=found,
        memories_stored=len(stored_ids or []),
        memory_ids=stored_ids or [],
        finished_at=now,
        input_purged_at=now,
    )
    return {
        "status": status,
        "reason": reason or None,
        "found": found,
        "stored": len(stored_ids or []),
        "dropped": dropped,
    }


def discard_turns_of(member: Member) -> int:
    """The member's membership ended (removal, a deleted account): every turn of theirs still
    waiting is skipped with its input purged, in the removal's transaction, so none is
    consolidated after it. A turn already running keeps only the task's own copy of its messages;
    its store is refused under the member lock (`store_version`), so it ends `member_left` too."""
    now = timezone.now()
    waiting = purge_input(
        Consolidation.objects.filter(member=member, status=ConsolidationStatus.QUEUED),
        status=ConsolidationStatus.SKIPPED,
        reason="member_left",
        finished_at=now,
        input_purged_at=now,
    )
    purge_input(Consolidation.objects.filter(member=member, status=ConsolidationStatus.RUNNING), input_purged_at=now)
    return waiting


def purge_input(queryset: QuerySet[Consolidation], **changes: Any) -> int:
    """Empty the input of these consolidations and destroy its data keys once that commits, so a
    database backup taken while the task waited holds only ciphertext whose key is gone (SPEC
    §8.2). A key left behind by a crash between the two is destroyed by the keyring sweep."""
    with transaction.atomic():
        rows = list(queryset.select_for_update().values_list("pk", "key_id"))
        updated = Consolidation.objects.filter(pk__in=[pk for pk, _ in rows]).update(messages=None, **changes)
        destroy_keys_on_commit([key_id for _, key_id in rows if key_id is not None])
    return updated


#: A turn not consolidated within this time (a stopped worker, a lost message) is given up, so
#: its stored input never outlives it: the lifecycle bound of "consolidation input".
STALE_AFTER = timedelta(hours=6)


def sweep_stale_consolidations(now: datetime | None = None) -> dict[str, int]:
    """Beat job: give up on consolidations still queued or running after STALE_AFTER, purging
    their input (claimed by a conditional UPDATE; nothing is charged)."""
    now = now or timezone.now()
    expired = purge_input(
        Consolidation.objects.filter(
            status__in=[ConsolidationStatus.QUEUED, ConsolidationStatus.RUNNING], created_at__lt=now - STALE_AFTER
        ),
        status=ConsolidationStatus.FAILED,
        reason="expired",
        finished_at=now,
        input_purged_at=now,
    )
    return {"expired": expired}


def consolidation_json(consolidation: Consolidation) -> dict[str, Any]:
    return {
        "id": str(consolidation.pk),
        "status": consolidation.status,
        "reason": consolidation.reason or None,
        "memoriesFound": consolidation.memories_found,
        "memoriesStored": consolidation.memories_stored,
        "usageRecordId": str(consolidation.usage_record_id) if consolidation.usage_record_id else None,
    }
