"""Benchmark: the expiry sweep erasing expired agent memory versions with receipts, against a bare
DELETE of the same rows, on PostgreSQL.

    .venv/bin/python bench/sweep.py [--versions 1000000] [--per-member 5000] [--database-url URL]

Each version has one citation and one 256-dimension embedding, like a real agent memory; members
hold `--per-member` versions each (the 5,000 cap). Rows are generated server-side
(INSERT … SELECT generate_series) in a dedicated database (default `bench_sweep`, recreated).
Run 1 times `retention.lifecycle.expiry_sweep()` (chunks claimed with SKIP LOCKED, one receipt
per member chunk, verification re-query). Run 2 re-plants the same rows and times three bare
DELETEs (citations, embeddings, versions) in one transaction. Prints both throughputs and the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def recreate_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def plant(workspace_id: int, member_ids: list[int], per_member: int, total: int) -> None:
    """Expired versions (200 days old, retention 90) with one citation and one embedding each."""
    from django.db import connection

    with connection.cursor() as cursor:
        remaining = total
        for member_id in member_ids:
            count = min(per_member, remaining)
            remaining -= count
            cursor.execute(
                """
                INSERT INTO memoryapp_memoryversion
                    (workspace_id, member_id, credential_id, source, namespace, key, text, text_hmac, text_length,
                     masked_kinds, kind, details, collection_id, version, valid_from, valid_to, created_at,
                     retention_anchor, state, expired_at, unreachable_at, unreachable_reason)
                SELECT %s, %s, NULL, 'agent', 'bench', NULL, convert_to('benchmark note number ' || g, 'UTF8'),
                       md5(g::text) || md5(g::text), 30,
                       '[]'::jsonb, ''::bytea, ''::bytea, NULL, 1, now() - interval '200 days', NULL,
                       now() - interval '200 days' + g * interval '1 second',
                       now() - interval '200 days' + g * interval '1 second', 'active', NULL, NULL, ''
                FROM generate_series(1, %s) AS g
                """,
                [workspace_id, member_id, count],
            )
            if remaining == 0:
                break
        cursor.execute(
            """
            INSERT INTO memoryapp_citation (memory_id, position, passage_id, document_id, document_version_id, sha256)
            SELECT id, 0, id, 1, 1, text_hmac FROM memoryapp_memoryversion WHERE workspace_id = %s
            """,
            [workspace_id],
        )
        cursor.execute(
            """
            INSERT INTO memoryapp_memoryembedding (memory_id, embedder_id, dim, vector, terms)
            SELECT id, 'hashing-v1-256', 256, decode(repeat(lpad(to_hex(id %% 256), 2, '0'), 1024), 'hex'), text
            FROM memoryapp_memoryversion WHERE workspace_id = %s
            """,
            [workspace_id],
        )
    with connection.cursor() as cursor:
        for table in (
            "memoryapp_memoryversion",
            "memoryapp_citation",
            "memoryapp_memoryembedding",
            "retention_deletionreceipt",
        ):
            cursor.execute(f"VACUUM ANALYZE {table}")


def counts(workspace_id: int) -> tuple[int, int, int]:
    from memoryapp.models import Citation, MemoryEmbedding, MemoryVersion

    return (
        MemoryVersion.objects.filter(workspace_id=workspace_id).count(),
        Citation.objects.filter(memory__workspace_id=workspace_id).count(),
        MemoryEmbedding.objects.filter(memory__workspace_id=workspace_id).count(),
    )


def bare_delete(workspace_id: int) -> int:
    from django.db import connection, transaction

    expired = (
        "SELECT id FROM memoryapp_memoryversion WHERE workspace_id = %s "
        "AND retention_anchor <= now() - interval '90 days'"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM memoryapp_citation WHERE memory_id IN ({expired})", [workspace_id])
        cursor.execute(f"DELETE FROM memoryapp_memoryembedding WHERE memory_id IN ({expired})", [workspace_id])
        cursor.execute(
            "DELETE FROM memoryapp_memoryversion WHERE workspace_id = %s AND retention_anchor <= now() - interval '90 "
            "days'",
            [workspace_id],
        )
        return cursor.rowcount


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", type=int, default=1_000_000)
    parser.add_argument("--per-member", type=int, default=5000)
    parser.add_argument(
        "--database-url", default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/bench_sweep")
    )
    args = parser.parse_args()

    recreate_database(args.database_url)
    os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("VAR_DIR", "/tmp/var_bench_sweep")
    os.environ.pop("REDIS_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    from governance import actions
    from governance.models import Member
    from retention import lifecycle
    from retention.models import DeletionReceipt

    workspace, owner = actions.create_workspace("bench", owner_email="owner@bench.test")
    members_needed = -(-args.versions // args.per_member)
    users = [actions.ensure_user(f"m{i}@bench.test") for i in range(members_needed)]
    Member.objects.bulk_create(Member(workspace=workspace, user=u, role="editor") for u in users)
    member_ids = list(
        Member.objects.filter(workspace=workspace, role="editor").order_by("pk").values_list("pk", flat=True)
    )

    print(
        f"planting {args.versions:,} expired versions ({len(member_ids)} members × ≤{args.per_member}), each with a "
        "citation and an embedding …",
        flush=True,
    )
    started = time.perf_counter()
    plant(workspace.pk, member_ids, args.per_member, args.versions)
    print(
        f"  planted in {time.perf_counter() - started:.1f}s: versions, citations, embeddings = {counts(workspace.pk)}",
        flush=True,
    )

    started = time.perf_counter()
    result = lifecycle.expiry_sweep()
    sweep_seconds = time.perf_counter() - started
    assert counts(workspace.pk) == (0, 0, 0), counts(workspace.pk)
    receipts = DeletionReceipt.objects.filter(workspace_ref=workspace.pk)
    assert sum(r.versions_erased for r in receipts) == args.versions
    assert all(r.verification["clean"] for r in receipts.only("verification"))

    print("re-planting the same rows for the baseline …", flush=True)
    plant(workspace.pk, member_ids, args.per_member, args.versions)
    started = time.perf_counter()
    deleted = bare_delete(workspace.pk)
    bare_seconds = time.perf_counter() - started
    assert deleted == args.versions and counts(workspace.pk) == (0, 0, 0)

    sweep_rate = args.versions / sweep_seconds
    bare_rate = args.versions / bare_seconds
    print()
    print(f"versions erased            {args.versions:>12,}")
    print(
        f"expiry sweep with receipts {sweep_seconds:>11.2f}s  {sweep_rate:>10,.0f} versions/s  ({result['receipts']} "
        f"receipts, {len(member_ids)} members)"
    )
    print(f"bare DELETE (3 statements) {bare_seconds:>11.2f}s  {bare_rate:>10,.0f} versions/s")
    print(
        f"ratio sweep / bare         {sweep_seconds / bare_seconds:>11.2f}   (target ≤ 2; throughput target ≥ 20,000 "
        "versions/s)"
    )


if __name__ == "__main__":
    main()
