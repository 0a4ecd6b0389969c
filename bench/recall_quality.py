"""Benchmark: recall quality (SPEC §4.4) — recall@5 and MRR of each ranking and of the fusion.

    .venv/bin/python bench/recall_quality.py [--data bench/data/recall_eval.json] [--budget 30] [--verbose]
        [--embedders e5,minilm,use,hashing] [--set MODULE.NAME=VALUE]

Builds a throwaway SQLite database (DATABASE_URL, REDIS_URL and CELERY_BROKER_URL are ignored),
loads the evaluation set through the product's own write paths and ranks every query with the
product's read path, once per installed embedder (vectors of the embedders not stored are computed
with ``index.index_entry`` and attached in memory). ``--set`` overrides a named constant of
``memoryapp.recall``; ``--budget`` raises the semantic budget so that load does not turn quality into
latency. A sanity check confirms that ``service.recall()`` returns the bench's fusion order.

Method and metrics: docs/benchmarks.md "How the recall benchmarks work"; results: "Default embedder".
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
DEFAULT_DATA = ROOT / "bench" / "data" / "recall_eval.json"
TOP = 5


def setup_django(var_dir: str) -> None:
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)
    os.environ["VAR_DIR"] = var_dir
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from config.celery import app as celery_app

    celery_app.conf.task_always_eager = True


def load(data: dict, stored_embedder: str):
    """Workspace, member, token; entities, documents, memories. Returns (token, member, ids)."""
    from django.test import override_settings

    from governance import actions
    from memoryapp import gates
    from memoryapp.actions import store_version

    workspace, owner = actions.create_workspace("Bench", owner_email="owner@bench.test", password="pw-owner-123")
    member = actions.add_member(workspace, "dana@bench.test", role="editor", password="pw-dana-123")
    actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=owner.user)
    member.refresh_from_db()
    _, token = actions.create_credential(member, name="bench agent", scopes=["memory:read", "memory:write"])

    for entity in data["entities"]:
        actions.create_entity(workspace, name=entity["name"], aliases=entity["aliases"])
    collection = actions.create_collection(workspace, name="Accounts and projects")
    passages: dict[tuple[str, int], int] = {}
    for key, doc in data["documents"].items():
        document = actions.create_document(collection, title=doc["title"], text="\n\n".join(doc["passages"]))
        for passage in document.current_version.passages.order_by("position"):
            passages[(key, passage.position)] = passage.pk

    memories = list(data["memories"])
    random.Random(4).shuffle(memories)  # interleave languages and kinds: "newer first" ties are not biased
    pk_of: dict[str, int] = {}
    with override_settings(MEMORY_EMBEDDER=stored_embedder):
        for memory in memories:
            body = {"namespace": memory["ns"], "text": memory["text"]}
            if memory.get("cites"):
                body["citations"] = [str(passages[(doc, pos)]) for doc, pos in memory["cites"]]
            admission = gates.admit(token, "remember", body)
            # store_version directly: actions.remember would add the 120/hour rate limit.
            version, _ = store_version(
                workspace=workspace,
                member=member,
                credential=admission.ctx.credential,
                namespace=memory["ns"],
                key=None,
                content=admission.content,
                kind="",
                source="agent",
                collection_id=None,
                passages=admission.passages,
            )
            pk_of[memory["id"]] = version.pk
    return token, member, pk_of


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


def index_entries(embedder: str) -> dict:
    from django.test import override_settings

    from memoryapp.models import MemoryVersion
    from memoryapp.recall.index import index_entry

    with override_settings(MEMORY_EMBEDDER=embedder):
        return {v.pk: index_entry(v) for v in MemoryVersion.objects.all()}


def attach(candidates, entries) -> None:
    """Give each candidate the index entry of the chosen embedder, as recall_candidates() would
    have loaded it had the memories been remembered with that embedder."""
    for candidate in candidates:
        entry = entries[candidate.pk]
        candidate.embedder_id, candidate.dim, candidate.vector = entry.embedder_id, entry.dim, bytes(entry.vector)
        candidate.terms = entry.terms.split()


def metrics(ranking: list[int], relevant: set[int]) -> tuple[float, float]:
    top = ranking[:TOP]
    recall = len(relevant.intersection(top)) / len(relevant)
    rr = next((1.0 / i for i, pk in enumerate(ranking, start=1) if pk in relevant), 0.0)
    return recall, rr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--budget", type=float, default=30.0, help="semantic budget in seconds for the measurement")
    parser.add_argument("--verbose", action="store_true", help="print each query's rank of its target per method")
    parser.add_argument(
        "--embedders", default=None, help="comma-separated; default: every embedder whose package is installed"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MODULE.NAME=VALUE",
        help="override a constant of memoryapp.recall (as in recall_locomo.py)",
    )
    args = parser.parse_args()
    data = json.loads(Path(args.data).read_text(encoding="utf-8"))

    var_dir = tempfile.mkdtemp(prefix="bench_recall_")
    try:
        setup_django(var_dir)
        from recall_locomo import apply_overrides

        overrides = apply_overrides(args.set)
        if overrides:
            print("overrides: " + ", ".join(f"{k}={v}" for k, v in overrides.items()))
        return run(data, args)
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)


def run(data: dict, args) -> int:
    from django.conf import settings
    from django.test import override_settings

    from memoryapp import gates
    from memoryapp.recall import service
    from memoryapp.recall.embedders import embed_query_within, get_embedder
    from memoryapp.recall.fusion import rrf
    from memoryapp.visibility import recheck

    stored = settings.MEMORY_EMBEDDER
    embedders = available_embedders(args.embedders)
    if stored not in embedders:
        embedders.append(stored)
    t0 = time.perf_counter()
    token, member, pk_of = load(data, stored)
    load_s = time.perf_counter() - t0
    entries = {name: index_entries(name) for name in embedders}
    for name in embedders:
        get_embedder(name).embed(["warm up"])

    methods = ["BM25", *embedders, "entities", *(f"fusion ({name})" for name in embedders), "BM25 + entities"]
    per_method: dict[str, list[tuple[float, float, dict]]] = {m: [] for m in methods}
    embed_ms: dict[str, list[float]] = {name: [] for name in embedders}
    mismatches = 0
    verbose_rows = []
    for query in data["queries"]:
        text = query["q"]
        relevant = {pk_of[r] for r in query["relevant"]}
        admission = gates.admit(token, "recall", {"query": text, "limit": 50})
        fetched = service.recall_candidates(admission)
        checked = recheck(fetched, admission.ctx.member)
        candidates = checked.visible
        pk = [c.pk for c in candidates]

        bm25 = service.lexical_ranking(text, candidates)
        entity = service.entity_ranking(text, candidates, checked, admission.ctx.workspace.pk)
        semantic: dict[str, list[int]] = {}
        for name in embedders:
            attach(candidates, entries[name])
            with override_settings(MEMORY_EMBEDDER=name, SEMANTIC_BUDGET_SECONDS=args.budget):
                ranking, flag = service.semantic_ranking(text, candidates)
            assert flag is None, f"{name} missed even the {args.budget}s budget"
            semantic[name] = ranking
            start = time.perf_counter()
            embed_query_within(get_embedder(name), text, args.budget)
            embed_ms[name].append((time.perf_counter() - start) * 1000)
        fused = {
            name: list(rrf({"bm25": bm25, "semantic": semantic[name], "entity": entity}, k=service.RRF_K))
            for name in embedders
        }
        rankings = {
            "BM25": bm25,
            **{name: semantic[name] for name in embedders},
            "entities": entity,
            **{f"fusion ({name})": fused[name] for name in embedders},
            "BM25 + entities": list(rrf({"bm25": bm25, "entity": entity}, k=service.RRF_K)),
        }
        row = {"q": text, "type": query["type"], "lang": query["lang"]}
        for method, ranking in rankings.items():
            ids = [pk[i] for i in ranking]
            recall, rr = metrics(ids, relevant)
            per_method[method].append((recall, rr, query))
            row[method] = round(1 / rr) if rr else "-"
        verbose_rows.append(row)

        # The product's own endpoint logic must agree with the bench's fusion (stored embedder).
        attach(candidates, entries[stored])
        with override_settings(SEMANTIC_BUDGET_SECONDS=args.budget):
            answer = service.recall(gates.admit(token, "recall", {"query": text, "limit": 50}))
        if [int(m["id"]) for m in answer["memories"]] != [pk[i] for i in fused[stored][:50]]:
            mismatches += 1

    groups = [
        ("all", lambda q: True),
        ("exact", lambda q: q["type"] == "exact"),
        ("paraphrase", lambda q: q["type"] == "paraphrase"),
        ("entity", lambda q: q["type"] == "entity"),
        ("English", lambda q: q["lang"] == "en"),
        ("Japanese", lambda q: q["lang"] == "ja"),
        ("para EN", lambda q: q["type"] == "paraphrase" and q["lang"] == "en"),
        ("para JA", lambda q: q["type"] == "paraphrase" and q["lang"] == "ja"),
    ]
    queries = data["queries"]
    n_mem = len(data["memories"])
    print(
        f"Recall quality — {n_mem} memories ({sum(1 for m in data['memories'] if m.get('cites'))} citing passages), "
        f"{len(data['documents'])} documents, {len(data['entities'])} entities, {len(queries)} queries "
        f"(load {load_s:.1f}s; stored embedder {stored!r})"
    )
    counts = "  ".join(f"{name} {sum(1 for q in queries if pred(q))}" for name, pred in groups)
    print(f"queries per group: {counts}\n")
    width = max(len(m) for m in methods)
    for label, col in (("recall@5", 0), ("MRR", 1)):
        print(f"{label:<{width}} | " + " | ".join(f"{name:>10}" for name, _ in groups))
        print("-" * width + "-+-" + "-+-".join("-" * 10 for _ in groups))
        for method in methods:
            cells = []
            for _, pred in groups:
                values = [r[col] for r in per_method[method] if pred(r[2])]
                cells.append(f"{statistics.fmean(values):>10.3f}" if values else f"{'':>10}")
            print(f"{method:<{width}} | " + " | ".join(cells))
        print()
    for name in embedders:
        ms = sorted(embed_ms[name])
        over = sum(1 for v in ms if v > 800)
        print(
            f"query embedding {name:>7}: median {statistics.median(ms):7.2f} ms, max {ms[-1]:7.2f} ms, over 800 ms "
            f"budget: {over}/{len(ms)}"
        )
    print(f"service.recall() order == bench fusion ({stored}) for {len(queries) - mismatches}/{len(queries)} queries")
    if args.verbose:
        print("\nrank of the first relevant memory per method ('-' = not ranked):")
        print("\t".join(["type", "lang", *methods, "query"]))
        for row in verbose_rows:
            print("\t".join(str(row[k]) for k in ["type", "lang", *methods]) + "\t" + row["q"])
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
