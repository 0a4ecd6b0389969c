"""Remember and list latency, in-process, on PostgreSQL + Redis.

    .venv/bin/python bench/remember.py [--n 300] [--db bench_remember] [--remember-only]

Prints remember p50/p95 with 0 and 20 citations, and list p50/p95 for a member holding
5,000 versions, as agents run it (`memoryapp.reads`: the read and its access-log entry) and,
for the cost of the entry, without it; and a memory's embedding alone with MEMORY_EMBEDDER_THREADS
threads and with one (the e5 engine; docs/operations.md). Target (issue 14): remember p95 <= 25 ms
in-process on a 2-core machine with the default embedder."""

from __future__ import annotations

import argparse
import os

from _setup import setup, summary, timed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--db", default="bench_remember", help="PostgreSQL database to (re)create")
    parser.add_argument(
        "--remember-only",
        action="store_true",
        help="skip the list figures (their 5,000 index entries take minutes with a model)",
    )
    args = parser.parse_args()
    setup(args.db)

    from django.conf import settings

    from governance import actions
    from memoryapp import gates
    from memoryapp.actions import memory_page, remember
    from memoryapp.models import MemoryEmbedding, MemoryVersion
    from memoryapp.ratelimit import get_limiter
    from memoryapp.reads import list_memories
    from memoryapp.recall.embedders import engine_lane, get_embedder
    from memoryapp.recall.index import index_entry

    workspace, owner = actions.create_workspace("Bench", owner_email="bench-owner@x.test")
    actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=None)
    member = actions.add_member(workspace, "bench@x.test", role="editor")
    collection = actions.create_collection(workspace, name="c")
    text = "\n\n".join(f"Paragraph {i} about the Osaka warehouse and its weekday shipping." for i in range(20))
    passages = [
        str(p.pk) for p in actions.create_document(collection, title="d", text=text).current_version.passages.all()
    ]
    credential, token = actions.create_credential(member, name="bench", scopes=["memory:read", "memory:write"])
    limiter = get_limiter()
    counter = iter(range(10**9))

    def do_remember(citations: list[str]):
        i = next(counter)
        if i % 100 == 0:
            limiter.reset(credential.pk)  # measure the write path, not the 120/h refusal
        body = {
            "namespace": "bench",
            "key": f"k{i % 50}",
            "text": f"Note {i}: prefers aisle seats; contact ada{i}@example.com",
            "citations": citations,
        }
        remember(gates.admit(token, "remember", body))

    print(
        f"PostgreSQL + {type(limiter).__name__}, embedder {settings.MEMORY_EMBEDDER}, MEMORY_EMBEDDER_THREADS "
        f"{settings.MEMORY_EMBEDDER_THREADS}; load average {os.getloadavg()[0]:.2f}"
    )
    print(summary("remember, 0 citations", timed(lambda: do_remember([]), args.n)))
    print(summary("remember, 20 citations", timed(lambda: do_remember(passages), args.n)))
    embedder = get_embedder(settings.MEMORY_EMBEDDER)
    note = "Note 17: prefers aisle seats; contact [EMAIL]"  # what the remembers above embed
    if hasattr(embedder, "_encode_on_engine"):  # e5: the same text on the engine thread, by thread count
        for threads in sorted({embedder.threads, 1}, reverse=True):
            samples = timed(
                lambda threads=threads: (
                    engine_lane(False).submit(embedder._encode_on_engine, note.casefold(), False, threads).result()
                ),
                args.n,
            )
            print(summary(f"  a memory's embedding alone, {threads} thread(s)", samples))
    else:
        print(summary("  a memory's embedding alone", timed(lambda: embedder.embed([note]), args.n)))

    if args.remember_only:
        return
    # A member with 5,000 stored versions (bulk-inserted, same shape as the write path).
    MemoryVersion.objects.filter(member=member).delete()
    versions = [
        MemoryVersion(
            workspace=workspace,
            member=member,
            namespace="bench",
            text=f"Memory {i} about shipping and seats",
            text_length=30,
        )
        for i in range(5000)
    ]
    MemoryVersion.objects.bulk_create(versions, batch_size=1000)
    MemoryEmbedding.objects.bulk_create(
        [index_entry(v) for v in MemoryVersion.objects.filter(member=member)], batch_size=1000
    )
    print(
        summary(
            "list (limit 20) at 5,000 versions",
            timed(lambda: list_memories(gates.admit(token, "list", {}), surface="rest"), args.n),
        )
    )
    print(
        summary(
            "  the same read without its access entry",
            timed(lambda: memory_page(gates.admit(token, "list", {})), args.n),
        )
    )
    print(
        summary(
            "list (limit 100) at 5,000 versions",
            timed(lambda: list_memories(gates.admit(token, "list", {"limit": 100}), surface="rest"), args.n),
        )
    )
    print(
        summary(
            "  the same read without its access entry",
            timed(lambda: memory_page(gates.admit(token, "list", {"limit": 100})), args.n),
        )
    )


if __name__ == "__main__":
    main()
