"""Recall (SPEC §4.4): the newest 300 candidates, the live re-check, three rankings and RRF.

Query count is constant: candidates with their embeddings (1), the re-check (≤3), the
workspace's entities (1) and, when the query names an entity, the cited passages' entities (1).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from django.conf import settings

from governance.knowledge import EntityMatcher
from governance.models import Entity
from memoryapp import gates
from memoryapp.actions import filtered_versions
from memoryapp.models import MemoryVersion
from memoryapp.recall.bm25 import bm25_scores
from memoryapp.recall.embedders import embed_query_within, from_bytes, get_embedder
from memoryapp.recall.fusion import rank_by_scores, rrf
from memoryapp.recall.tokenize import tokenize
from memoryapp.representation import memory_json
from memoryapp.visibility import Recheck, recheck

CANDIDATES = 300
RRF_K = 60


def recall_candidates(admission: gates.Admission) -> list[MemoryVersion]:
    """The newest 300 current (or current-at-asOf) memories matching filters and scope, with
    their embeddings, in one indexed query."""
    return list(filtered_versions(admission).select_related("embedding")[:CANDIDATES])


def stored_terms(version: MemoryVersion) -> list[str]:
    embedding = getattr(version, "embedding", None)
    return embedding.terms.split() if embedding is not None and embedding.terms else tokenize(version.text)


def lexical_ranking(query: str, candidates: list[MemoryVersion]) -> list[int]:
    """Okapi BM25 (k1 1.5, b 0.75, statistics over the candidates), exactly as rank_bm25 scores it.

    Okapi's idf is log((N - n + 0.5) / (n + 0.5)): a term found in half of a small candidate set
    weighs exactly 0, so with two memories nothing would rank. Memories that contain at least one
    query term are therefore ranked by (BM25 score, distinct query terms matched, newer first);
    memories sharing no term are not in this ranking."""
    query_tokens = tokenize(query)
    query_terms = set(query_tokens)
    docs = [stored_terms(v) for v in candidates]
    scores = bm25_scores(query_tokens, docs, k1=1.5, b=0.75)
    matched = np.fromiter((len(query_terms.intersection(doc)) for doc in docs), dtype=np.int64, count=len(docs))
    order = np.lexsort((np.arange(len(docs)), -matched, -scores))
    return [int(i) for i in order if matched[i] > 0]


def semantic_ranking(query: str, candidates: list[MemoryVersion]) -> tuple[list[int] | None, str | None]:
    """Cosine ranking, or None (and a degraded flag) if the query embedding misses its budget."""
    embedder = get_embedder(settings.MEMORY_EMBEDDER)
    query_vector = embed_query_within(embedder, query, settings.SEMANTIC_BUDGET_SECONDS)
    if query_vector is None:
        return None, "semantic"
    rows, vectors = [], []
    for index, version in enumerate(candidates):
        embedding = getattr(version, "embedding", None)
        # A vector from another embedder is not comparable: left out until `reembed` runs.
        if embedding is not None and embedding.embedder_id == embedder.id and embedding.dim == query_vector.shape[0]:
            rows.append(index)
            vectors.append(from_bytes(bytes(embedding.vector), embedding.dim))
    if not rows:
        return [], None
    similarities = np.stack(vectors) @ query_vector
    return [rows[i] for i in rank_by_scores(similarities, positive_only=True)], None


def entity_ranking(query: str, candidates: list[MemoryVersion], checked: Recheck, workspace_id: int) -> list[int]:
    """More entities shared between the query and a memory's cited passages ranks higher."""
    query_entities = EntityMatcher.for_workspace(workspace_id).find(query)
    if not query_entities:
        return []
    passage_ids = {pid for version in candidates for pid in checked.passage_ids.get(version.pk, [])}
    if not passage_ids:
        return []
    by_passage: dict[int, set[int]] = defaultdict(set)
    links = Entity.passages.through.objects.filter(passage_id__in=passage_ids, entity_id__in=query_entities)
    for passage_id, entity_id in links.values_list("passage_id", "entity_id"):
        by_passage[passage_id].add(entity_id)
    overlap = np.array(
        [len(set().union(*(by_passage[pid] for pid in checked.passage_ids.get(v.pk, [])))) if checked.passage_ids.get(v.pk) else 0 for v in candidates],
        dtype=np.float64,
    )
    return rank_by_scores(overlap, positive_only=True)


def recall(admission: gates.Admission) -> dict[str, Any]:
    ctx, data = admission.ctx, admission.data
    query = data["query"]
    fetched = recall_candidates(admission)
    checked = recheck(fetched, ctx.member)
    candidates = checked.visible  # still newest first: a lower index is newer
    degraded: list[str] = []
    rankings: dict[str, list[int]] = {}
    if candidates:
        rankings["bm25"] = lexical_ranking(query, candidates)
        semantic, flag = semantic_ranking(query, candidates)
        if flag:
            degraded.append(flag)
        if semantic is not None:
            rankings["semantic"] = semantic
        rankings["entity"] = entity_ranking(query, candidates, checked, ctx.workspace.pk)
    fused = rrf(rankings, k=RRF_K)
    results = []
    for index, (score, ranks) in list(fused.items())[: data["limit"]]:
        memory = memory_json(candidates[index], checked, ctx.settings)
        memory["score"] = score
        memory["ranks"] = {name: ranks.get(name) for name in ("bm25", "semantic", "entity")}
        results.append(memory)
    return {"memories": results, "hidden": checked.hidden, "considered": len(candidates), "degraded": degraded}
