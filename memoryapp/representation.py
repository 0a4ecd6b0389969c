"""The memory object `M` of SPEC §3, the same for REST, MCP and the member API."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from governance.models import AskHistorySettings
from memoryapp.models import MemoryVersion
from memoryapp.visibility import Recheck, expires_at


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


def memory_json(version: MemoryVersion, checked: Recheck, settings: AskHistorySettings) -> dict[str, Any]:
    return {
        "id": str(version.pk),
        "type": "memory",
        "evidence": False,
        "trust": "untrusted",
        "namespace": version.namespace,
        "key": version.key,
        "text": version.text,
        "kind": version.kind or None,
        "details": version.details.split("\n") if version.details else [],
        "source": version.source,
        "collectionId": str(version.collection_id) if version.collection_id else None,
        "citations": [
            {"passageId": str(c.citation.passage_id), "documentId": str(c.citation.document_id), "sha256": c.citation.sha256, "sourceState": c.state}
            for c in checked.citations.get(version.pk, [])
        ],
        "sourceState": checked.source_state(version.pk),
        "version": version.version,
        "validFrom": iso(version.valid_from),
        "validTo": iso(version.valid_to),
        "createdAt": iso(version.created_at),
        "expiresAt": iso(expires_at(version, settings)),
        "masked": list(version.masked_kinds),
    }
