"""Fixtures of the MCP tests: `http_server`, the README's run command (uvicorn serving the ASGI
application) started once per test module on a free port, with this test run's databases."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.processes import BASE_DIR, free_port, server_env, stop, wait_until_serving


@pytest.fixture(scope="module")
def http_server(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[str]:
    """The README's run command: uvicorn serving config.asgi:application (lifespan "auto", its default)."""
    with django_db_blocker.unblock():
        env = os.environ | server_env()
    port = free_port()
    log = tmp_path_factory.mktemp("uvicorn") / "stderr.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "config.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            env=env,
            cwd=BASE_DIR,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(f"{base}/accounts/login/", [process], log)
    try:
        yield base
    finally:
        stop([process])
        assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-3000:]
