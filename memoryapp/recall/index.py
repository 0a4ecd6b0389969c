"""What a memory version puts in the recall index: its embedding and its BM25 terms, both
computed from the masked text. Written by `actions.store_version` (and the re-embed command,
benchmarks), read back by `recall.service`; it imports no action, so recall never reaches up."""

from __future__ import annotations

from django.conf import settings

from memoryapp.models import MemoryEmbedding, MemoryVersion
from memoryapp.recall.embedders import get_embedder, to_bytes
from memoryapp.recall.tokenize import TERMS_FORMAT, index_terms


def index_entry(version: MemoryVersion) -> MemoryEmbedding:
    """The version's embedding and recall terms, computed from its masked text."""
    embedder = get_embedder(settings.MEMORY_EMBEDDER)
    vector = embedder.embed([version.text])[0]
    return MemoryEmbedding(memory=version, embedder_id=embedder.id, dim=embedder.dim, vector=to_bytes(vector), terms=" ".join(index_terms(version.text)), terms_format=TERMS_FORMAT)
