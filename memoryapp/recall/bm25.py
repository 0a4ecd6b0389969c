"""Vectorised BM25 (Okapi) scoring, numerically identical to ``rank_bm25.BM25Okapi``.

``rank_bm25`` rebuilds per-document dicts and loops over the query in Python for
every call; this module does the same maths with numpy over a (docs x query-terms)
term-frequency matrix.  It reproduces rank_bm25 0.2.2 exactly, quirks included:

* ``idf(t) = log(N - n_t + 0.5) - log(n_t + 0.5)`` (can be negative);
* negative idfs are replaced by ``epsilon * average_idf`` where the average is
  over the idf of *every* term in the corpus (before replacement);
* a query term absent from the corpus contributes 0; a repeated query term
  contributes once per occurrence;
* the per-document score is accumulated in query order, like rank_bm25's loop.

The idf average is summed sequentially in rank_bm25's term order (first occurrence
in corpus order) so it is bit-identical; the per-term arithmetic follows the same
expression order.  Results agree with rank_bm25 to the last bit in practice and
always within ``np.allclose(rtol=1e-9)``.

Unlike rank_bm25, an empty corpus, an empty query, or a corpus of empty
documents yields zeros instead of raising ``ZeroDivisionError``.
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import chain
from operator import itemgetter

import numpy as np

__all__ = ["bm25_scores"]


def bm25_scores(
    query_tokens: list[str],
    docs_tokens: list[list[str]],
    k1: float = 1.5,
    b: float = 0.75,
    epsilon: float = 0.25,
) -> np.ndarray:
    """Return one BM25Okapi score per document (float64 array, ``len(docs_tokens)``)."""
    n_docs = len(docs_tokens)
    scores = np.zeros(n_docs, dtype=np.float64)
    if n_docs == 0 or not query_tokens:
        return scores

    # Unique query terms in first-occurrence order, and each query position's column.
    uniq: dict[str, int] = {}
    for t in query_tokens:
        if t not in uniq:
            uniq[t] = len(uniq)
    uq = list(uniq)
    n_uq = len(uq)
    query_cols = np.fromiter((uniq[t] for t in query_tokens), dtype=np.intp, count=len(query_tokens))

    # Per doc: term counts (Counter keeps first-occurrence order, like rank_bm25's
    # dict); document frequencies of every corpus term, counted in rank_bm25's
    # insertion order (doc by doc, first occurrence); tf of the query terms.
    counters = list(map(Counter, docs_tokens))
    df: Counter[str] = Counter(chain.from_iterable(counters))
    lengths = list(map(len, docs_tokens))
    doc_len = np.array(lengths, dtype=np.float64)
    total_len = sum(lengths)
    # itemgetter on a Counter gives 0 for missing terms (Counter.__missing__).
    tf = np.array(list(map(itemgetter(*uq), counters)), dtype=np.float64).reshape(n_docs, n_uq)

    if not df:  # every document is empty: nothing can match
        return scores

    # idf of every corpus term depends only on its document frequency (1..N):
    # tabulate with math.log exactly as rank_bm25 does, then gather.
    idf_table = np.array(
        [0.0] + [math.log(n_docs - n + 0.5) - math.log(n + 0.5) for n in range(1, n_docs + 1)],
        dtype=np.float64,
    )
    df_counts = np.fromiter(df.values(), dtype=np.intp, count=len(df))
    all_idf = idf_table[df_counts]
    # rank_bm25 sums idfs with a plain sequential loop; cumsum is sequential too.
    average_idf = float(np.cumsum(all_idf)[-1]) / len(df)
    eps = epsilon * average_idf

    q_idf = np.zeros(n_uq, dtype=np.float64)
    for j, t in enumerate(uq):
        d = df.get(t)
        if d:
            v = idf_table[d]
            q_idf[j] = eps if v < 0 else v

    avgdl = total_len / n_docs
    norm = k1 * (1 - b + b * doc_len / avgdl)  # per document, same expression order
    with np.errstate(divide="ignore", invalid="ignore"):
        contrib = q_idf * (tf * (k1 + 1) / (tf + norm[:, None]))
    # Degenerate parameters (k1 == 0, or b == 1 with an empty document) make
    # tf + norm == 0; rank_bm25 then yields nan. Return 0 for such a term instead.
    if not np.isfinite(contrib).all():
        contrib = np.where(np.isfinite(contrib), contrib, 0.0)

    if len(query_tokens) == 1:
        return contrib[:, 0].copy()
    # Accumulate in query order (duplicates included), like rank_bm25's loop.
    return np.cumsum(contrib[:, query_cols], axis=1)[:, -1].copy()
