"""A receipt's "clean" holds on disk (SPEC §8), in the embedded configuration as it really runs.

The README's run command serves the product from a SQLite file with a web server and a Celery
worker that keep their connections open. A member's agent remembers a marker, the marker's bytes
are found in the database files, the agent forgets it, and then no file of the data directory
(the database, its WAL, the broker's database) holds a single copy of the marker — while the
server still runs. `verify_forgetting` then passes against the same running deployment with a
production host name, https redirects on and DEBUG off, checking the files too.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import string
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from django.conf import settings

from tests.processes import free_port, stop, wait_until_serving

pytestmark = pytest.mark.slow

BASE_DIR = Path(settings.BASE_DIR)


def _not_clean(stdout: str) -> object:
    """The surfaces of a verify_forgetting --json report that were not seen before or not gone after."""
    try:
        report = json.loads(stdout)
    except ValueError:
        return stdout[-2000:]
    seen = {**report.get("surfaces", {}), **report.get("neverHoldContent", {})}
    return {
        name: s
        for name, s in seen.items()
        if s.get("after") != 0 or (name in report.get("surfaces", {}) and not s.get("before"))
    } or report


def marker_count(var_dir: Path, marker: bytes) -> dict[str, int]:
    counts = {}
    for path in sorted(var_dir.rglob("*")):
        if path.is_file():
            found = path.read_bytes().count(marker)
            if found:
                counts[path.name] = found
    return counts


@pytest.fixture
def deployment(tmp_path):
    """An embedded deployment in its own data directory: migrated, a workspace, the web server
    and a Celery worker running. Yields (base URL, env, owner's personal token, workspace id)."""
    var_dir = tmp_path / "var"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "RATE_LIMIT_BACKEND")
    }
    env |= {
        "VAR_DIR": str(var_dir),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "memory.example.com,127.0.0.1",
        "PYTHONPATH": str(BASE_DIR),
        "LOG_LEVEL": "WARNING",
    }

    def manage(*args: str, extra: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=BASE_DIR,
            env=env | (extra or {}),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, (done.stderr[-3000:], _not_clean(done.stdout))
        return done.stdout

    manage("migrate", "--noinput")
    workspace_id = json.loads(manage("createworkspace", "Disk check", "--owner", "owner@disk.test", "--json"))[
        "workspaceId"
    ]
    token = json.loads(manage("issue_api_token", "owner@disk.test", "--json"))["token"]

    port = free_port()
    log = tmp_path / "servers.log"
    with log.open("wb") as out:
        processes = [
            subprocess.Popen(
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
                cwd=BASE_DIR,
                env=env,
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
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
                cwd=BASE_DIR,
                env=env,
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
            ),
        ]
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(f"{base}/readyz", processes, log)
    try:
        yield base, env, manage, token, workspace_id, var_dir
    finally:
        stop(processes, timeout=20)
    assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-3000:]


def test_a_forgotten_marker_leaves_every_file_of_the_running_deployment(deployment):
    base, env, manage, token, workspace_id, var_dir = deployment
    owner = httpx2.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=30)
    assert (
        owner.put(f"/api/w/{workspace_id}/ask-history/settings", json={"agentMemoriesEnabled": True}).status_code == 200
    )
    credential = owner.post(
        f"/api/w/{workspace_id}/agent-credentials",
        json={"name": "disk agent", "scopes": ["memory:read", "memory:write"]},
    )
    assert credential.status_code == 201, credential.text
    agent = httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {credential.json()['token']}"}, timeout=30)

    marker = "zqdisk" + "".join(secrets.choice(string.ascii_lowercase) for _ in range(18))
    remembered = agent.post(
        "/api/agent/v1/memories/remember",
        json={"namespace": "disk", "key": "note", "text": f"The {marker} goes on the top shelf"},
    )
    assert remembered.status_code == 201, remembered.text
    for n in range(3):  # more versions of the key, and an unrelated memory written after it
        assert (
            agent.post(
                "/api/agent/v1/memories/remember",
                json={"namespace": "disk", "key": "note", "text": f"Version {n}: the {marker} moved"},
            ).status_code
            == 201
        )
    assert (
        agent.post(
            "/api/agent/v1/memories/remember", json={"namespace": "other", "text": "An unrelated note that stays"}
        ).status_code
        == 201
    )
    # SPEC §8.2: the text reaches the files only sealed, so its plaintext is never there; what is
    # looked for is each version's ciphertext and its wrapped data key.
    assert marker_count(var_dir, marker.encode()) == {}, "memory plaintext reached a file"
    with sqlite3.connect(var_dir / "memory.sqlite3") as data:
        rows = data.execute("SELECT text, key_id FROM memoryapp_memoryversion WHERE namespace = 'disk'").fetchall()
    with sqlite3.connect(var_dir / "keyring.sqlite3") as keys:
        wrapped = [
            keys.execute("SELECT wrapped FROM memoryapp_datakey WHERE key_id = ?", [key_id]).fetchone()[0]
            for _, key_id in rows
        ]
    sealed = [bytes(text) for text, _ in rows] + [bytes(w) for w in wrapped]
    assert len(sealed) == 8 and all(
        sum(marker_count(var_dir, blob).values()) >= 1 for blob in sealed
    )  # really on disk: the check below can fail

    forgotten = agent.post("/api/agent/v1/memories/forget", json={"namespace": "disk", "key": "note"})
    assert forgotten.status_code == 200 and forgotten.json()["forgotten"] == 4
    assert [marker_count(var_dir, blob) for blob in sealed] == [{}] * 8, (
        "erased ciphertext or destroyed keys remain on disk while the server runs"
    )

    receipts = owner.get(f"/api/w/{workspace_id}/ask-history/deletion-receipts").json()["receipts"]
    receipt = next(r for r in receipts if r["id"] == forgotten.json()["receiptId"])
    assert receipt["verification"]["clean"] is True
    assert receipt["residual"]["database"]["engine"] == "sqlite"
    assert (
        agent.post("/api/agent/v1/memories/list", json={}).json()["memories"][0]["text"]
        == "An unrelated note that stays"
    )


def test_verify_forgetting_passes_on_the_running_deployment_with_production_settings(deployment):
    base, env, manage, token, workspace_id, var_dir = deployment
    owner = httpx2.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=30)
    assert (
        owner.put(f"/api/w/{workspace_id}/ask-history/settings", json={"agentMemoriesEnabled": True}).status_code == 200
    )
    production = {
        "ALLOWED_HOSTS": "memory.example.com",
        "SECURE_SSL_REDIRECT": "1",
        "DEBUG": "0",
        "SECRET_KEY": "k" * 60,
    }
    report = json.loads(manage("verify_forgetting", "--workspace", str(workspace_id), "--json", extra=production))
    assert report["clean"] is True, report
    assert report["surfaces"]["sqliteFiles"]["before"] >= 1 and report["surfaces"]["sqliteFiles"]["after"] == 0
    assert marker_count(var_dir, report["marker"].encode()) == {}


@pytest.mark.django_db
def test_sqlite_connections_overwrite_deleted_content_whatever_the_build_default():
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("backend: SQLite only")
    # Set explicitly (not left to how the host's SQLite was compiled) ...
    assert "secure_delete=ON" in settings.DATABASES["default"]["OPTIONS"]["init_command"]
    # ... and in force on the connection the application uses.
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA secure_delete")
        assert cursor.fetchone()[0] == 1


@pytest.mark.django_db(transaction=True)
def test_postgres_sweeps_vacuum_the_memory_tables_after_erasing(world):
    from datetime import timedelta

    from django.db import connection
    from django.utils import timezone

    from memoryapp.models import MemoryVersion
    from retention import lifecycle
    from tests.support import make_agent

    if connection.vendor != "postgresql":
        pytest.skip("backend: PostgreSQL only")
    agent = make_agent(world.editor)
    assert agent.remember(namespace="old", text="an old note").status_code == 201
    MemoryVersion.objects.filter(member=world.editor).update(
        retention_anchor=timezone.now() - timedelta(days=400), created_at=timezone.now() - timedelta(days=400)
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_reset_single_table_counters(%s::regclass)", [MemoryVersion._meta.db_table])
    result = lifecycle.expiry_sweep()
    assert result["agentVersionsErased"] == 1 and result["vacuumed"] is True
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT vacuum_count, last_vacuum FROM pg_stat_user_tables WHERE relname = %s",
            [MemoryVersion._meta.db_table],
        )
        vacuum_count, last_vacuum = cursor.fetchone()
    assert vacuum_count >= 1 and last_vacuum is not None
    assert lifecycle.expiry_sweep()["vacuumed"] is False  # nothing erased: no vacuum
