"""Recall (SPEC §4.4): the newest 300 candidates, the live re-check, three rankings and RRF.

Query count is constant: candidates with their index entries and rows (1), their keys (1, key store), the re-check (0
when no candidate cites nor sits in a collection, else ≤3), the
workspace's entities (1, only when this process's cached matcher is older than the workspace's
entity generation), and the cited passages' entities when the query names one (1). The results are built from
the candidate rows already read (no query): 4 round trips for a recall with the access entry
(tests/recall/test_round_trips.py).

CPU per recall, beyond the round trips: the candidate rows come in binary on PostgreSQL, only the
five columns every candidate needs are converted (the results' rows in full), and the 300 index
entries are opened in one pass (`sealing.open_rows`); `tests/recall/test_read_path.py` checks the
answer equals one computed from the ORM's own reads.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np
from django.conf import settings
from django.db import connections, models

from core.db import binary_like_django, django_datetime, native_cursor
from governance.knowledge import matcher_for
from governance.models import Entity
from memoryapp import gates, metrics, sealing
from memoryapp.models import Citation, MemoryEmbedding, MemoryVersion
from memoryapp.recall.bm25 import bm25_scores
from memoryapp.recall.embedders import PendingQuery, get_embedder
from memoryapp.recall.fusion import rank_by_scores, rrf
from memoryapp.recall.stopwords import content_terms
from memoryapp.recall.tokenize import stem_terms, tokenize
from memoryapp.representation import memory_json
from memoryapp.visibility import Recheck, filtered_versions, recheck

logger = logging.getLogger(__name__)

CANDIDATES = 300  # SPEC §4.4: the newest 300
RRF_K = 60  # SPEC §4.4
BM25_K1, BM25_B = 1.5, 0.75  # SPEC §4.4 (Okapi)
# rank_bm25 replaces a negative Okapi idf (a term found in more than half of the candidates)
# by epsilon x the mean idf of all terms, which gives a term found in most candidates a share
# of a rare term's weight; 0 keeps Okapi's verdict (no weight). Both constants were chosen on
# LoCoMo's tuning conversations: docs/benchmarks.md "Recall constants: how they were chosen".
BM25_EPSILON = 0.0
# Candidates scoring below this share of the best BM25 score are left out of the ranking: a
# memory sharing only a minor term with the query is no evidence.
BM25_RELATIVE_FLOOR = 0.3


@dataclass(slots=True)
class Candidate:
    """What ranking needs of a memory version, and its row as the driver returned it (still
    sealed and unconverted: only the results are converted and opened)."""

    pk: int
    collection_id: int | None
    key_id: UUID | None = None
    owner: tuple[int, int] = (0, 0)  # (workspace id, member id) as stored: the index entry is bound to it
    embedder_id: str | None = None
    dim: int = 0
    vector: bytes | None = None
    terms: list[str] | None = None
    cites: bool = False
    row: tuple = ()


class Candidates(list):
    """The candidates, the ciphers that opened their index entries (they open the results too),
    and how a candidate's row becomes what the ORM would have given (`converter`)."""

    def __init__(self, items: Any = (), converter: RowConverter | None = None):
        super().__init__(items)
        self.keys: dict[UUID, Any] = {}
        self.converter = converter


#: The version's columns read with its candidate row: the results are built from them, so no
#: second query fetches the winners.
ROW_FIELDS = tuple(f.attname for f in MemoryVersion._meta.concrete_fields)
_COLUMN = {name: i for i, name in enumerate(ROW_FIELDS)}
#: The columns every candidate needs (ranking, the re-check, opening its index entry); the others
#: are converted only for the rows that become results.
_HEAD = tuple(_COLUMN[name] for name in ("id", "collection_id", "key_id", "workspace_id", "member_id"))
_DATETIMES = frozenset(
    i for i, f in enumerate(MemoryVersion._meta.concrete_fields) if isinstance(f, models.DateTimeField)
)


class RowConverter:
    """What the ORM does to a row of ROW_FIELDS as the driver returned it (its converters: sealed
    values wrapped, JSON decoded, and on SQLite ids and timestamps parsed): `rows` for whole rows,
    `heads` for the _HEAD columns alone. Recall converts the heads of its 300 candidates and the
    rows of its results only."""

    def __init__(self, compiler: Any, *, binary: bool = False):
        self.compiler = compiler
        self.converters = compiler.get_converters([column for column, _, _ in compiler.select])
        self.head_converters = {j: self.converters[i] for j, i in enumerate(_HEAD) if i in self.converters}
        self.binary = binary  # read on a binary native cursor: timestamps made Django's here (core.db)

    def rows(self, rows: list[tuple]) -> list[tuple]:
        if self.binary:
            connection = connections[self.compiler.using]
            rows = [
                tuple(django_datetime(v, connection) if i in _DATETIMES else v for i, v in enumerate(row))
                for row in rows
            ]
        return self._apply(rows, self.converters)

    def heads(self, heads: list[tuple]) -> list[tuple]:
        return self._apply(heads, self.head_converters)

    def _apply(self, rows: list[tuple], converters: dict) -> list[tuple]:
        return (
            [tuple(row) for row in self.compiler.apply_converters(rows, converters)]
            if converters
            else [tuple(row) for row in rows]
        )


def candidate_rows(admission: gates.Admission) -> tuple[list[tuple], RowConverter]:
    """ONE query: the newest 300 current (or current-at-asOf) versions matching filters and scope
    (the ORM's filter chain, `filtered_versions`, limited first: joining first made PostgreSQL
    join every version of the member before sorting), then, per row,
    its index entry (vector and terms still sealed) and whether it cites anything (an index probe
    on the citations: computed, so it cannot disagree with the citation rows). Each row: the
    version's columns (ROW_FIELDS) as the driver returned them, then embedder id, dim, vector,
    terms, cites; with the `RowConverter` that turns those columns into the ORM's values, so a
    caller converts only what it uses.

    On PostgreSQL the rows come in binary (psycopg's own cursor, `core.db.binary_like_django`):
    in text, parsing 1,800 timestamps (Django's loader is Python) and the hex of 1,500 bytea
    values was most of the fetch (docs/benchmarks.md "Figures behind code choices"); the
    timestamps of the rows shown are made Django's by `RowConverter.rows`."""
    queryset = filtered_versions(admission).values_list(*ROW_FIELDS)[:CANDIDATES]
    compiler = queryset.query.get_compiler(using=queryset.db)
    inner, params = compiler.as_sql()
    entry, citation = MemoryEmbedding._meta.db_table, Citation._meta.db_table
    sql = (
        f"SELECT c.*, e.embedder_id, e.dim, e.vector, e.terms, EXISTS (SELECT 1 FROM {citation} ct WHERE ct.memory_id "
        f"= c.id) FROM ({inner}) c LEFT JOIN {entry} e ON e.memory_id = c.id ORDER BY c.created_at DESC, c.id DESC"
    )
    connection = connections[queryset.db]
    if connection.vendor == "postgresql":
        with native_cursor(connection) as cursor:
            binary_like_django(cursor)
            cursor.execute(sql, params, binary=True)
            return cursor.fetchall(), RowConverter(compiler, binary=True)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall(), RowConverter(compiler)


def recall_candidates(admission: gates.Admission) -> Candidates:
    """The candidates with their index entries (`candidate_rows`, one query), then their data keys
    in one key-store query, and the entries opened in one pass (`sealing.open_rows`, SPEC §8.2): a
    candidate whose key is gone (an erase's leftover) or whose entry does not open is left out
    (memoryapp.sealing). Only the columns a candidate needs are converted here; its row is
    converted if it becomes a result (`result_versions`)."""
    rows, converter = candidate_rows(admission)
    width = len(ROW_FIELDS)
    heads = converter.heads([tuple(row[i] for i in _HEAD) for row in rows])
    candidates = Candidates(converter=converter)
    for (pk, collection, key_id, workspace, member), row in zip(heads, rows):
        embedder_id, dim, vector, terms, cites = row[width:]
        candidates.append(
            Candidate(
                pk,
                collection,
                key_id,
                (workspace, member),
                embedder_id,
                dim or 0,
                vector,
                terms,
                bool(cites),
                row[:width],
            )
        )
    candidates.keys = sealing.fetch_keys(c.key_id for c in candidates)
    indexed = [c for c in candidates if c.embedder_id is not None]  # no index entry (yet): ranked by nothing, as before
    opened = sealing.open_rows(
        MemoryEmbedding,
        [(c.key_id, c.owner, (c.vector, c.terms)) for c in indexed],
        ("vector", "terms"),
        candidates.keys,
    )
    unreadable: dict[str, int] = {}
    left_out: set[int] = set()
    for candidate, values in zip(indexed, opened):
        if isinstance(values, sealing.Unreadable):
            unreadable[values.reason] = unreadable.get(values.reason, 0) + 1
            if values.reason != sealing.MISSING_KEY:
                logger.error(
                    "recall candidate's index entry does not open: %s",
                    values,
                    extra={"row": candidate.pk, "reason": values.reason},
                )
            left_out.add(id(candidate))
            continue
        candidate.vector, candidate.terms = values[0], values[1].split()
    for reason, count in unreadable.items():
        sealing.content_unreadable.send(sender=MemoryEmbedding, reason=reason, count=count)
    if left_out:
        candidates[:] = [c for c in candidates if id(c) not in left_out]
    return candidates


def result_versions(candidates: list[Candidate], fetched: Candidates) -> dict[int, MemoryVersion]:
    """The chosen candidates as versions, built from the rows already read (converted now: only
    these rows are shown) and opened with the keys already fetched (no query); a row that does
    not open is left out (sealing)."""
    db = MemoryVersion.objects.db
    rows = [c.row for c in candidates]
    versions = [
        MemoryVersion.from_db(db, ROW_FIELDS, row)
        for row in (fetched.converter.rows(rows) if fetched.converter else rows)
    ]
    failed = sealing.open_instances(versions, keys=fetched.keys)
    return {v.pk: v for v in versions if id(v) not in failed}


def lexical_ranking(query: str, candidates: list[Candidate]) -> list[int]:
    """Okapi BM25 (k1 1.5, b 0.75, statistics over the candidates; a negative idf counts 0) over
    the query's terms without stop words (both sides stemmed, see tokenize.index_terms).

    Only candidates with real evidence are ranked: a shared query term and a score of at least
    BM25_RELATIVE_FLOOR of the best candidate's, ranked by (BM25 score, distinct query terms
    matched, newer first). A term found in more than half of the candidates has a negative
    Okapi idf, so a memory sharing only such terms (a LoCoMo speaker's name) scores 0 and falls
    under the floor. (Okapi's idf is exactly 0 for a term found in half of a small candidate
    set, so with two memories nothing would score: when no candidate scores above 0, sharing a
    term decides membership.)"""
    query_tokens = stem_terms(content_terms(tokenize(query)))
    if not query_tokens or not candidates:
        return []
    query_terms = set(query_tokens)
    docs = [c.terms or [] for c in candidates]
    matched = np.fromiter((len(query_terms.intersection(doc)) for doc in docs), dtype=np.int64, count=len(docs))
    keep = matched > 0
    if not keep.any():
        return []
    scores = bm25_scores(query_tokens, docs, k1=BM25_K1, b=BM25_B, epsilon=BM25_EPSILON)
    best = float(scores[keep].max())
    if best > 0:
        keep &= scores >= BM25_RELATIVE_FLOOR * best
    order = np.lexsort((np.arange(len(docs)), -matched, -scores))
    return [int(i) for i in order if keep[i]]


def semantic_ranking(
    query: str, candidates: list[Candidate], pending: PendingQuery | None = None
) -> tuple[list[int] | None, str | None]:
    """Cosine ranking of the candidates above the embedder's floor and within its margin of the
    best similarity, and always its best ``cosine_min_ranked`` above the floor (``cosine_floor``,
    ``cosine_margin``, ``cosine_min_ranked``, chosen per model: below them a similarity is no
    evidence), or None (and a degraded flag) if the query embedding misses its
    budget or was not started because the process had too many in flight (PendingQuery). The
    query is embedded once per request (``pending``, started by recall())."""
    if pending is None:
        pending = PendingQuery(get_embedder(settings.MEMORY_EMBEDDER), query)
    embedder = pending.embedder
    query_vector = pending.result(settings.SEMANTIC_BUDGET_SECONDS)
    metrics.query_embedded(
        embedder.id, time.monotonic() - pending.started, in_budget=query_vector is not None, busy=pending.busy
    )
    if query_vector is None:
        return None, "semantic"
    # A vector from another embedder is not comparable: left out until `reembed` runs.
    rows = [
        i
        for i, c in enumerate(candidates)
        if c.vector is not None and c.embedder_id == embedder.id and c.dim == query_vector.shape[0]
    ]
    if not rows:
        return [], None
    matrix = np.frombuffer(b"".join(candidates[i].vector for i in rows), dtype="<f4").reshape(
        len(rows), query_vector.shape[0]
    )
    similarities = (matrix @ query_vector).astype(np.float64)
    floor = max(float(getattr(embedder, "cosine_floor", 0.0)), 0.0)
    margin = float(getattr(embedder, "cosine_margin", 0.0))
    within = float(similarities.max()) - margin if margin > 0 else -np.inf
    always = int(getattr(embedder, "cosine_min_ranked", 0))  # 0 (off) for every embedder but e5
    # rank_by_scores keeps scores > 0: shift so that exactly the similarities above the floor remain;
    # of those, the best `always` and every one within the margin of the best.
    ranked = rank_by_scores(similarities - floor, positive_only=True)
    return [rows[i] for rank, i in enumerate(ranked) if rank < always or similarities[i] > within], None


# A query is matched against at most this many of the entities it names (the first mentioned):
# the link query and the overlap count stay bounded however many entities one query lists.
QUERY_ENTITIES = 32


def entity_ranking(
    query: str, candidates: list[Candidate], checked: Recheck, workspace_id: int, entity_version: tuple | None = None
) -> list[int]:
    """More entities shared between the query and a memory's cited passages ranks higher. The
    workspace's matcher is cached per process (`matcher_for`; `entity_version`: the workspace
    row's, already loaded by the gate); the query's first QUERY_ENTITIES entities count."""
    query_entities = matcher_for(workspace_id, entity_version).mentions(query, limit=QUERY_ENTITIES)
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
        [
            len(set().union(*(by_passage[pid] for pid in checked.passage_ids.get(v.pk, []))))
            if checked.passage_ids.get(v.pk)
            else 0
            for v in candidates
        ],
        dtype=np.float64,
    )
    return rank_by_scores(overlap, positive_only=True)


def rank_candidates(
    query: str,
    candidates: list[Candidate],
    checked: Recheck,
    workspace_id: int,
    pending: PendingQuery | None = None,
    entity_version: tuple | None = None,
) -> tuple[dict[str, list[int]], list[str]]:
    """The three rankings of the candidates (indices, best first) and the degraded flags.
    recall() fuses exactly these; bench/recall_locomo.py scores each of them alone."""
    degraded: list[str] = []
    rankings: dict[str, list[int]] = {}
    if candidates:
        rankings["bm25"] = lexical_ranking(query, candidates)
        semantic, flag = semantic_ranking(query, candidates, pending)
        if flag:
            degraded.append(flag)
        if semantic is not None:
            rankings["semantic"] = semantic
        rankings["entity"] = entity_ranking(query, candidates, checked, workspace_id, entity_version)
    return rankings, degraded


def recall(admission: gates.Admission) -> dict[str, Any]:
    ctx, data = admission.ctx, admission.data
    # Started first: the model embeds the query (without the GIL) while the database answers.
    pending = PendingQuery(get_embedder(settings.MEMORY_EMBEDDER), data["query"])
    fetched = recall_candidates(admission)
    checked = recheck(fetched, ctx.member, cites={c.pk for c in fetched if c.cites})
    candidates = checked.visible  # still newest first: a lower index is newer
    rankings, degraded = rank_candidates(
        data["query"], candidates, checked, ctx.workspace.pk, pending, ctx.workspace.entity_version
    )
    fused = list(rrf(rankings, k=RRF_K).items())[: data["limit"]]
    rows = result_versions([candidates[index] for index, _ in fused], fetched)
    results = []
    for index, (score, ranks) in fused:
        if candidates[index].pk not in rows:
            continue  # erased since the candidates were read (its key is gone)
        memory = memory_json(rows[candidates[index].pk], checked, ctx.ask_history)
        memory["score"] = score
        memory["ranks"] = {name: ranks.get(name) for name in ("bm25", "semantic", "entity")}
        results.append(memory)
    metrics.recall_answered(degraded)
    return {"memories": results, "hidden": checked.hidden, "considered": len(candidates), "degraded": degraded}
