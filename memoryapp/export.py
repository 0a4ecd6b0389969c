"""A member's export of everything the workspace keeps about them (SPEC §8.1, docs/export.md).

One JSON document, produced as a stream of text chunks: every section is read in keyset batches
of `BATCH` rows (a constant number of queries per batch, whatever the number of rows), so memory
use and query count stay bounded at the 5,000-version cap and beyond. Only the member's own rows
are ever selected (`member=`, `member_ref=`); nothing of another member, and for a member of
several workspaces nothing of another workspace (a membership is one workspace).

What is left out, and said so in `withheld`: versions unreachable (waiting for a cascade's erase) or past their
retention
(read paths never return them), and versions hidden by the live source re-check (SPEC §4.2: a
memory citing a source the member can no longer read is not shown to them anywhere).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db.models import Model, QuerySet
from django.utils import timezone

from core.timestamps import iso
from credits.models import UsageRecord
from governance.actions import credential_json, member_json
from governance.audit import Actor, audit
from governance.models import AskHistorySettings, Credential, Member
from memoryapp import access_log
from memoryapp.models import AccessEntry, MemoryVersion
from memoryapp.representation import memory_json
from memoryapp.visibility import Recheck, recheck
from retention.models import DeletionReceipt
from retention.receipt_names import Resolver

FORMAT = "governed-agent-memory/member-export"
FORMAT_VERSION = 1
SCHEMA_PATH = "/api/schema/export.json"
BATCH = 500


def start_export(member: Member, *, actor: Actor) -> Iterator[str]:
    """Write the export's audit event (content-free: who, whose, when), then hand back the
    document's chunks. The event is written before the first byte is sent."""
    exported_at = timezone.now()
    audit(
        "member.exported",
        workspace=member.workspace,
        actor=actor,
        target=f"member #{member.pk}",
        changes={"format": FORMAT, "formatVersion": FORMAT_VERSION, "exportedAt": iso(exported_at)},
    )
    return document(member, exported_at)


# --- the document -----------------------------------------------------------------------------------
def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_jsonable)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).hex()  # a binary receipt field (a signature, say), as hex
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def document(member: Member, exported_at: datetime) -> Iterator[str]:
    workspace = member.workspace
    ask_history = workspace.ask_history
    withheld = {"pendingErasureOrExpired": 0, "hiddenBySourceRecheck": 0}
    head = {
        "format": FORMAT,
        "formatVersion": FORMAT_VERSION,
        "schema": SCHEMA_PATH,
        "exportedAt": iso(exported_at),
        "workspace": {"id": str(workspace.pk), "name": workspace.name},
        "member": {**member_json(member), "rememberMe": member.remember_me},
        "retention": ask_history.api_values(AskHistorySettings.RETENTION_API_FIELDS),
    }
    yield _dump(head)[:-1]  # the object stays open: the sections follow
    stored = MemoryVersion.objects.filter(member=member)  # all of theirs, to count what is withheld
    agent, assistant = stored.agent(), stored.assistant()
    kept = MemoryVersion.objects.restrict(member, "keep", ask_history=ask_history)
    agent_kept, assistant_kept = kept.agent(), kept.assistant()
    yield from _section("agentMemories", _memory_batches(agent_kept, member, ask_history, withheld))
    yield from _section("assistantMemories", _memory_batches(assistant_kept, member, ask_history, withheld))
    withheld["pendingErasureOrExpired"] = (
        agent.count() - agent_kept.count() + assistant.count() - assistant_kept.count()
    )
    receipts = DeletionReceipt.objects.restrict(member, "view").filter(member_ref=member.pk)  # an owner's: their own
    resolver = Resolver(member)
    yield from _section(
        "receipts", _batches(receipts, lambda r: {**_receipt_json(r), "resolvedFilters": resolver.resolve(r.manifest)})
    )
    credentials = Credential.objects.restrict(member, "view")
    yield from _section("credentials", _batches(credentials, credential_json))
    usage = UsageRecord.objects.restrict(member, "view").filter(member=member)
    yield from _section("usageRecords", _batches(usage, _usage_json))
    yield from _section("accessLog", _access_batches(access_log.member_entries(member), member))
    yield "," + _dump("withheld") + ":" + _dump(withheld) + "}"


def _section(name: str, batches: Iterable[list[dict[str, Any]]]) -> Iterator[str]:
    """`,"name":[…]`, one chunk per batch."""
    first = True
    yield "," + _dump(name) + ":["
    for items in batches:
        if not items:
            continue
        yield ("" if first else ",") + ",".join(_dump(item) for item in items)
        first = False
    yield "]"


def _keyset(queryset: QuerySet) -> Iterator[list[Model]]:
    """Rows in primary-key order, `BATCH` at a time, one query per batch."""
    last = 0
    while True:
        rows = list(queryset.filter(pk__gt=last).order_by("pk")[:BATCH])
        if rows:
            yield rows
        if len(rows) < BATCH:
            return
        last = rows[-1].pk


def _batches(queryset: QuerySet, to_json: Callable[[Any], dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for rows in _keyset(queryset):
        yield [to_json(row) for row in rows]


# --- memories -----------------------------------------------------------------------------------
def _memory_batches(
    queryset: QuerySet[MemoryVersion], member: Member, ask_history: AskHistorySettings, withheld: dict[str, int]
) -> Iterator[list[dict[str, Any]]]:
    """Each batch: its rows (1 query) and the live re-check, which also reads the citations (≤3)."""
    now = timezone.now()
    for rows in _keyset(queryset):
        checked = recheck(rows, member)
        withheld["hiddenBySourceRecheck"] += checked.hidden
        yield [_memory_json(v, checked, ask_history, now) for v in checked.visible]


def _memory_json(
    version: MemoryVersion, checked: Recheck, ask_history: AskHistorySettings, now: datetime
) -> dict[str, Any]:
    """The memory object `M` (`representation.memory_json`), plus what only its member may see:
    which credential wrote it, whether it is current, the document versions it cites, its hash,
    its state and when expiry erases it."""
    data = memory_json(version, checked, ask_history)
    for item, cited in zip(data["citations"], checked.citations.get(version.pk, []), strict=True):
        item["documentVersionId"] = str(cited.citation.document_version_id)
    expired = version.is_assistant and not version.is_live(ask_history, now)
    data.update(
        {
            "current": version.is_current,
            "credentialId": str(version.credential_id) if version.credential_id else None,
            # The plain SHA-256 is the member's own: computed here, from their text, never stored (the
            # admin sees `text_hmac` instead, keyed by the version's data key).
            "textSha256": hashlib.sha256(version.text.encode("utf-8")).hexdigest(),
            "state": "expired" if expired else "active",
            "erasedAt": iso(version.erased_by_expiry_at(ask_history)),
        }
    )
    return data


# --- receipts, credentials, usage ------------------------------------------------------------------
def _camel(name: str) -> str:
    return re.sub(r"_(\w)", lambda m: m.group(1).upper(), name)


def _receipt_json(receipt: DeletionReceipt) -> dict[str, Any]:
    """Every stored field of the receipt (they are the member's own), named in camelCase: so a
    field the receipt gains (its hash, its signature) is exported without a change here. The
    document adds `resolvedFilters`: the namespace and key its digests name, while a live memory
    of the member still uses them (retention.receipt_names; never stored, never hashed)."""
    data = {}
    for field in receipt._meta.concrete_fields:
        value = getattr(receipt, field.attname)
        if field.attname in ("id", "workspace_ref", "member_ref", "actor_id") and value is not None:
            value = str(value)
        elif field.attname == "memory_version_ids":
            value = [str(i) for i in value or []]
        data[_camel(field.attname)] = value
    data.update(receipt.residual_json())  # residualUntil as the APIs write it, and whether it has closed
    return data


def _usage_json(record: UsageRecord) -> dict[str, Any]:
    return {
        "id": str(record.pk),
        "category": record.category,
        "role": record.role,
        "model": record.model_name,
        "conversationId": record.conversation_id or None,
        "inputTokens": record.input_tokens,
        "outputTokens": record.output_tokens,
        "memoryTokens": record.memory_tokens,
        "inputCost": str(record.input_cost),
        "outputCost": str(record.output_cost),
        "status": record.status,
        "createdAt": iso(record.created_at),
        "settledAt": iso(record.settled_at),
    }


# --- the access log -----------------------------------------------------------------------------
def _access_batches(queryset: QuerySet[AccessEntry], member: Member) -> Iterator[list[dict[str, Any]]]:
    for entries in _keyset(queryset):
        visible, hidden = access_log.readable_versions(member, entries)
        yield [access_log.entry_json(entry, visible, hidden) for entry in entries]
