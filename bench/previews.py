"""What an erase preview costs, on PostgreSQL (issue 17 §3): the owner's "Delete all" preview and
the retention-lowering preview of a workspace, then the real erase they describe.

    nice -n 10 .venv/bin/python bench/previews.py [--members 5] [--versions 2000] [--entries 20000] [--n 10]

Each member holds --versions agent memory versions (half past a 30-day retention) with two
citations and an embedding each, plus 50 assistant memories; the workspace's access log holds
--entries entries listing 10 memories each. The previews read ids and counts only; the figures
are the time a page or a dryRun request spends computing the manifest."""

from __future__ import annotations

import argparse
import random
import time
from datetime import timedelta

from _setup import setup, summary, timed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--versions", type=int, default=2000)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--n", type=int, default=10)
    args = parser.parse_args()
    setup("mem_previews_bench", redis_db=12)
    from django.db import connection
    from django.utils import timezone

    from governance import actions
    from memoryapp import actions as memory_actions
    from memoryapp.models import ASSISTANT_NAMESPACE, AccessEntry, Citation, MemoryEmbedding, MemoryVersion
    from retention import lifecycle, previews

    rng = random.Random(17)
    now = timezone.now()
    workspace, owner = actions.create_workspace("Bench", owner_email="bench-owner@x.test")
    members = [owner] + [actions.add_member(workspace, f"m{i}@x.test", role="editor") for i in range(args.members - 1)]
    all_ids: dict[int, list[int]] = {}
    for member in members:
        rows = [
            MemoryVersion(
                workspace=workspace,
                member=member,
                namespace=ASSISTANT_NAMESPACE if i < 50 else "bench",
                key=f"k{i}",
                text="bench note",
                text_length=10,
                retention_anchor=now - timedelta(days=rng.choice((5, 45)), hours=rng.randint(0, 23)),
            )
            for i in range(args.versions + 50)
        ]
        created = MemoryVersion.objects.bulk_create(rows, batch_size=2000)
        ids = [v.pk for v in created]
        all_ids[member.pk] = ids
        Citation.objects.bulk_create(
            [
                Citation(
                    memory_id=pk, position=p, passage_id=p + 1, document_id=1, document_version_id=1, sha256="1" * 64
                )
                for pk in ids
                for p in range(2)
            ],
            batch_size=5000,
        )
        MemoryEmbedding.objects.bulk_create(
            [MemoryEmbedding(memory_id=pk, embedder_id="bench", dim=1, vector=b"\0\0\0\0") for pk in ids],
            batch_size=5000,
        )
    per_member = args.entries // len(members)
    for member in members:
        AccessEntry.objects.bulk_create(
            [
                AccessEntry(
                    workspace=workspace,
                    member=member,
                    credential_ref=1,
                    credential_name="bench",
                    operation="recall",
                    surface="mcp",
                    returned=10,
                    memories=[{"id": pk, "v": 1} for pk in rng.sample(all_ids[member.pk], 10)],
                )
                for _ in range(per_member)
            ],
            batch_size=2000,
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    total = MemoryVersion.objects.filter(workspace=workspace).count()
    print(
        f"PostgreSQL; {len(members)} members, {total:,} versions, {Citation.objects.count():,} citations, "
        f"{AccessEntry.objects.count():,} access entries; n={args.n}"
    )

    ask_history = workspace.ask_history
    print(
        summary(
            "owner 'Delete all' preview (manifest)",
            timed(lambda: previews.plan_owner_bulk_delete(workspace).manifest(), args.n, warmup=2),
        )
    )
    print(
        summary(
            "retention 90 → 30 days preview (manifest)",
            timed(
                lambda: previews.plan_retention(ask_history, days=30, grace=30, now=timezone.now()).manifest(),
                args.n,
                warmup=2,
            ),
        )
    )
    manifest = previews.plan_retention(ask_history, days=30, grace=30, now=now).manifest()
    start = time.perf_counter()
    applied = lifecycle.apply_retention(workspace.pk, 30, 30, now)
    print(
        f"{'retention 90 → 30 days, applied':<48} {(time.perf_counter() - start) * 1000:7.0f} ms   erased "
        f"{applied['agentVersionsErased']:,} (preview {manifest['agentMemories']['versions']:,}), to Expired "
        f"{applied['assistantExpired']} (preview {manifest['assistantMemoriesToExpired']}), receipts "
        f"{applied['receipts']}"
    )
    manifest = previews.plan_owner_bulk_delete(workspace).manifest()
    start = time.perf_counter()
    result = memory_actions.delete_all_agent_memories(workspace, actor=None)
    print(
        f"{'owner Delete all, applied':<48} {(time.perf_counter() - start) * 1000:7.0f} ms   erased "
        f"{result['deleted']['memory_version']:,} (preview {manifest['artifacts']['memory_version']:,})"
    )


if __name__ == "__main__":
    main()
