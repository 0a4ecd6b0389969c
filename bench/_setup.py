"""Shared setup for the benchmark scripts: a dedicated PostgreSQL database (dropped and
re-created), Redis for rate limits, Django configured, migrations applied."""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup_sqlite(var_dir: str) -> None:
    """The embedded default: fresh SQLite files under `var_dir` (removed first), the database rate limiter."""
    import shutil

    shutil.rmtree(var_dir, ignore_errors=True)
    for name in ("DATABASE_URL", "REDIS_URL", "KEYRING_DATABASE_URL"):
        os.environ.pop(name, None)
    os.environ["VAR_DIR"] = var_dir
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("migrate", database="keyring", verbosity=0)


def setup(db_name: str, *, redis_db: int = 9, reuse: bool = False) -> bool:
    """Configure Django on the PostgreSQL database `db_name`, dropped and re-created — or, with
    `reuse`, kept as a previous run left it when it exists. True when it was kept."""
    import psycopg

    base = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
    db_name = os.environ.get("BENCH_DB_PREFIX", "") + db_name  # parallel runs on one server keep apart
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        kept = reuse and conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db_name]).fetchone() is not None
        if not kept:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
            conn.execute(
                f'DROP DATABASE IF EXISTS "{db_name}_keyring" WITH (FORCE)'
            )  # the key store's (migrate creates it)
            conn.execute(f'CREATE DATABASE "{db_name}"')
    os.environ["DATABASE_URL"] = f"{base}/{db_name}"
    os.environ.setdefault("REDIS_URL", f"redis://127.0.0.1:6379/{redis_db}")
    os.environ.setdefault("VAR_DIR", f"/tmp/bench_var_{db_name}")
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import redis

    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()
    return kept


def timed(fn, repeat: int, warmup: int = 5) -> list[float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def interleaved(fns: dict, repeat: int, warmup: int = 5) -> dict[str, list[float]]:
    """`timed` for several functions called in turn (a, b, c, a, b, c, …): on a shared machine a
    burst of load then falls on all of them alike, so their ratio stays fair."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append((time.perf_counter() - start) * 1000)
    return samples


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def summary(label: str, samples: list[float]) -> str:
    p50, p95, mean = pct(samples, 50), pct(samples, 95), statistics.fmean(samples)
    return f"{label:<48} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms   mean {mean:7.2f} ms   n={len(samples)}"


def wait_ready(base: str, *, seconds: float = 120, describe=lambda: "") -> None:
    """Until the product at `base` answers /readyz 200; SystemExit naming `describe()` after `seconds`."""
    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("the server did not start " + describe())
