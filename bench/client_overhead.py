"""What the Python client (clients/python) adds to a recall over a raw httpx call, same run.

    bash scripts/test_client.sh --co -q >/dev/null    # once: makes .venv-client
    .venv-client/bin/python bench/client_overhead.py [--calls 300] [--memories 200]

Starts the product like the client's suite does (clients/python/tests/live_server.py: the
server's .venv, SQLite unless DATABASE_URL/REDIS_URL are set), stores `--memories` notes, then
alternates call by call, over one shared `httpx.Client` (same connection pool): a raw
`http.post(…/recall).json()` and `MemoryClient.recall()` (error mapping, retry policy, typed
result). Prints p50/p95 of each and of their difference per pair, and the client's own work
(`parse` + `RecallResult.from_json`) on a real answer, without the network. Target: ≤ 1 ms p50."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python" / "tests"))

from governed_memory import MemoryClient, RecallResult  # noqa: E402
from governed_memory.client import parse  # noqa: E402
from live_server import LiveServer  # noqa: E402

QUERIES = [
    "which text editor",
    "shipping cutoff in Osaka",
    "preferred language for answers",
    "seat on long flights",
    "coffee or tea",
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--memories", type=int, default=100)
    args = parser.parse_args()
    server = LiveServer(Path(tempfile.mkdtemp(prefix="gam-bench-client-")))
    server.start()
    try:
        (workspace,) = server.workspaces(("Bench", ("agent",), ()))
        member = workspace.members["agent"]
        tokens = [member.credential() for _ in range(1 + args.memories // 100)]
        for index in range(args.memories):
            with MemoryClient(server.url(), tokens[index // 100]) as writer:
                writer.remember(
                    "bench", f"Note {index}: {QUERIES[index % len(QUERIES)]} and other details {index % 13}"
                )
        token = tokens[0]
        url = server.url() + "/api/agent/v1/memories/recall"
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        http = httpx.Client(timeout=30)
        memory = MemoryClient(server.url(), token, http_client=http)
        for query in QUERIES * 4:  # warm both paths: model, caches, pool
            http.post(url, json={"query": query}, headers=headers).json()
            memory.recall(query)
        raw_ms: list[float] = []
        client_ms: list[float] = []
        for i in range(args.calls):
            query = QUERIES[i % len(QUERIES)]
            pair = [
                ("raw", lambda q=query: http.post(url, json={"query": q}, headers=headers).json()),
                ("client", lambda q=query: memory.recall(q)),
            ]
            if i % 2:
                pair.reverse()  # alternate which goes first
            for name, run in pair:
                started = time.perf_counter()
                run()
                (raw_ms if name == "raw" else client_ms).append((time.perf_counter() - started) * 1000)
        differences = [c - r for c, r in zip(client_ms, raw_ms)]
        answer = http.post(url, json={"query": QUERIES[0]}, headers=headers)
        local: list[float] = []
        for _ in range(2000):
            started = time.perf_counter()
            RecallResult.from_json(parse(answer))
            local.append((time.perf_counter() - started) * 1000)
        n = len(answer.json()["memories"])
        print(
            f"backend: {server.backend}; {args.memories} memories; {args.calls} recalls each way, interleaved; {n} "
            "memories per answer"
        )
        print(f"raw httpx      p50 {statistics.median(raw_ms):7.2f} ms   p95 {pct(raw_ms, 0.95):7.2f} ms")
        print(f"MemoryClient   p50 {statistics.median(client_ms):7.2f} ms   p95 {pct(client_ms, 0.95):7.2f} ms")
        print(
            f"difference     p50 {statistics.median(client_ms) - statistics.median(raw_ms):+7.3f} ms (of the "
            f"p50s)   per pair p50 {statistics.median(differences):+7.3f} ms"
        )
        print(
            f"client's own work (parse + typed result, no network): p50 {statistics.median(local):.3f} ms   p95 "
            f"{pct(local, 0.95):.3f} ms"
        )
        memory.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
