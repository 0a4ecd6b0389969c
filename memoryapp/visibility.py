"""What a read path may return: live versions (`MemoryVersion.objects.restrict`: not expired, not
unreachable) that pass the live source re-check of SPEC §4.2. Used by list, recall, the member
API, pages and MCP alike."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import QuerySet
from django.utils import timezone

from governance.models import Collection, Member, Passage
from memoryapp import gates
from memoryapp.models import Citation, MemoryVersion


def filtered_versions(admission: gates.Admission) -> QuerySet[MemoryVersion]:
    """What an admitted read (list, recall) may see: the member's live versions
    (`MemoryVersion.objects.restrict`) matching the read filters and the credential's context set."""
    ctx, data = admission.ctx, admission.data
    queryset = MemoryVersion.objects.restrict(ctx.member, "view", ask_history=ctx.ask_history).matching(
        as_of=data.get("asOf"),
        namespace=data.get("namespace"),
        key=data.get("key"),
        collection_id=data.get("collectionId"),
    )
    if admission.scope is not None:
        queryset = queryset.filter(gates.in_scope_q(admission.scope))
    return queryset


CURRENT = "current"
CHANGED = "changed"


@dataclass
class CheckedCitation:
    citation: Citation
    state: str


@dataclass
class Recheck:
    visible: list[MemoryVersion]
    hidden: int
    citations: dict[int, list[CheckedCitation]] = field(default_factory=dict)
    passage_ids: dict[int, list[int]] = field(default_factory=dict)

    def source_state(self, memory_id: int) -> str | None:
        checked = self.citations.get(memory_id)
        if not checked:
            return None
        return CHANGED if any(c.state == CHANGED for c in checked) else CURRENT


def recheck(
    versions: list[MemoryVersion], member: Member, now: datetime | None = None, *, cites: set[int] | None = None
) -> Recheck:
    """Hide memories whose sources are gone or unreadable; mark changed ones. At most three
    queries whatever the number of memories and citations. `cites`: the versions known to cite
    (recall reads it with its candidates, from the citation rows themselves); the citations of
    the others are not read, and none at all when no version cites nor sits in a collection."""
    if not versions:
        return Recheck(visible=[], hidden=0)
    now = now or timezone.now()
    by_memory: dict[int, list[Citation]] = defaultdict(list)
    citing = [v.pk for v in versions] if cites is None else [v.pk for v in versions if v.pk in cites]
    for citation in Citation.objects.filter(memory_id__in=citing).order_by("memory_id", "position") if citing else ():
        by_memory[citation.memory_id].append(citation)
    passage_ids = {c.passage_id for cs in by_memory.values() for c in cs}
    passages = {}
    if passage_ids:
        passages = {
            p.pk: p
            for p in Passage.objects.filter(pk__in=passage_ids)
            .select_related("document")
            .only(
                "id",
                "sha256",
                "version_id",
                "document_id",
                "document__workspace_id",
                "document__collection_id",
                "document__current_version_id",
                "document__expires_at",
            )
        }
    collection_ids = {v.collection_id for v in versions if v.collection_id} | {
        p.document.collection_id for p in passages.values()
    }
    readable: set[int] = set()
    if collection_ids:
        readable = set(
            Collection.objects.restrict(member, "view").filter(pk__in=collection_ids).values_list("pk", flat=True)
        )
    visible: list[MemoryVersion] = []
    checked_by_memory: dict[int, list[CheckedCitation]] = {}
    hidden = 0
    for version in versions:
        if version.collection_id and version.collection_id not in readable:
            hidden += 1
            continue
        checked: list[CheckedCitation] = []
        ok = True
        for citation in by_memory.get(version.pk, []):
            passage = passages.get(citation.passage_id)
            document = passage.document if passage else None
            if (
                document is None
                or document.workspace_id != member.workspace_id
                or document.is_expired(now)
                or document.collection_id not in readable
            ):
                ok = False
                break
            changed = document.current_version_id != citation.document_version_id or passage.sha256 != citation.sha256
            checked.append(CheckedCitation(citation, CHANGED if changed else CURRENT))
        if not ok:
            hidden += 1
            continue
        visible.append(version)
        checked_by_memory[version.pk] = checked
    return Recheck(
        visible=visible,
        hidden=hidden,
        citations=checked_by_memory,
        passage_ids={mid: [c.citation.passage_id for c in cs] for mid, cs in checked_by_memory.items()},
    )
