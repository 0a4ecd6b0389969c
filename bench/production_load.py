"""The README's production stack under wrk: uvicorn with N workers exactly as the README starts it,
PostgreSQL + Redis on this machine, a Celery worker beside it.

    .venv/bin/python bench/production_load.py [--workers 4] [--seconds 15] [--connections 8 32 128]

Recreates the database (`--database`, default memory_1, and its `_keyring`), runs `migrate` and
`seed_demo` as an operator would, then starts `uvicorn config.asgi:application --workers N
--proxy-headers --no-access-log` on 127.0.0.1 and `celery -A config worker`, creates members and
credentials, writes memories through the REST API, and drives wrk with a Lua script: 60% recall,
40% list, each request from a credential picked at random. Per connection level it prints
requests, req/s, p50/p95/p99, non-2xx and 5xx counts, and the PostgreSQL connections of both
databases (pg_stat_activity): the most seen during the run and what is left 10 s after it.
wrk runs on the same machine and takes CPU from the server: the figures are a floor.

The embedding ceiling (issue 32's yardstick): what the 60/40 mix could serve if a request cost
nothing but its query embedding, `cores / (0.6 × embedding)`, with the embedding timed the way a
recall runs it (`embed_query_within`, the configured embedder, one query at a time) in a process
of its own before the server starts. Each level prints its req/s as a fraction of that ceiling."""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VENV_BIN = Path(sys.executable).parent
QUERIES = [
    "which editor",
    "shipping deadline osaka",
    "aisle seat",
    "report language",
    "weekly review",
    "coffee or tea",
    "release budget",
]
WORDS = (
    "shipping warehouse invoice vim emacs python meeting lunch aisle window seat japanese english "
    "deadline budget report review osaka tokyo coffee tea weekly"
).split()

LUA = """
local tokens = {%(tokens)s}
local queries = {%(queries)s}
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) math.randomseed(%(seed)d + #threads); s2 = 0; s4 = 0; s5 = 0 end
function request()
  local headers = {["Authorization"] = "Bearer " .. tokens[math.random(#tokens)], ["Content-Type"] = "application/json"}
  if math.random() < 0.6 then
    return wrk.format("POST", "/api/agent/v1/memories/recall", headers,
      '{"query": "' .. queries[math.random(#queries)] .. '"}')
  end
  return wrk.format("POST", "/api/agent/v1/memories/list", headers, '{"limit": 20}')
end
function response(status, headers, body)
  if status >= 500 then s5 = s5 + 1 elseif status >= 300 then s4 = s4 + 1 else s2 = s2 + 1 end
end
function done(summary, latency, requests)
  local ok, other, server = 0, 0, 0
  for _, t in ipairs(threads) do ok = ok + t:get("s2"); other = other + t:get("s4"); server = server + t:get("s5") end
  io.write(string.format(
    'RESULT {"requests": %%d, "seconds": %%f, "p50": %%f, "p95": %%f, "p99": %%f, ' ..
    '"ok": %%d, "non2xx": %%d, "s5xx": %%d, "timeouts": %%d, "socket_errors": %%d}\\n',
    summary.requests, summary.duration / 1e6,
    latency:percentile(50) / 1e3, latency:percentile(95) / 1e3, latency:percentile(99) / 1e3,
    ok, other + server, server, summary.errors.timeout,
    summary.errors.connect + summary.errors.read + summary.errors.write))
end
"""


class ConnectionWatch:
    """Samples pg_stat_activity for the two databases every 0.25 s on a connection of its own (to
    `postgres`, not counted)."""

    def __init__(self, server: str, names: tuple[str, str]):
        import psycopg

        self.conn = psycopg.connect(f"{server}/postgres", autocommit=True)
        self.names = list(names)
        self.peak = 0
        self.waits: collections.Counter[str] = collections.Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def count(self) -> dict[str, int]:
        rows = self.conn.execute(
            "SELECT datname, state, count(*) FROM pg_stat_activity WHERE datname = ANY(%s) GROUP BY 1, 2", [self.names]
        ).fetchall()
        counts = {"total": 0, "idle": 0}
        for _name, state, n in rows:
            counts["total"] += n
            counts["idle"] += n if state == "idle" else 0
        return counts

    def start(self) -> None:
        self.peak = 0
        self._stop.clear()

        self.waits.clear()
        self.samples = 0

        def loop() -> None:
            while not self._stop.wait(0.25):
                self.peak = max(self.peak, self.count()["total"])
                self.sample_waits()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def sample_waits(self) -> None:
        """What each non-idle backend of the two databases is doing now: a wait event, or on CPU."""
        rows = self.conn.execute(
            "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
            "WHERE datname = ANY(%s) AND state <> 'idle'",
            [self.names],
        ).fetchall()
        self.samples += 1
        for state, kind, event in rows:
            self.waits["on CPU" if kind is None else f"{kind}:{event}"] += 1
            if state == "idle in transaction":
                self.waits["(idle in transaction)"] += 1

    def top_waits(self, n: int = 6) -> str:
        per = max(self.samples, 1)
        return ", ".join(f"{name} {count / per:.1f}" for name, count in self.waits.most_common(n))

    def stop(self) -> int:
        self._stop.set()
        if self._thread:
            self._thread.join()
        return self.peak


def recreate_database(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'DROP DATABASE IF EXISTS "{name}_keyring" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run(
        [str(VENV_BIN / "python"), "manage.py", *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
    )


def create_credentials(members: int, per_member: int) -> list[str]:
    """Members of one workspace and their agent credentials, with the actions an owner's clicks call."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    import django

    django.setup()
    from django.db import connections

    from governance import actions

    workspace, _ = actions.create_workspace("Production load", owner_email="load-owner@x.test")
    actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=None)
    tokens = []
    for m in range(members):
        member = actions.add_member(workspace, f"load{m}@x.test", role="editor")
        tokens += [
            actions.create_credential(member, name=f"load {c}", scopes=["memory:read", "memory:write"])[1]
            for c in range(per_member)
        ]
    connections.close_all()
    return tokens


def remember_through_api(base: str, tokens: list[str], per_credential: int) -> int:
    import logging
    import random

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)
    rng = random.Random(3)
    jobs = [
        (token, "Note: " + " ".join(rng.choice(WORDS) for _ in range(12)))
        for token in tokens
        for _ in range(per_credential)
    ]

    def one(job: tuple[str, str]) -> int:
        token, text = job
        return httpx.post(
            f"{base}/api/agent/v1/memories/remember",
            json={"namespace": "prefs", "text": text},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        ).status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(one, jobs))
    return sum(1 for s in statuses if s == 201)


def wait_serving(url: str, processes: list[subprocess.Popen], timeout: float = 180.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if any(p.poll() is not None for p in processes):
            break
        time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer")


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU of a process and its descendants (the uvicorn workers), from /proc: what
    the web tier spent, whatever else the machine runs."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(times.get(pid, 0.0) for pid in tree)


def run_wrk(base: str, script: Path, connections: int, seconds: int) -> dict:
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "60s", "-s", str(script), base],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(line for line in out.splitlines() if line.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


CEILING_PROBE = """
import json, statistics, sys, time
import django
django.setup()
from django.conf import settings
from memoryapp.recall.embedders import get_embedder
from memoryapp.recall.embedders.pool import embed_query_within
queries = json.loads(sys.argv[1])
embedder = get_embedder(settings.MEMORY_EMBEDDER)
for q in queries:
    embed_query_within(embedder, q, 10.0)  # warm: the model loaded, the threads started
samples = []
for i in range(int(sys.argv[2])):
    start = time.perf_counter()
    embed_query_within(embedder, queries[i % len(queries)], 10.0)
    samples.append((time.perf_counter() - start) * 1000)
print(json.dumps({"embedder": settings.MEMORY_EMBEDDER, "p50": statistics.median(samples)}))
"""


def embedding_ceiling(env: dict[str, str], samples: int = 300) -> tuple[str, float, float]:
    """(embedder, query embedding p50 in ms, the mix's ceiling in req/s) on this machine."""
    out = subprocess.run(
        [sys.executable, "-c", CEILING_PROBE, json.dumps(QUERIES), str(samples)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    probe = json.loads(out.strip().splitlines()[-1])
    cores = os.cpu_count() or 1
    return probe["embedder"], probe["p50"], cores * 1000 / (0.6 * probe["p50"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=4, help="uvicorn --workers, as the README's command (4)")
    parser.add_argument("--celery-concurrency", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--connections", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--server", default=os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432"))
    parser.add_argument("--database", default="memory_1")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/1")
    parser.add_argument("--port", type=int, default=8010)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--credentials-per-member", type=int, default=5)
    parser.add_argument("--memories-per-credential", type=int, default=8)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed (apt-get install wrk)")

    var_dir = Path(tempfile.mkdtemp(prefix="production_load_"))
    metrics_dir = var_dir / "prometheus"
    metrics_dir.mkdir()
    env = {
        **os.environ,
        "DATABASE_URL": f"{args.server}/{args.database}",
        "REDIS_URL": args.redis,
        "VAR_DIR": str(var_dir),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    env.pop("KEYRING_DATABASE_URL", None)
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "REDIS_URL", "VAR_DIR", "DJANGO_SETTINGS_MODULE")})
    recreate_database(args.server, args.database)
    import redis

    redis.Redis.from_url(args.redis).flushdb()
    manage(env, "migrate")
    manage(env, "seed_demo")
    tokens = create_credentials(args.members, args.credentials_per_member)
    embedder, embed_p50, ceiling = embedding_ceiling(env)

    base = f"http://127.0.0.1:{args.port}"
    log = (var_dir / "processes.log").open("w")
    uvicorn = [
        str(VENV_BIN / "uvicorn"),
        "config.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(args.port),
        "--workers",
        str(args.workers),
        "--proxy-headers",
        "--no-access-log",
    ]
    celery = [
        str(VENV_BIN / "celery"),
        "-A",
        "config",
        "worker",
        "--concurrency",
        str(args.celery_concurrency),
        "-l",
        "WARNING",
    ]
    processes = [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        for command in (uvicorn, celery)
    ]
    watch = ConnectionWatch(args.server, (args.database, f"{args.database}_keyring"))
    try:
        wait_serving(f"{base}/readyz", processes)
        stored = remember_through_api(base, tokens, args.memories_per_credential)
        script = var_dir / "mix.lua"
        script.write_text(
            LUA
            % {
                "tokens": ", ".join(json.dumps(t) for t in tokens),
                "queries": ", ".join(json.dumps(q) for q in QUERIES),
                "seed": 11,
            }
        )
        print(
            f"uvicorn --workers {args.workers} + celery --concurrency {args.celery_concurrency}; PostgreSQL "
            f"{args.database} (+ _keyring), Redis {args.redis}"
        )
        print(
            f"{len(tokens)} credentials, {stored} memories remembered through the API; wrk -t2 {args.seconds} s per "
            "level, 60% recall / 40% list"
        )
        print(
            f"embedding ceiling: {embedder} query embedding p50 {embed_p50:.1f} ms on {os.cpu_count()} cores -> "
            f"{ceiling:.0f} req/s for the 60/40 mix"
        )
        print(
            f"connections before: {watch.count()['total']}; "
            f"DB_POOL_MAX_SIZE={os.environ.get('DB_POOL_MAX_SIZE', 'default')}; load {os.getloadavg()[0]:.2f}"
        )
        for level in args.connections:
            watch.start()
            cpu_before = tree_cpu_seconds(processes[0].pid)
            result = run_wrk(base, script, level, args.seconds)
            web_cpu_ms = (tree_cpu_seconds(processes[0].pid) - cpu_before) * 1000 / max(result["requests"], 1)
            peak = watch.stop()
            time.sleep(10)
            after = watch.count()
            print(
                f"{level:4d} conn: {result['requests']:6d} requests {result['requests'] / result['seconds']:7.1f} "
                f"req/s ({result['requests'] / result['seconds'] / ceiling:.2f} of the ceiling)   p50 "
                f"{result['p50']:7.1f} ms   p95 {result['p95']:7.1f} ms   p99 {result['p99']:7.1f} ms   non-2xx "
                f"{result['non2xx']:5d}   5xx {result['s5xx']:5d}   timeouts {result['timeouts']}   pg connections: "
                f"peak {peak}, 10 s after {after['total']} ({after['idle']} idle)   load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            print(
                f"      web workers' CPU per request {web_cpu_ms:.1f} ms; "
                f"busy backends, mean per sample: {watch.top_waits()}",
                flush=True,
            )
    finally:
        from tests.processes import stop

        stop(processes)
        log.close()
        watch.conn.close()
        print(f"server log: {var_dir / 'processes.log'}")


if __name__ == "__main__":
    main()
