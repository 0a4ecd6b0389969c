"""Load test of the production setup on this machine: gunicorn (N workers), PostgreSQL, Redis.

    .venv/bin/python bench/load.py [--seconds 60] [--clients 32] [--workers 2 1]

32 concurrent clients for 60 s send a mix of recall (60%), list (30%) and remember (10%) from
200 credentials of 50 members (each holding 300 memories). Prints requests/s, p50/p95/p99 and
errors per worker count. Clients run on the same 2-core machine as the server, so they take CPU
from it: the figures are a floor, not a ceiling. Traffic goes to 127.0.0.1 only and stops by itself."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import time

from _setup import ROOT, pct, setup

QUERIES = [
    "which editor",
    "shipping deadline osaka",
    "aisle seat",
    "report language",
    "weekly review",
    "coffee or tea",
    "release budget",
]
WORDS = [
    "shipping",
    "warehouse",
    "invoice",
    "vim",
    "emacs",
    "python",
    "meeting",
    "lunch",
    "aisle",
    "window",
    "seat",
    "japanese",
    "english",
    "deadline",
    "budget",
    "report",
    "review",
    "osaka",
    "tokyo",
    "coffee",
    "tea",
    "weekly",
]


def prepare() -> list[str]:
    setup("bench_load", redis_db=10)
    from governance import actions
    from memoryapp.models import MemoryEmbedding, MemoryVersion
    from memoryapp.recall.index import index_entry

    rng = random.Random(3)
    workspace, _ = actions.create_workspace("Load", owner_email="load-owner@x.test")
    actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=None)
    tokens = []
    for m in range(50):
        member = actions.add_member(workspace, f"load{m}@x.test", role="editor")
        rows = [
            MemoryVersion(
                workspace=workspace,
                member=member,
                namespace="prefs",
                text="Note: " + " ".join(rng.choice(WORDS) for _ in range(12)),
                text_length=0,
            )
            for _ in range(300)
        ]
        MemoryVersion.objects.bulk_create(rows)
        MemoryEmbedding.objects.bulk_create([index_entry(v) for v in MemoryVersion.objects.filter(member=member)])
        for _ in range(4):
            tokens.append(actions.create_credential(member, name="load", scopes=["memory:read", "memory:write"])[1])
    return tokens


async def run_load(base: str, tokens: list[str], clients: int, seconds: float) -> tuple[list[float], int, int]:
    import httpx

    latencies: list[float] = []
    errors = 0
    statuses: dict[int, int] = {}
    deadline = time.monotonic() + seconds
    rng = random.Random(11)

    async def client_loop(n: int) -> None:
        nonlocal errors
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            i = 0
            while time.monotonic() < deadline:
                token = tokens[(n * 7 + i) % len(tokens)]
                roll = rng.random()
                if roll < 0.6:
                    path, body = "recall", {"query": rng.choice(QUERIES)}
                elif roll < 0.9:
                    path, body = "list", {"limit": 20}
                else:
                    path, body = (
                        "remember",
                        {"namespace": "load", "text": "Load note " + " ".join(rng.choice(WORDS) for _ in range(8))},
                    )
                started = time.perf_counter()
                try:
                    response = await client.post(
                        f"/api/agent/v1/memories/{path}", json=body, headers={"Authorization": f"Bearer {token}"}
                    )
                    statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                    if response.status_code >= 400:
                        errors += 1
                except httpx.HTTPError:
                    errors += 1
                latencies.append((time.perf_counter() - started) * 1000)
                i += 1

    await asyncio.gather(*(client_loop(n) for n in range(clients)))
    print(f"    statuses: {dict(sorted(statuses.items()))}")
    return latencies, errors, len(latencies)


def serve(workers: int, port: int) -> subprocess.Popen:
    env = dict(os.environ, DEBUG="0", ALLOWED_HOSTS="127.0.0.1")
    process = subprocess.Popen(
        [
            str(ROOT / ".venv/bin/gunicorn"),
            "config.wsgi:application",
            "-w",
            str(workers),
            "-b",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            "--timeout",
            "60",
        ],
        cwd=ROOT,
        env=env,
    )
    import httpx

    for _ in range(200):
        try:
            httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
            return process
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("gunicorn did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 1])
    args = parser.parse_args()
    tokens = prepare()
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    print(
        f"{len(tokens)} credentials, 50 members x 300 memories; {args.clients} clients for {args.seconds:.0f} s; "
        "mix recall 60% / list 30% / remember 10%"
    )
    for workers in args.workers:
        import redis

        redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()
        server = serve(workers, 8790 + workers)
        try:
            started = time.monotonic()
            latencies, errors, total = asyncio.run(
                run_load(f"http://127.0.0.1:{8790 + workers}", tokens, args.clients, args.seconds)
            )
            elapsed = time.monotonic() - started
        finally:
            server.terminate()
            server.wait(timeout=20)
        print(
            f"gunicorn {workers} worker(s): {total / elapsed:7.1f} req/s   p50 {pct(latencies, 50):7.1f} ms   p95 "
            f"{pct(latencies, 95):7.1f} ms   p99 {pct(latencies, 99):7.1f} ms   errors {errors} of {total}"
        )


if __name__ == "__main__":
    main()
