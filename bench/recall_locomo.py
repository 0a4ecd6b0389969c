"""Benchmark: recall on LoCoMo (retrieval only, no LLM) — each ranking alone and the fusion.

    .venv/bin/python bench/recall_locomo.py [--data DIR] [--embedders e5,minilm,use,hashing]
        [--tune 26,30] [--only tune|other|all] [--set NAME=VALUE ...] [--json FILE] [--quiet]

Reads LoCoMo's development split from ``../shared/data/locomo-dev/`` (or ``--data``, ``$LOCOMO_DIR``);
research data, never copied into the repository; without it the script says so and exits 0. Every
observation is remembered through the product's write path and every answerable question recalled
through its read path; the fusion is ``service.recall()``'s own answer, checked to equal RRF over
the rankings it prints. Choose parameters on ``--tune`` only and read the other conversations
afterwards; ``--set`` overrides a named constant of ``memoryapp.recall`` for one run.

Method, relevance rule and metrics (recall@k, MRR@10, hit@5): docs/benchmarks.md "How the recall
benchmarks work"; results: docs/benchmarks.md "Default embedder".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DEFAULT_TUNE = ("26", "30")
LIMIT = 10


@dataclass
class Question:
    conversation: str
    text: str
    category: int
    relevant: set[int]  # observation indices in the conversation


@dataclass
class Conversation:
    name: str
    observations: list[tuple[str, str]]  # (text, dia_id), in dialogue order
    questions: list[Question] = field(default_factory=list)


def dia_ids(value) -> list[str]:
    """'D9:1 D4:4', 'D8:6; D9:17', 'D:11:26' and lists of them -> normalised 'D<session>:<turn>' ids."""
    values = value if isinstance(value, list) else [value]
    return [f"D{s}:{t}" for v in values for s, t in re.findall(r"D:?(\d+):(\d+)", str(v))]


def load_conversation(path: Path) -> Conversation:
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for key, per_speaker in data.items():
        match = re.fullmatch(r"session_(\d+)_observation", key)
        if not match:
            continue
        for speaker, items in per_speaker.items():
            for fact, dia in items:
                ids = dia_ids(dia)
                turn = min((int(i.split(":")[1]) for i in ids), default=0)
                rows.append((int(match.group(1)), turn, speaker, fact, ids))
    rows.sort(key=lambda r: (r[0], r[1]))  # dialogue order: later sessions are newer memories
    conversation = Conversation(path.stem.removeprefix("conv-"), [])
    by_dia: dict[str, list[int]] = {}
    for index, (_, _, speaker, fact, ids) in enumerate(rows):
        conversation.observations.append((f"{speaker}: {fact}", " ".join(ids)))
        for i in ids:
            by_dia.setdefault(i, []).append(index)
    for qa in data["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        relevant = {index for e in qa.get("evidence", []) for i in dia_ids(e) for index in by_dia.get(i, [])}
        if relevant:
            conversation.questions.append(Question(conversation.name, qa["question"], qa["category"], relevant))
    return conversation


def metrics(ranking: list[int], relevant: set[int]) -> dict[str, float]:
    top10 = ranking[:LIMIT]
    first = next((rank for rank, index in enumerate(top10, start=1) if index in relevant), None)
    return {
        "R@5": len(relevant.intersection(top10[:5])) / len(relevant),
        "R@10": len(relevant.intersection(top10)) / len(relevant),
        "MRR@10": 1.0 / first if first else 0.0,
        "hit@5": 1.0 if first and first <= 5 else 0.0,
    }


def _target(path: str):
    """'service.NAME' or 'embedders.E5Embedder.cosine_floor' -> (owner object, attribute name)."""
    import importlib

    module_name, *attrs = path.split(".")
    owner = importlib.import_module(f"memoryapp.recall.{module_name}")
    for attr in attrs[:-1]:
        owner = getattr(owner, attr)
    if not attrs or not hasattr(owner, attrs[-1]):
        raise SystemExit(f"--set/--sweep: memoryapp.recall.{path} does not exist")
    return owner, attrs[-1]


def set_constant(path: str, raw: str):
    owner, name = _target(path)
    current = getattr(owner, name)
    if isinstance(current, bool):
        value = raw.lower() in ("1", "true", "yes", "on")
    else:
        value = raw if isinstance(current, str) else type(current)(raw)
    setattr(owner, name, value)
    return value


def apply_overrides(pairs: list[str]) -> dict[str, object]:
    """--set MODULE.NAME=VALUE: override a named constant of memoryapp.recall for this run."""
    applied = {}
    for pair in pairs:
        target, _, raw = pair.partition("=")
        applied[target] = set_constant(target, raw)
    return applied


def sweep_grid(specs: list[str]) -> list[dict[str, str]]:
    """--sweep A=1,2 --sweep B=x,y -> every combination, as {path: raw value}."""
    grid: list[dict[str, str]] = [{}]
    for spec in specs:
        target, _, raws = spec.partition("=")
        _target(target)
        grid = [{**combo, target: raw} for combo in grid for raw in raws.split(",")]
    return grid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get("LOCOMO_DIR", str(DEFAULT_DATA)))
    parser.add_argument(
        "--embedders", default=None, help="comma-separated; default: every embedder whose package is installed"
    )
    parser.add_argument("--tune", default=",".join(DEFAULT_TUNE), help="conversations parameters are chosen on")
    parser.add_argument(
        "--only", choices=("tune", "other", "all"), default=None, help="load and report only this split"
    )
    parser.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE")
    parser.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="MODULE.NAME=V1,V2",
        help="evaluate every combination (compact output)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=30.0,
        help="semantic budget (s) for the measurement; misses of 0.8 s are reported",
    )
    parser.add_argument("--json", default=None, help="write the figures to this file")
    parser.add_argument("--quiet", action="store_true", help="overall figures only, no per-category tables")
    args = parser.parse_args()

    data = Path(args.data)
    files = sorted(data.glob("conv-*.json")) if data.is_dir() else []
    if not files:
        print(f"LoCoMo data not found in {data} (set --data or LOCOMO_DIR): benchmark skipped.")
        return 0
    tune = tuple(args.tune.split(","))
    conversations = [load_conversation(f) for f in files]
    if args.only == "tune":
        conversations = [c for c in conversations if c.name in tune]
    elif args.only == "other":
        conversations = [c for c in conversations if c.name not in tune]

    var_dir = tempfile.mkdtemp(prefix="bench_locomo_")
    try:
        from recall_quality import setup_django

        setup_django(var_dir)
        overrides = apply_overrides(args.set)
        return run(conversations, tune, args, overrides)
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)


def available_embedders(requested: str | None) -> list[str]:
    from memoryapp.recall.embedders import EmbedderUnavailable, embedder_names, require_embedder

    names = requested.split(",") if requested else list(embedder_names())
    usable = []
    for name in names:
        try:
            require_embedder(name)
            usable.append(name)
        except EmbedderUnavailable as exc:
            if requested:
                raise SystemExit(f"embedder {name!r} unavailable: {exc}") from None
            print(f"(embedder {name!r} left out: {exc})")
    return usable


def load(conversations: list[Conversation], embedders: list[str]) -> dict[tuple[str, str], tuple[str, dict[int, int]]]:
    """Per (conversation, embedder): a member's token and {memory pk: observation index}."""
    from django.test import override_settings

    from governance import actions
    from memoryapp import gates
    from memoryapp.actions import store_version

    members = {}
    for conversation in conversations:
        workspace, owner = actions.create_workspace(
            f"LoCoMo {conversation.name}", owner_email=f"owner{conversation.name}@bench.test"
        )
        actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=owner.user)
        for name in embedders:
            member = actions.add_member(workspace, f"{name}-{conversation.name}@bench.test", role="editor")
            _, token = actions.create_credential(member, name="bench", scopes=["memory:read", "memory:write"])
            index_of = {}
            with override_settings(MEMORY_EMBEDDER=name):
                for index, (text, _) in enumerate(conversation.observations):
                    admission = gates.admit(token, "remember", {"namespace": "locomo", "text": text})
                    # store_version directly: actions.remember would add the 120/hour rate limit.
                    version, _ = store_version(
                        workspace=workspace,
                        member=admission.ctx.member,
                        credential=admission.ctx.credential,
                        namespace="locomo",
                        key=None,
                        content=admission.content,
                        kind="",
                        source="agent",
                        collection_id=None,
                        passages=admission.passages,
                    )
                    index_of[version.pk] = index
            members[(conversation.name, name)] = (token, index_of)
    return members


def evaluate(questions: list[Question], embedders: list[str], members: dict, budget: float):
    """Scores per method, query-embedding times per embedder, and how many recall() answers
    differed from RRF over rank_candidates()."""
    from django.test import override_settings

    from memoryapp import gates
    from memoryapp.recall import service
    from memoryapp.recall.embedders import embed_query_within, get_embedder
    from memoryapp.recall.fusion import rrf
    from memoryapp.visibility import recheck

    methods = [
        "BM25",
        "entities",
        *(f"cosine {e}" for e in embedders),
        *(f"cosine {e} unfloored" for e in embedders),
        *(f"fusion {e}" for e in embedders),
    ]
    scores: dict[str, list[tuple[Question, dict[str, float]]]] = {m: [] for m in methods}
    embed_ms: dict[str, list[float]] = {e: [] for e in embedders}
    mismatches = 0
    for question in questions:
        for n, name in enumerate(embedders):
            token, index_of = members[(question.conversation, name)]
            with override_settings(MEMORY_EMBEDDER=name, SEMANTIC_BUDGET_SECONDS=budget):
                admission = gates.admit(token, "recall", {"query": question.text, "limit": LIMIT})
                checked = recheck(service.recall_candidates(admission), admission.ctx.member)
                candidates = checked.visible
                rankings, degraded = service.rank_candidates(
                    question.text, candidates, checked, admission.ctx.workspace.pk
                )
                assert not degraded, f"{name} missed even the {budget} s budget"
                answer = service.recall(admission)
            observation = [index_of[c.pk] for c in candidates]
            fused = [index_of[int(m["id"])] for m in answer["memories"]]
            if fused != [observation[i] for i in list(rrf(rankings, k=service.RRF_K))[:LIMIT]]:
                mismatches += 1
            if n == 0:  # BM25 and entities do not depend on the embedder
                scores["BM25"].append(
                    (question, metrics([observation[i] for i in rankings["bm25"]], question.relevant))
                )
                scores["entities"].append(
                    (question, metrics([observation[i] for i in rankings["entity"]], question.relevant))
                )
            scores[f"cosine {name}"].append(
                (question, metrics([observation[i] for i in rankings["semantic"]], question.relevant))
            )
            scores[f"fusion {name}"].append((question, metrics(fused, question.relevant)))
            start = time.perf_counter()
            query_vector = embed_query_within(get_embedder(name), question.text, budget)
            embed_ms[name].append((time.perf_counter() - start) * 1000)
            # The same embedder's cosine over every candidate, no floor or margin (what a plain
            # vector search, Mem0's, answers): the fair "best single ranking" for the fusion.
            scores[f"cosine {name} unfloored"].append(
                (
                    question,
                    metrics([observation[i] for i in plain_cosine(candidates, query_vector, name)], question.relevant),
                )
            )
    return methods, scores, embed_ms, mismatches


def plain_cosine(candidates, query_vector, name: str) -> list[int]:
    """Candidate indices by cosine similarity to the query, every candidate, newer first on ties."""
    import numpy as np

    from memoryapp.recall.embedders import get_embedder
    from memoryapp.recall.fusion import rank_by_scores

    embedder_id = get_embedder(name).id
    rows = [i for i, c in enumerate(candidates) if c.vector is not None and c.embedder_id == embedder_id]
    if not rows or query_vector is None:
        return []
    matrix = np.frombuffer(b"".join(candidates[i].vector for i in rows), dtype="<f4").reshape(len(rows), -1)
    return [rows[i] for i in rank_by_scores(matrix @ query_vector, positive_only=False)]


def summarise(rows: list[tuple[Question, dict[str, float]]]) -> dict:
    keys = ("R@5", "R@10", "MRR@10", "hit@5")
    overall = {k: statistics.fmean(s[k] for _, s in rows) for k in keys} if rows else {}
    per_cat = {
        CATEGORIES[c]: {k: statistics.fmean(s[k] for q, s in rows if q.category == c) for k in keys}
        for c in CATEGORIES
        if any(q.category == c for q, _ in rows)
    }
    return {"overall": overall, "category": per_cat}


def target_line(split_figures: dict, name: str) -> str:
    """The issue-14 targets for the fusion with embedder `name`."""
    fusion = split_figures[f"fusion {name}"]
    singles = ("BM25", f"cosine {name}", f"cosine {name} unfloored")  # entities rank nothing on LoCoMo

    def mh(method: str) -> float:
        return split_figures[method]["category"].get("multi-hop", {}).get("R@5", float("nan"))

    best = max(singles, key=lambda m: split_figures[m]["overall"]["R@5"])
    best_mh = max(singles, key=mh)
    line = f"fusion {name}: R@5 {fusion['overall']['R@5']:.3f}"
    for baseline in ("cosine minilm", "cosine minilm unfloored"):  # the latter is Mem0's plain search
        if baseline in split_figures:
            base = split_figures[baseline]["overall"]["R@5"]
            line += f" = {fusion['overall']['R@5'] / base:.3f} x {baseline} ({base:.3f})"
    line += (
        f"; minus best single ({best}) {fusion['overall']['R@5'] - split_figures[best]['overall']['R@5']:+.3f}; "
        f"multi-hop {mh(f'fusion {name}'):.3f}, minus best single ({best_mh}) {mh(f'fusion {name}') - mh(best_mh):+.3f}"
    )
    return line


def run(conversations: list[Conversation], tune: tuple[str, ...], args, overrides: dict) -> int:
    embedders = available_embedders(args.embedders)
    started = time.perf_counter()
    members = load(conversations, embedders)
    load_s = time.perf_counter() - started
    questions = [q for c in conversations for q in c.questions]
    splits = [
        ("tune", lambda q: q.conversation in tune),
        ("other", lambda q: q.conversation not in tune),
        ("all", lambda q: True),
    ]
    splits = [(label, pred) for label, pred in splits if any(pred(q) for q in questions)]
    if len(splits) == 2:  # "all" is one of the two others
        splits = splits[:1]
    present = sorted({q.conversation for q in questions})

    if args.sweep:
        print(
            f"sweep on conversations {', '.join(present)}: {len(questions)} questions; load average "
            f"{os.getloadavg()[0]:.2f}"
        )
        for combo in sweep_grid(args.sweep):
            applied = {path: set_constant(path, raw) for path, raw in combo.items()}
            methods, scores, _, mismatches = evaluate(questions, embedders, members, args.budget)
            for label, pred in splits:
                figures = {m: summarise([(q, s) for q, s in scores[m] if pred(q)]) for m in methods}
                cells = "  ".join(
                    f"{m} "
                    f"{figures[m]['overall']['R@5']:.3f}/"
                    f"{figures[m]['category'].get('multi-hop', {}).get('R@5', float('nan')):.3f}"
                    for m in methods
                    if m != "entities"
                )
                print(
                    f"{label:<5} "
                    + " ".join(f"{k.split('.')[-1]}={v}" for k, v in applied.items())
                    + f" | R@5 overall/multi-hop: {cells}"
                    + (f" MISMATCH {mismatches}" if mismatches else "")
                )
        return 0

    started = time.perf_counter()
    methods, scores, embed_ms, mismatches = evaluate(questions, embedders, members, args.budget)
    query_s = time.perf_counter() - started
    print(
        f"LoCoMo recall — conversations {', '.join(present)} (tune: "
        f"{', '.join(t for t in tune if t in present) or '-'}); {sum(len(c.observations) for c in conversations)} "
        f"memories, {len(questions)} questions; embedders {', '.join(embedders)}; load {load_s:.0f} s, queries "
        f"{query_s:.0f} s; load average {os.getloadavg()[0]:.2f}"
    )
    if overrides:
        print("overrides: " + ", ".join(f"{k}={v}" for k, v in overrides.items()))
    figures: dict = {"overrides": {k: str(v) for k, v in overrides.items()}, "splits": {}}
    width = max(len(m) for m in methods) + 2
    for label, pred in splits:
        rows = {m: [(q, s) for q, s in scores[m] if pred(q)] for m in methods}
        convs = sorted({q.conversation for q, _ in rows[methods[0]]})
        counts = {c: sum(1 for q, _ in rows[methods[0]] if q.category == c) for c in CATEGORIES}
        split_figures = {m: summarise(rows[m]) for m in methods}
        print(
            f"\n[{label}] conversations {', '.join(convs)}: {len(rows[methods[0]])} questions ("
            + ", ".join(f"{CATEGORIES[c]} {counts[c]}" for c in CATEGORIES)
            + ")"
        )
        header = f"{'ranking':<{width}} | {'R@5':>6} {'R@10':>6} {'MRR@10':>6} {'hit@5':>6} | " + " ".join(
            f"{CATEGORIES[c][:11]:>11}" for c in CATEGORIES
        )
        print(header + "   (per category: R@5)\n" + "-" * len(header))
        for method in methods:
            overall, per_cat = split_figures[method]["overall"], split_figures[method]["category"]
            cats = " ".join(
                f"{per_cat[CATEGORIES[c]]['R@5']:>11.3f}" if CATEGORIES[c] in per_cat else f"{'':>11}"
                for c in CATEGORIES
            )
            print(
                f"{method:<{width}} | {overall['R@5']:>6.3f} {overall['R@10']:>6.3f} "
                f"{overall['MRR@10']:>6.3f} {overall['hit@5']:>6.3f} | {cats}"
            )
        if not args.quiet:
            for metric in ("R@10", "MRR@10", "hit@5"):
                print(
                    f"{'by category: ' + metric:<{width}} | "
                    + " ".join(f"{CATEGORIES[c][:11]:>11}" for c in CATEGORIES)
                )
                for method in methods:
                    per_cat = split_figures[method]["category"]
                    print(
                        f"{'  ' + method:<{width}} | "
                        + " ".join(
                            f"{per_cat[CATEGORIES[c]][metric]:>11.3f}" if CATEGORIES[c] in per_cat else f"{'':>11}"
                            for c in CATEGORIES
                        )
                    )
        for name in embedders:
            print("  " + target_line(split_figures, name))
        figures["splits"][label] = {
            "conversations": convs,
            "questions": len(rows[methods[0]]),
            "methods": split_figures,
        }
    print()
    for name in embedders:
        ms = sorted(embed_ms[name])
        over = sum(1 for v in ms if v > 800)
        p95 = ms[int(0.95 * (len(ms) - 1))]
        print(
            f"query embedding {name:>8}: median {statistics.median(ms):7.2f} ms, p95 {p95:7.2f} ms, max {ms[-1]:7.2f} "
            f"ms, over the 800 ms budget {over}/{len(ms)}"
        )
        figures.setdefault("query_embedding_ms", {})[name] = {
            "median": statistics.median(ms),
            "p95": p95,
            "over_budget": over,
        }
    total = len(questions) * len(embedders)
    print(f"service.recall() == RRF of rank_candidates() for {total - mismatches}/{total} recalls")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
