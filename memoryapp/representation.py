"""The memory object `M` of SPEC §3, the same for REST, MCP and the member API."""

from __future__ import annotations

from typing import Any

from governance.models import AskHistorySettings
from memoryapp.models import MemoryVersion
from memoryapp.timestamps import iso
from memoryapp.visibility import Recheck

#: SPEC §4.6: every memory, whichever surface shows it, says it is an untrusted note, not evidence.
NOT_EVIDENCE: dict[str, Any] = {"type": "memory", "evidence": False, "trust": "untrusted"}


def detail_lines(version: MemoryVersion) -> list[str]:
    return version.details.split("\n") if version.details else []


def memory_json(version: MemoryVersion, checked: Recheck, ask_history: AskHistorySettings) -> dict[str, Any]:
    return {
        "id": str(version.pk),
        **NOT_EVIDENCE,
        "namespace": version.namespace,
        "key": version.key,
        "text": version.text,
        "kind": version.kind or None,
        "details": detail_lines(version),
        "source": version.source,
        "collectionId": str(version.collection_id) if version.collection_id else None,
        "citations": [
            {"passageId": str(c.citation.passage_id), "documentId": str(c.citation.document_id), "sha256": c.citation.sha256, "sourceState": c.state} for c in checked.citations.get(version.pk, [])
        ],
        "sourceState": checked.source_state(version.pk),
        "version": version.version,
        "validFrom": iso(version.valid_from),
        "validTo": iso(version.valid_to),
        "createdAt": iso(version.created_at),
        "expiresAt": iso(version.expires_at(ask_history)),
        "masked": list(version.masked_kinds),
    }
