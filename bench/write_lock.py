"""No request holds the write lock for long (issue 32, rows 2 and 3), on the embedded default.

    .venv/bin/python bench/write_lock.py [--code DIR] [--port 8030] [--n 40] [--hold 20]

Starts the README's embedded deployment from `--code` (default: this checkout) in a fresh data
directory: uvicorn and a Celery worker on SQLite, no Redis. Workspace B's agent remembers and
recalls alone first (the typical time), then again while, in workspace A, an editor floods
documents of U+FDFA (~21,000 each, 18 characters after NFKC) and entities, an agent remembers
and forgets (erases), and another process holds a read transaction open on the key store
(`BEGIN; SELECT count(*) FROM memoryapp_datakey`, as a backup tool does) for 20 s at a time.
Prints B's remember and recall p50/p95 in both phases and their ratio (target <= 2x), and what
the flood's requests answered. Run it with `--code` pointing at an export of an older commit to
measure before a change.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
from _setup import wait_ready  # noqa: E402

LIGATURE = "\ufdfa"


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def start(code: Path, var_dir: Path, port: int, workers: int = 1) -> tuple[list[subprocess.Popen], Callable[..., str]]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "RATE_LIMIT_BACKEND", "KEYRING_DATABASE_URL")
    }
    env |= {"VAR_DIR": str(var_dir), "PYTHONPATH": str(code), "LOG_LEVEL": "ERROR", "ALLOWED_HOSTS": "127.0.0.1"}

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=code, env=env, capture_output=True, text=True, timeout=300
        )
        if done.returncode:
            raise SystemExit(done.stderr[-3000:])
        return done.stdout

    manage("migrate", "--noinput")
    log = (var_dir / "servers.log").open("wb")
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "config.asgi:application", "--port", str(port), "--log-level", "warning"]
            + ([f"--workers={workers}"] if workers > 1 else []),
            cwd=code,
            env=env,
            stdout=log,
            stderr=log,
        ),
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "--pool=threads",
                "--concurrency=2",
                "--loglevel=warning",
            ],
            cwd=code,
            env=env,
            stdout=log,
            stderr=log,
        ),
    ]
    return processes, manage


def workspace(manage, base: str, name: str, email: str) -> tuple[httpx.Client, httpx.Client, int]:
    ws = json.loads(manage("createworkspace", name, "--owner", email, "--json"))["workspaceId"]
    token = json.loads(manage("issue_api_token", email, "--json"))["token"]
    owner = httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=120)
    owner.put(f"/api/w/{ws}/ask-history/settings", json={"agentMemoriesEnabled": True}).raise_for_status()
    credential = owner.post(
        f"/api/w/{ws}/agent-credentials", json={"name": "bench", "scopes": ["memory:read", "memory:write"]}
    )
    credential.raise_for_status()
    agent = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {credential.json()['token']}"}, timeout=120)
    return owner, agent, ws


def measure(agent: httpx.Client, n: int, answers: Counter) -> tuple[list[float], list[float]]:
    remembers, recalls = [], []
    for i in range(n):
        for samples, path, body in (
            (remembers, "remember", {"namespace": "b", "text": f"Shipment {i} leaves the Kobe depot on Tuesday."}),
            (recalls, "recall", {"query": "when does the Kobe shipment leave", "limit": 10}),
        ):
            began = time.perf_counter()
            response = agent.post(f"/api/agent/v1/memories/{path}", json=body)
            samples.append((time.perf_counter() - began) * 1000)
            answers[f"B {path} {response.status_code}"] += 1
        time.sleep(0.05)
    return remembers, recalls


def hold_reader(keyring: Path, stop: threading.Event, hold: float) -> None:
    while not stop.is_set():
        db = sqlite3.connect(keyring, isolation_level=None)
        db.execute("BEGIN")
        db.execute("SELECT count(*) FROM memoryapp_datakey").fetchone()
        stop.wait(hold)
        db.execute("COMMIT")
        db.close()
        stop.wait(0.5)


def flood(owner: httpx.Client, agent: httpx.Client, ws: int, stop: threading.Event, answers: Counter) -> None:
    collection = owner.post(f"/api/w/{ws}/collections", json={"name": "flood"}).json()["id"]
    i = 0
    while not stop.is_set():
        i += 1
        calls = [  # called at once, in this iteration
            (
                "documents",
                lambda i=i: owner.post(
                    f"/api/w/{ws}/documents",
                    json={"collectionId": collection, "title": f"d{i}", "text": LIGATURE * 21000},
                ),
            ),
            (
                "entities",
                lambda i=i: owner.post(f"/api/w/{ws}/entities", json={"name": f"Entity {i}", "aliases": [f"alias{i}"]}),
            ),
            (
                "remember",
                lambda i=i: agent.post(
                    "/api/agent/v1/memories/remember", json={"namespace": "a", "key": "k", "text": f"note {i}"}
                ),
            ),
            ("forget", lambda: agent.post("/api/agent/v1/memories/forget", json={"namespace": "a", "key": "k"})),
        ]
        for name, call in calls:
            if stop.is_set():
                return
            try:
                response = call()
                is_json = response.headers.get("content-type", "").startswith("application/json")
                note = "" if is_json or response.status_code < 300 else " (not JSON)"
                answers[f"A {name} {response.status_code}{note}"] += 1
            except httpx.HTTPError as exc:
                answers[f"A {name} {type(exc).__name__}"] += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--code", type=Path, default=ROOT)
    parser.add_argument("--port", type=int, default=8030)
    parser.add_argument("--n", type=int, default=40, help="remember+recall pairs per phase")
    parser.add_argument("--hold", type=float, default=20.0, help="seconds the reader holds its transaction each time")
    parser.add_argument("--web-workers", type=int, default=1, help="uvicorn processes (the run command starts 1)")
    args = parser.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    with tempfile.TemporaryDirectory(prefix="write_lock_") as tmp:
        var_dir = Path(tmp) / "var"
        var_dir.mkdir()
        processes, manage = start(args.code.resolve(), var_dir, args.port, args.web_workers)
        try:
            wait_ready(base)
            owner_a, agent_a, ws_a = workspace(manage, base, "A", "editor@a.test")
            _, agent_b, _ = workspace(manage, base, "B", "agent@b.test")
            answers: Counter = Counter()
            measure(agent_b, 5, Counter())  # warm-up: the embedder, the connections
            typical = measure(agent_b, args.n, answers)
            stop = threading.Event()
            threads = [
                threading.Thread(target=flood, args=(owner_a, agent_a, ws_a, stop, answers)),
                threading.Thread(target=hold_reader, args=(var_dir / "keyring.sqlite3", stop, args.hold)),
            ]
            for thread in threads:
                thread.start()
            time.sleep(2)
            loaded = measure(agent_b, args.n, answers)
            stop.set()
            for thread in threads:
                thread.join(timeout=300)
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:  # a worker inside a long task
                    process.kill()
                    process.wait(timeout=15)
    print(
        f"code: {args.code.resolve()}  load: {os.getloadavg()[0]:.1f}  n={args.n} per phase, reader held "
        f"{args.hold:.0f} s at a time"
    )
    for k, label in enumerate(("remember", "recall")):
        t, loaded_k = typical[k], loaded[k]
        print(
            f"B {label:<8} typical p50 {pct(t, 50):8.1f} ms p95 {pct(t, 95):8.1f} ms | under flood p50 "
            f"{pct(loaded_k, 50):8.1f} ms p95 {pct(loaded_k, 95):8.1f} ms max {max(loaded_k):8.1f} ms | ratio p50 "
            f"{pct(loaded_k, 50) / pct(t, 50):5.2f}x p95 {pct(loaded_k, 95) / pct(t, 95):5.2f}x  mean "
            f"{statistics.fmean(loaded_k):.1f} ms"
        )
    print("answers:", ", ".join(f"{k}: {v}" for k, v in sorted(answers.items())))


if __name__ == "__main__":
    main()
