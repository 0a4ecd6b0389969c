"""Rank fusion helpers: Reciprocal Rank Fusion and score -> ranking conversion.

Conventions: candidates are identified by their index in the candidate list, which
callers order newest-first, so a lower index means a newer memory and wins ties.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["rrf", "rank_by_scores"]


def rrf(rankings: Mapping[str, Sequence[int]], k: int = 60) -> dict[int, tuple[float, dict[str, int]]]:
    """Reciprocal Rank Fusion.

    ``rankings`` maps a ranking name to candidate indices in rank order (best first,
    rank 1).  Returns ``{index: (score, {name: rank})}`` where ``score`` is
    ``sum(1 / (k + rank))`` over the rankings that contain the index.  A candidate
    appearing twice in one ranking keeps its best (first) rank.

    The score is summed with ``math.fsum`` over the ranks sorted ascending, so two
    candidates with the same multiset of ranks get bit-identical scores whatever the
    order of the rankings.  The returned dict is ordered by score descending, ties by
    index ascending (newer first), so iterating it gives the fused ranking.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    ranks: dict[int, dict[str, int]] = {}
    for name, ranking in rankings.items():
        for rank, idx in enumerate(ranking, start=1):
            idx = int(idx)
            per = ranks.get(idx)
            if per is None:
                ranks[idx] = {name: rank}
            elif name not in per:
                per[name] = rank
    scored = [(math.fsum(1.0 / (k + r) for r in sorted(per.values())), idx, per) for idx, per in ranks.items()]
    scored.sort(key=lambda item: (-item[0], item[1]))
    return {idx: (score, per) for score, idx, per in scored}


def rank_by_scores(scores: np.ndarray, positive_only: bool) -> list[int]:
    """Indices sorted by score descending; ties by index ascending.

    With ``positive_only`` the indices whose score is ``<= 0`` (or NaN) are dropped.
    Without it, NaN scores are ranked last.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    if s.size == 0:
        return []
    idx = np.arange(s.size)
    if positive_only:
        keep = s > 0  # NaN compares False
        s = s[keep]
        idx = idx[keep]
    else:
        s = np.where(np.isnan(s), -np.inf, s)
    # Stable sort on the negated scores keeps ascending index order among ties.
    order = np.argsort(-s, kind="stable")
    return idx[order].tolist()
