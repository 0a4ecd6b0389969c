"""Knowledge rules shared by ingestion, citation checks, the live re-check and recall:
what a member may read, how text splits into passages, and which entities a text mentions."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from django.db.models import Q, QuerySet
from django.utils import timezone

from governance.models import Collection, ContextSet, Document, Entity, Member

_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]")


def split_passages(text: str) -> list[str]:
    """Passages are the non-empty paragraphs of a text (split on blank lines), in order."""
    normalised = text.replace("\r\n", "\n").replace("\r", "\n")
    return [part.strip() for part in _BLANK_LINE.split(normalised) if part.strip()]


def readable_collections_q(member: Member, prefix: str = "") -> Q:
    """Collections the member may read: unrestricted ones, or restricted ones listing the member."""
    return Q(**{f"{prefix}restricted": False}) | Q(**{f"{prefix}readers": member})


def readable_collections(member: Member) -> QuerySet[Collection]:
    return Collection.objects.filter(Q(workspace_id=member.workspace_id) & readable_collections_q(member)).distinct()


def readable_documents(member: Member) -> QuerySet[Document]:
    now = timezone.now()
    return Document.objects.filter(Q(workspace_id=member.workspace_id) & (Q(expires_at__isnull=True) | Q(expires_at__gt=now)) & Q(collection__in=readable_collections(member).values("id")))


def context_set_document_ids(context_set: ContextSet) -> set[int]:
    listed = set(context_set.documents.values_list("id", flat=True))
    in_collections = set(Document.objects.filter(collection__in=context_set.collections.all()).values_list("id", flat=True))
    return listed | in_collections


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _form_pattern(form: str) -> str:
    escaped = re.escape(_normalise(form))
    if _CJK.search(form):
        return escaped  # CJK text has no word boundaries: a substring match is the best signal
    return rf"(?<!\w){escaped}(?!\w)"


class EntityMatcher:
    """Finds which of a workspace's entities a text mentions (names and aliases, case-insensitive,
    on word boundaries; as a substring in CJK text)."""

    def __init__(self, entities: Iterable[Entity]):
        self._patterns: list[tuple[int, re.Pattern[str]]] = []
        for entity in entities:
            forms = [form for form in entity.surface_forms if form.strip()]
            if forms:
                self._patterns.append((entity.pk, re.compile("|".join(_form_pattern(f) for f in forms))))

    def find(self, text: str) -> set[int]:
        normalised = _normalise(text)
        return {entity_id for entity_id, pattern in self._patterns if pattern.search(normalised)}

    @classmethod
    def for_workspace(cls, workspace_id: int) -> EntityMatcher:
        return cls(Entity.objects.filter(workspace_id=workspace_id).only("id", "name", "aliases"))
