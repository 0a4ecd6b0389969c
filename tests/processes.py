"""Helpers for tests that run the product's own processes (uvicorn, Celery): a free port, waiting
until a server answers, stopping processes without leaving any behind, and the environment that
lets a process read the test's own databases."""

from __future__ import annotations

import base64
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

import httpx2
from django.conf import settings
from django.db import connections

BASE_DIR = Path(__file__).resolve().parents[1]  # the repository, where the processes start


def current_kek() -> str:
    """The KEK this test process wraps data keys with (MEMORY_KEK, or its key file's), as
    MEMORY_KEK for a process started with another VAR_DIR: without it that process refuses to
    start (the stored keys need it, memoryapp.keyring.require_keks)."""
    from memoryapp.keyring import key_encryption_keys

    return base64.b64encode(key_encryption_keys().current).decode()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_serving(url: str, processes: Iterable[subprocess.Popen], log: Path, timeout: float = 60.0) -> None:
    """Poll `url` until it answers 200; fail with the log's tail if a process dies or time runs out."""
    processes = list(processes)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx2.get(url, timeout=2).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
            stop(processes)
            raise RuntimeError(f"{url} did not start answering: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)


def stop(processes: Iterable[subprocess.Popen], timeout: float = 15.0) -> None:
    processes = list(processes)
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def test_database_url(alias: str = "default") -> str:
    db = connections[alias].settings_dict
    if connections[alias].vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def test_database_env() -> dict[str, str]:
    """What a worker needs to read this test's rows: its database, its key store (memory content
    is sealed under keys kept there, SPEC §8.2) and the key-encryption key that unwraps them."""
    return {
        "DATABASE_URL": test_database_url(),
        "KEYRING_DATABASE_URL": test_database_url("keyring"),
        "MEMORY_KEK": current_kek(),
    }


test_database_url.__test__ = False  # a helper, not a test
test_database_env.__test__ = False


def server_env(**extra: str) -> dict[str, str]:
    """The environment a server process needs to use this test run's database and Redis."""

    def url(alias: str) -> str:
        db = connections[alias].settings_dict
        if connections[alias].vendor == "sqlite":
            return f"sqlite:///{db['NAME']}"
        auth = quote(db["USER"] or "")
        if db.get("PASSWORD"):
            auth += ":" + quote(db["PASSWORD"])
        return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"

    env = {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "VAR_DIR": str(settings.VAR_DIR),
        "DATABASE_URL": url("default"),
        "KEYRING_DATABASE_URL": url("keyring"),  # memory content is sealed under keys kept there (SPEC §8.2)
        "MEMORY_KEK": current_kek(),
        # The server outlives each test, whose tables (the key store's too) are emptied after it: a
        # spare key made in one test would be gone from the key store in the next. One key per batch
        # keeps no spare across tests (docs/encryption.md: restart processes after restoring the key store).
        "KEYRING_SPARE_KEYS": "1",
        "RATE_LIMIT_BACKEND": settings.RATE_LIMIT_BACKEND,
        "PYTHONPATH": str(BASE_DIR),
        "LOG_LEVEL": "WARNING",
    }
    if settings.REDIS_URL:
        env["REDIS_URL"] = settings.REDIS_URL
    return env | extra
