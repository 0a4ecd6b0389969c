"""The README's production server under concurrent load (issue 32): uvicorn with two workers
serving config.asgi:application against PostgreSQL + Redis, 64 concurrent clients sending a
recall/list mix. Every answer is 2xx and the database connections of both databases stay within
the pool's bound (web processes x DB_POOL_MAX_SIZE per database) during and after the run;
before the pool each request's thread kept its own connection until PostgreSQL refused more and
most requests answered 500. bench/production_load.py is the long form, with wrk and figures."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import httpx
import psycopg
import pytest
from django.db import connections

from tests.processes import BASE_DIR, free_port, server_env, stop, wait_until_serving
from tests.support import make_agent

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WORKERS = 2
POOL_MAX_SIZE = 3
CLIENTS = 64
APP_NAME = "gam-production-stack-test"
REQUESTS = 384


@pytest.fixture
def databases() -> list[str]:
    if connections["default"].vendor != "postgresql":
        pytest.skip("backend: the production stack runs on PostgreSQL")
    return [connections[alias].settings_dict["NAME"] for alias in ("default", "keyring")]


class ConnectionCount:
    """pg_stat_activity of the two databases, sampled from a connection to `postgres` (not counted):
    the server's connections only (libpq's PGAPPNAME names them), not those other tests of this
    process left open."""

    def __init__(self, names: list[str]):
        db = connections["default"].settings_dict
        self.conn = psycopg.connect(
            host=db["HOST"] or "127.0.0.1",
            port=db["PORT"] or 5432,
            user=db["USER"],
            password=db.get("PASSWORD") or None,
            dbname="postgres",
            autocommit=True,
        )
        self.names = names
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def now(self) -> int:
        return self.conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = ANY(%s) AND application_name = %s",
            [self.names, APP_NAME],
        ).fetchone()[0]

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self.now())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def production_server(databases, tmp_path):
    """`uvicorn config.asgi:application --workers 2 --proxy-headers --no-access-log` (the README's
    command) on a free loopback port, pool bounded to 3 connections per worker and database."""
    port = free_port()
    env = server_env(
        DB_POOL_MAX_SIZE=str(POOL_MAX_SIZE),
        DB_POOL_TIMEOUT="30",
        MEMORY_EMBEDDER="hashing",
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1",
        PGAPPNAME=APP_NAME,
    )
    env.pop("DB_CONN_MAX_AGE", None)
    log = tmp_path / "uvicorn.log"
    command = [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--workers", str(WORKERS), "--proxy-headers", "--no-access-log", "--log-level", "warning"]
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            command, cwd=BASE_DIR, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(f"{base}/readyz", [process], log)
        yield base
    finally:
        stop([process])


async def drive(base: str, tokens: list[str]) -> dict[int, int]:
    statuses: dict[int, int] = {}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(REQUESTS):
        queue.put_nowait(n)

    async def client() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            while not queue.empty():
                n = queue.get_nowait()
                path, body = ("recall", {"query": "which editor"}) if n % 5 < 3 else ("list", {"limit": 20})
                response = await http.post(
                    f"/api/agent/v1/memories/{path}",
                    json=body,
                    headers={"Authorization": f"Bearer {tokens[n % len(tokens)]}"},
                )
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    await asyncio.gather(*(client() for _ in range(CLIENTS)))
    return statuses


def test_concurrent_requests_get_no_5xx_and_connections_stay_bounded(world, databases, production_server):
    agents = [make_agent(member) for member in (world.owner, world.editor) for _ in range(4)]
    tokens = [agent.token for agent in agents]
    for n, token in enumerate(tokens[:6]):
        remembered = httpx.post(
            f"{production_server}/api/agent/v1/memories/remember",
            json={"namespace": "prefs", "text": f"Prefers vim, note {n}."},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert remembered.status_code == 201, remembered.text
    for alias in ("default", "keyring"):  # this process's own connections (and pools) are not the server's
        connections[alias].close()
        connections[alias].close_pool()

    bound = WORKERS * POOL_MAX_SIZE * len(databases)
    with ConnectionCount(databases) as count:
        statuses = asyncio.run(drive(production_server, tokens))
        during = count.peak
    time.sleep(1)
    after = count.now()
    count.conn.close()

    assert sum(statuses.values()) == REQUESTS
    assert not {status for status in statuses if status >= 500}, statuses
    assert set(statuses) <= {200}, statuses
    assert 0 < during <= bound, (during, bound)  # 0: the server's connections were not seen at all
    assert after <= bound, (after, bound)
