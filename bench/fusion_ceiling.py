"""How much can fusing BM25 with e5's cosine beat plain e5 cosine on LoCoMo? The ceiling of every cut.

    .venv/bin/python bench/fusion_ceiling.py [--data DIR] [--embedder e5] [--tune 26,30]

Figures for deciding whether SPEC §4.4 should change, not a tuning tool: the product's constants
stay chosen on the tuning conversations by bench/recall_locomo.py. Loads LoCoMo as that script does,
scores every question's candidates once (BM25 of the product's terms, cosine of the stored vectors)
and re-ranks offline, within SPEC §4.4 (a grid of floors, margins and depth cuts: an upper bound,
fitted to all five conversations) and beyond it (weighted RRF, smaller k, z-scored score fusion).
The first line is the product's own configuration and must equal bench/recall_locomo.py's fusion.

Method: docs/benchmarks.md "How the recall benchmarks work"; results: "Default embedder".
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall_locomo as rl  # noqa: E402  (bench/ on the path)


def collect(conversations, embedder_name: str) -> list[dict]:
    from django.test import override_settings

    from memoryapp import gates
    from memoryapp.recall import service
    from memoryapp.recall.bm25 import bm25_scores
    from memoryapp.recall.embedders import get_embedder
    from memoryapp.recall.stopwords import content_terms
    from memoryapp.recall.tokenize import stem_terms, tokenize
    from memoryapp.visibility import recheck

    members = rl.load(conversations, [embedder_name])
    embedder = get_embedder(embedder_name)
    rows = []
    for conversation in conversations:
        token, index_of = members[(conversation.name, embedder_name)]
        for question in conversation.questions:
            with override_settings(MEMORY_EMBEDDER=embedder_name):
                admission = gates.admit(token, "recall", {"query": question.text, "limit": rl.LIMIT})
                candidates = recheck(service.recall_candidates(admission), admission.ctx.member).visible
            query_terms = stem_terms(content_terms(tokenize(question.text)))
            docs = [c.terms or [] for c in candidates]
            bm25 = (
                bm25_scores(query_terms, docs, k1=service.BM25_K1, b=service.BM25_B, epsilon=service.BM25_EPSILON)
                if query_terms
                else np.zeros(len(docs))
            )
            matrix = np.frombuffer(b"".join(c.vector for c in candidates), dtype="<f4").reshape(len(candidates), -1)
            rows.append(
                {
                    "conversation": conversation.name,
                    "category": question.category,
                    "bm25": bm25,
                    "matched": np.array([len(set(query_terms).intersection(doc)) for doc in docs]),
                    "sims": (matrix @ embedder.embed_queries([question.text])[0]).astype(np.float64),
                    "relevant": np.array([index_of[c.pk] in question.relevant for c in candidates]),
                    "n_relevant": len(question.relevant),
                }
            )
    return rows


def bm25_ranking(q: dict, floor: float, depth: int | None = None) -> list[int]:
    """service.lexical_ranking on the stored scores: a shared term, >= floor x the best score."""
    scores, matched = q["bm25"], q["matched"]
    keep = matched > 0
    if not keep.any():
        return []
    best = scores[keep].max()
    if best > 0:
        keep &= scores >= floor * best
    order = np.lexsort((np.arange(len(scores)), -matched, -scores))
    ranking = [int(i) for i in order if keep[i]]
    return ranking[:depth] if depth else ranking


def cosine_ranking(q: dict, margin: float | None, depth: int | None = None, always: int = 0) -> list[int]:
    """service.semantic_ranking on the stored similarities: the best `always`, then within the margin."""
    sims = q["sims"]
    order = np.lexsort((np.arange(len(sims)), -sims))
    ranking = [
        int(i) for rank, i in enumerate(order) if rank < always or margin is None or sims[i] > sims.max() - margin
    ]
    return ranking[:depth] if depth else ranking


def fuse(rankings: list[list[int]], weights: list[float] | None = None, k: int = 60) -> list[int]:
    scores: dict[int, float] = {}
    for ranking, weight in zip(rankings, weights or [1.0] * len(rankings)):
        for rank, index in enumerate(ranking, start=1):
            scores[index] = scores.get(index, 0.0) + weight / (k + rank)
    return [i for i, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))]


def convex(q: dict, alpha: float) -> list[int]:
    def z(x):
        return (x - x.mean()) / x.std() if x.std() > 0 else np.zeros_like(x)

    combined = alpha * z(q["sims"]) + (1 - alpha) * z(q["bm25"])
    return [int(i) for i in np.lexsort((np.arange(len(combined)), -combined))]


def recall_at_5(q: dict, ranking: list[int]) -> float:
    return float(q["relevant"][ranking[:5]].sum()) / q["n_relevant"] if ranking else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("LOCOMO_DIR", str(rl.DEFAULT_DATA)))
    parser.add_argument("--embedder", default="e5")
    parser.add_argument("--tune", default=",".join(rl.DEFAULT_TUNE))
    args = parser.parse_args()
    files = sorted(Path(args.data).glob("conv-*.json")) if Path(args.data).is_dir() else []
    if not files:
        print(f"LoCoMo data not found in {args.data} (set --data or LOCOMO_DIR): benchmark skipped.")
        return 0
    tune = set(args.tune.split(","))
    var_dir = tempfile.mkdtemp(prefix="bench_ceiling_")
    try:
        from recall_quality import setup_django

        setup_django(var_dir)
        from memoryapp.recall import service
        from memoryapp.recall.embedders import get_embedder

        questions = collect([rl.load_conversation(f) for f in files], args.embedder)
        embedder = get_embedder(args.embedder)
        margin = float(getattr(embedder, "cosine_margin", 0.0)) or None
        always = int(getattr(embedder, "cosine_min_ranked", 0))
        splits = {
            "tune": [q for q in questions if q["conversation"] in tune],
            "other": [q for q in questions if q["conversation"] not in tune],
            "all": questions,
        }

        def figures(method) -> dict[str, tuple[float, float]]:
            out = {}
            for name, qs in splits.items():
                values = [recall_at_5(q, method(q)) for q in qs]
                multi = [v for q, v in zip(qs, values) if q["category"] == 1]
                out[name] = (float(np.mean(values)), float(np.mean(multi)) if multi else float("nan"))
            return out

        plain = figures(lambda q: cosine_ranking(q, None))

        def line(label: str, method) -> tuple[float, str]:
            f = figures(method)
            cells = "  ".join(f"{name} {f[name][0]:.3f}/{f[name][1]:.3f}" for name in splits)
            return (
                f["all"][0],
                f"{label:<46} {cells}   all minus cosine: {f['all'][0] - plain['all'][0]:+.3f} / multi-hop "
                f"{f['all'][1] - plain['all'][1]:+.3f}",
            )

        print(
            f"LoCoMo, {len(questions)} questions; R@5 overall/multi-hop; tuning {', '.join(sorted(tune))}; embedder "
            f"{args.embedder}"
        )
        print(line("cosine unfloored (plain vector search)", lambda q: cosine_ranking(q, None))[1])
        print(line("BM25 alone (product floor)", lambda q: bm25_ranking(q, service.BM25_RELATIVE_FLOOR))[1])
        product = line(
            f"product: RRF k=60, floor {service.BM25_RELATIVE_FLOOR}, margin {margin}, best {always}",
            lambda q: fuse([bm25_ranking(q, service.BM25_RELATIVE_FLOOR), cosine_ranking(q, margin, always=always)]),
        )
        print(product[1])

        print("\nwithin SPEC §4.4 (plain RRF, k = 60), every cut of a grid; the best five on all five conversations:")
        grid = []
        for floor in (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
            for cut in (0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.15, None):
                for keep in (0, 3, 5):
                    label = f"BM25 floor {floor}, cosine margin {cut}" + (f" + best {keep}" if keep else "")
                    grid.append(
                        line(
                            label,
                            lambda q, floor=floor, cut=cut, keep=keep: fuse(
                                [bm25_ranking(q, floor), cosine_ranking(q, cut, always=keep)]
                            ),
                        )
                    )
        for bm_depth in (3, 5, 10, None):
            for cos_depth in (3, 5, 8, 10, 20):
                grid.append(
                    line(
                        f"BM25 (floor 0.3) top {bm_depth}, cosine top {cos_depth}",
                        lambda q, a=bm_depth, c=cos_depth: fuse([bm25_ranking(q, 0.3, a), cosine_ranking(q, None, c)]),
                    )
                )
        for _, text in sorted(grid, key=lambda item: -item[0])[:5]:
            print(text)
        print(
            f"({len(grid)} configurations; the best is fitted to all five conversations: an upper bound, not a result)"
        )

        print("\nbeyond SPEC §4.4 (for the decision only):")
        for weight in (1.5, 2.0, 3.0):
            print(
                line(
                    f"RRF k=60, cosine weight {weight}, unfloored",
                    lambda q, w=weight: fuse([bm25_ranking(q, 0.3), cosine_ranking(q, None)], [1.0, w]),
                )[1]
            )
        for k in (5, 10, 20):
            print(
                line(
                    f"RRF k={k}, unfloored", lambda q, k=k: fuse([bm25_ranking(q, 0.3), cosine_ranking(q, None)], k=k)
                )[1]
            )
        for alpha in (0.6, 0.7, 0.8, 0.9):
            print(line(f"z-scored scores, {alpha} cosine + {1 - alpha:.1f} BM25", lambda q, a=alpha: convex(q, a))[1])
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
