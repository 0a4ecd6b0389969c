"""The memory object `M` of SPEC §3, the same for REST, MCP and the member API."""

from __future__ import annotations

from typing import Any

from core.timestamps import iso
from governance.models import AskHistorySettings
from memoryapp.models import MemoryVersion
from memoryapp.visibility import Recheck

#: SPEC §4.6: every memory, whichever surface shows it, says it is an untrusted note, not evidence.
NOT_EVIDENCE: dict[str, Any] = {"type": "memory", "evidence": False, "trust": "untrusted"}


def detail_lines(version: MemoryVersion) -> list[str]:
    return version.details.split("\n") if version.details else []


def memory_json(
    version: MemoryVersion,
    checked: Recheck | None,
    ask_history: AskHistorySettings,
    *,
    assistant: bool = False,
    expired: bool = False,
) -> dict[str, Any]:
    """The one shape of a memory for JSON. By default the memory object `M` of SPEC §3 (REST,
    MCP, the member API; `checked` is the live re-check that read its citations). `assistant`:
    the member's assistant-memory shape (seed 002): the key is its topic, the text its summary,
    no citations; `expired` adds when the grace purge erases it. The member's export
    (`memoryapp.export`) adds its fields to the default shape."""
    data: dict[str, Any] = {
        "id": str(version.pk),
        **NOT_EVIDENCE,
        "kind": version.kind or None,
        "details": detail_lines(version),
        "source": version.source,
        "version": version.version,
        "createdAt": iso(version.created_at),
        "expiresAt": iso(version.expires_at(ask_history)),
        "masked": list(version.masked_kinds or []),
    }
    if assistant:
        data.update(
            topic=version.key,
            summary=version.text,
            updatedAt=iso(version.retention_anchor),
            state="expired" if expired else "active",
        )
        if expired:
            data["erasedAt"] = iso(version.grace_ends_at(ask_history))
        return data
    citations = checked.citations.get(version.pk, []) if checked else []
    data.update(
        {
            "namespace": version.namespace,
            "key": version.key,
            "text": version.text,
            "collectionId": str(version.collection_id) if version.collection_id else None,
            "citations": [
                {
                    "passageId": str(c.citation.passage_id),
                    "documentId": str(c.citation.document_id),
                    "sha256": c.citation.sha256,
                    "sourceState": c.state,
                }
                for c in citations
            ],
            "sourceState": checked.source_state(version.pk) if checked else None,
            "validFrom": iso(version.valid_from),
            "validTo": iso(version.valid_to),
        }
    )
    return data
