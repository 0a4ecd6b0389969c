"""Typed results, field for field the response components of the server's `/api/schema/`
(`MemoryObject`, `RecalledMemoryObject`, `RememberResponse`, …; the client's suite checks each
dataclass against the served schema and every real answer against both).

A memory is an untrusted note, never evidence: `trust` is always "untrusted" and `evidence`
always False, and `fence.render_memories` fences them for a prompt exactly as the MCP server's
text output does."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from governed_memory import fence as _fence


def _instant(value: str | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass(frozen=True)
class Citation:
    passage_id: str
    document_id: str
    sha256: str
    source_state: Literal["current", "changed"]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Citation:
        return cls(
            passage_id=data["passageId"],
            document_id=data["documentId"],
            sha256=data["sha256"],
            source_state=data["sourceState"],
        )


@dataclass(frozen=True)
class Memory:
    id: str
    namespace: str
    key: str | None
    text: str
    kind: Literal["preference", "fact", "instruction"] | None
    details: list[str]
    source: str
    collection_id: str | None
    citations: list[Citation]
    source_state: Literal["current", "changed"] | None
    version: int
    valid_from: datetime
    valid_to: datetime | None
    created_at: datetime
    expires_at: datetime | None
    masked: list[str]
    type: Literal["memory"] = "memory"
    trust: Literal["untrusted"] = "untrusted"
    evidence: Literal[False] = False
    #: the memory object exactly as the server sent it (what the fence renders)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def _fields(cls, data: dict[str, Any]) -> dict[str, Any]:
        # trust and evidence are not read from the answer: a memory is never anything else.
        return {
            "id": data["id"],
            "namespace": data["namespace"],
            "key": data["key"],
            "text": data["text"],
            "kind": data["kind"],
            "details": list(data["details"]),
            "source": data["source"],
            "collection_id": data["collectionId"],
            "citations": [Citation.from_json(c) for c in data["citations"]],
            "source_state": data["sourceState"],
            "version": data["version"],
            "valid_from": _instant(data["validFrom"]),
            "valid_to": _instant(data["validTo"]),
            "created_at": _instant(data["createdAt"]),
            "expires_at": _instant(data["expiresAt"]),
            "masked": list(data["masked"]),
            "raw": data,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Memory:
        return cls(**cls._fields(data))

    def fenced(self) -> str:
        """This memory as one `<memory …>` element, escaped like the MCP server's text output."""
        return _fence.fence(self.raw)


@dataclass(frozen=True)
class Ranks:
    bm25: int | None
    semantic: int | None
    entity: int | None


@dataclass(frozen=True)
class RecalledMemory(Memory):
    score: float = 0.0
    ranks: Ranks = field(default_factory=lambda: Ranks(None, None, None))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecalledMemory:
        ranks = data["ranks"]
        return cls(
            **cls._fields(data),
            score=data["score"],
            ranks=Ranks(ranks.get("bm25"), ranks.get("semantic"), ranks.get("entity")),
        )


@dataclass(frozen=True)
class RememberResult:
    memory: Memory
    superseded: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RememberResult:
        return cls(memory=Memory.from_json(data["memory"]), superseded=data["superseded"])

    def render(self) -> str:
        return _fence.render_remember(self)


@dataclass(frozen=True)
class RecallResult:
    memories: list[RecalledMemory]
    hidden: int
    considered: int
    degraded: list[str]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecallResult:
        return cls(
            memories=[RecalledMemory.from_json(m) for m in data["memories"]],
            hidden=data["hidden"],
            considered=data["considered"],
            degraded=list(data["degraded"]),
        )

    def __iter__(self) -> Iterator[RecalledMemory]:
        return iter(self.memories)

    def __len__(self) -> int:
        return len(self.memories)

    def render(self) -> str:
        """The MCP `recall_memories` text: the untrusted header, a summary line, one fence per memory."""
        return _fence.render_recall(self)


@dataclass(frozen=True)
class ListPage:
    memories: list[Memory]
    hidden: int
    next_cursor: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ListPage:
        return cls(
            memories=[Memory.from_json(m) for m in data["memories"]],
            hidden=data["hidden"],
            next_cursor=data["nextCursor"],
        )

    def render(self) -> str:
        """The MCP `list_memories` text for this page."""
        return _fence.render_list(self)


@dataclass(frozen=True)
class ForgetResult:
    forgotten: int
    receipt_id: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ForgetResult:
        return cls(forgotten=data["forgotten"], receipt_id=data["receiptId"])

    def render(self) -> str:
        return _fence.render_forget(self)


@dataclass(frozen=True)
class TurnResult:
    """A conversation turn's consolidation: "queued" (202), or "skipped" with the reason (200)."""

    id: str
    status: Literal["queued", "skipped"]
    reason: str | None
    message: str | None = None
    personal_data: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TurnResult:
        c = data["consolidation"]
        return cls(
            id=c["id"],
            status=c["status"],
            reason=c["reason"],
            message=c.get("message"),
            personal_data=list(c.get("personalData") or []),
        )

    @property
    def queued(self) -> bool:
        return self.status == "queued"
