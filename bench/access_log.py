"""What the access log costs, on PostgreSQL + Redis (issue 17 §1: one INSERT per read, inside the
request; recall and list targets must still hold).

    .venv/bin/python bench/access_log.py [--n 300] [--entries 20000]

A member holds 5,000 versions. Recall and list are timed as agents run them
(`memoryapp.reads`: the read, then its entry) and without the entry, **interleaved** call by call so
that machine noise falls on both alike; then the entry alone, three ways interleaved: the plain
ORM INSERT it was before issue 32, the statement that lists only versions still stored with a
synchronous commit, and the same with the asynchronous commit `access_log.record` uses; then a forget of one memory when
the member's access log holds --entries entries (each listing 10 memories), i.e. the cost of
striking it from the log inside the erase (GIN lookup), against the same erase of a memory no
entry lists."""

from __future__ import annotations

import argparse
import os
import random
import time

from _setup import pct, setup, summary


def interleaved(a, b, n: int, warmup: int = 5) -> tuple[list[float], list[float]]:
    for _ in range(warmup):
        a()
        b()
    first, second = [], []
    for i in range(n):
        for fn, samples in ((a, first), (b, second)) if i % 2 == 0 else ((b, second), (a, first)):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1000)
    return first, second


def difference(label: str, logged: list[float], bare: list[float]) -> str:
    return (
        f"{label:<48} p50 {pct(logged, 50) - pct(bare, 50):+7.2f} ms   p95 {pct(logged, 95) - pct(bare, 95):+7.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--db", default="bench_access_log", help="PostgreSQL database to (re)create")
    args = parser.parse_args()
    setup(args.db)
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone
    from recall_latency import QUERIES, populate_member

    from governance import actions
    from memoryapp import access_log, gates, reads
    from memoryapp import actions as memory_actions
    from memoryapp.models import AccessEntry, MemoryVersion
    from memoryapp.recall.service import recall
    from retention.erasure import erase_memories

    rng = random.Random(7)
    workspace, _ = actions.create_workspace("Bench", owner_email="bench-owner@x.test")
    actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=None)
    member = actions.add_member(workspace, "m@x.test", role="editor")
    populate_member(member, workspace, 5000, rng)
    credential, token = actions.create_credential(member, name="bench", scopes=["memory:read", "memory:write"])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    queries = iter(QUERIES * 100_000)
    # `memoryapp.reads` also takes a read-limit slot (SPEC §4.7, one Redis call): part of what the
    # "with" side costs; the limit itself is raised so that --n can exceed an hour's budget.
    settings.MEMORY_READS_PER_HOUR = 10**9
    print(f"PostgreSQL; 5,000 versions; n={args.n} interleaved pairs")

    def admit(operation, body):
        return gates.admit(token, operation, body)

    logged, bare = interleaved(
        lambda: reads.recall_memories(admit("recall", {"query": next(queries)}), surface="rest").body,
        lambda: recall(admit("recall", {"query": next(queries)})),
        args.n,
    )
    print(summary("recall with its access entry", logged))
    print(summary("recall without", bare))
    print(difference("  the entry costs", logged, bare))
    logged, bare = interleaved(
        lambda: reads.list_memories(admit("list", {}), surface="rest").body,
        lambda: memory_actions.memory_page(admit("list", {})),
        args.n,
    )
    print(summary("list (limit 20) with its access entry", logged))
    print(summary("list (limit 20) without", bare))
    print(difference("  the entry costs", logged, bare))

    ids = list(MemoryVersion.objects.filter(member=member).values_list("pk", flat=True))
    refs = [{"id": i, "v": 1} for i in ids[:10]]

    def plain():  # the entry before issue 32: an ORM INSERT, committed with the WAL flush
        AccessEntry.objects.create(
            workspace=workspace,
            member=member,
            credential_ref=credential.pk,
            credential_name="bench",
            operation="list",
            surface="rest",
            returned=10,
            memories=refs,
        )

    memories = [{"id": ref["id"], "version": ref["v"]} for ref in refs]

    def checked():  # access_log.record: lists only versions still stored, asynchronous commit
        access_log.record(
            credential=credential, member=member, operation="list", surface="rest", memories=memories, hidden=0
        )

    def checked_synchronous():  # the same statement inside a caller's transaction keeps synchronous_commit
        connection.in_atomic_block = True  # what record() reads; autocommit is unchanged, so it is still one statement
        try:
            checked()
        finally:
            connection.in_atomic_block = False

    entry_costs = {
        "plain INSERT (before)": [],
        "checked, synchronous commit": [],
        "checked, asynchronous commit (now)": [],
    }
    for fn in (plain, checked_synchronous, checked):
        for _ in range(5):
            fn()
    for i in range(args.n):
        pairs = list(zip(entry_costs, (plain, checked_synchronous, checked), strict=True))
        for name, fn in pairs[i % 3 :] + pairs[: i % 3]:
            start = time.perf_counter()
            fn()
            entry_costs[name].append((time.perf_counter() - start) * 1000)
    print(f"the entry alone, interleaved (load {' '.join(f'{v:.2f}' for v in os.getloadavg())}):")
    for name, samples in entry_costs.items():
        print(summary(f"  {name}", samples))

    AccessEntry.objects.filter(member=member).delete()
    now = timezone.now()
    listed, unlisted = ids[: len(ids) // 2], ids[len(ids) // 2 :]
    AccessEntry.objects.bulk_create(
        [
            AccessEntry(
                workspace=workspace,
                member=member,
                credential_ref=credential.pk,
                credential_name="bench",
                operation="recall",
                surface="mcp",
                at=now,
                returned=10,
                memories=[{"id": i, "v": 1} for i in rng.sample(listed, 10)],
            )
            for _ in range(args.entries)
        ],
        batch_size=2000,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memoryapp_accessentry")
    listed_iter, unlisted_iter = iter(rng.sample(listed, len(listed))), iter(unlisted)
    erase_n = min(args.n, 200)

    def forget(pool):
        return lambda: erase_memories(
            [next(pool)], operation="forget", workspace_id=workspace.pk, member_id=member.pk, actor_label="bench"
        )

    striking, plain = interleaved(forget(listed_iter), forget(unlisted_iter), erase_n, warmup=2)
    print(
        f"forget one memory, {args.entries:,} entries in the member's log "
        f"({AccessEntry.objects.filter(member=member).count():,} left after {erase_n + 2} forgets):"
    )
    print(summary(f"  listed in ~{round(args.entries * 10 / len(listed))} entries", striking))
    print(summary("  listed in none", plain))
    print(difference("  striking it from the log costs", striking, plain))


if __name__ == "__main__":
    main()
