"""What a memory version puts in the recall index: its embedding and its BM25 terms, both
computed from the masked text. Written by `actions.store_version` (and the re-embed command,
benchmarks), read back by `recall.service`; it imports no action, so recall never reaches up."""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet

from memoryapp.models import MemoryEmbedding, MemoryVersion
from memoryapp.recall.embedders import Embedder, get_embedder, to_bytes
from memoryapp.recall.tokenize import TERMS_FORMAT, index_terms


def index_entries(versions: Sequence[MemoryVersion], embedder: Embedder) -> list[MemoryEmbedding]:
    """The versions' embeddings (one batch through `embedder`) and recall terms, computed from their masked texts."""
    vectors = embedder.embed([version.text for version in versions])
    return [
        MemoryEmbedding(
            memory=version,
            embedder_id=embedder.id,
            dim=embedder.dim,
            vector=to_bytes(vector),
            terms=" ".join(index_terms(version.text)),
            terms_format=TERMS_FORMAT,
        )
        for version, vector in zip(versions, vectors)
    ]


def index_entry(version: MemoryVersion) -> MemoryEmbedding:
    """One version's entry with the configured embedder (MEMORY_EMBEDDER)."""
    return index_entries([version], get_embedder(settings.MEMORY_EMBEDDER))[0]


def stale_versions(embedder: Embedder) -> QuerySet[MemoryVersion]:
    """Versions whose entry is missing or was made by another embedder or term format: what a
    re-index must rewrite (recall leaves such a vector out of the cosine ranking meanwhile)."""
    return MemoryVersion.objects.filter(
        Q(embedding__isnull=True) | ~Q(embedding__embedder_id=embedder.id) | ~Q(embedding__terms_format=TERMS_FORMAT)
    )


@transaction.atomic
def replace_entries(entries: Sequence[MemoryEmbedding]) -> None:
    """Store re-computed entries over the old ones. Saved as rows (not update()): vector and
    terms are sealed under the version's own key. A version erased meanwhile gets none."""
    existing = set(
        MemoryEmbedding.objects.filter(memory_id__in=[e.memory_id for e in entries]).values_list("memory_id", flat=True)
    )
    for entry in entries:
        if entry.memory_id in existing:
            entry.save(force_update=True)
        elif MemoryVersion.objects.filter(pk=entry.memory_id).exists():
            entry.save(force_insert=True)
