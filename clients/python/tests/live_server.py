"""The product, started the way `scripts/run.sh` starts it, for the client's suite and bench.

From the server's own virtualenv (the repository's `.venv`, or `GAM_SERVER_PYTHON`), never this
one: migrations, a Celery worker, uvicorn serving `config.asgi:application` on a free port, and
workspaces, members and tokens made by the bootstrap management commands with `--json`. The
backend follows the environment like the server's suite: `DATABASE_URL` (+ `REDIS_URL`) for
PostgreSQL + Redis — a database of its own, `test_<name>_live`, dropped before and after —
else the embedded SQLite default under a temporary `VAR_DIR`.

Three web processes share one database and one worker, differing only by environment:

- `main`: the product as the README runs it (every default);
- `tight`: AGENT_REMEMBERS_PER_HOUR=2, RATE_LIMIT_WINDOW_SECONDS=4, MAX_VERSIONS_PER_MEMBER=3,
  AGENT_TURNS_PER_HOUR=1, MEMORY_READS_PER_HOUR=3, so 429 and 409 are provoked for real and a
  back-off can be waited out;
- `nolimiter`: the Redis rate limiter pointed at a closed port, so remembers answer
  503 RATE_LIMIT_UNAVAILABLE (hashing embedder: no request it serves gets to embedding).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

REPO = Path(__file__).resolve().parents[3]
TIGHT = {
    "AGENT_REMEMBERS_PER_HOUR": "2",
    "RATE_LIMIT_WINDOW_SECONDS": "4",
    "MAX_VERSIONS_PER_MEMBER": "3",
    "AGENT_TURNS_PER_HOUR": "1",
    "MEMORY_READS_PER_HOUR": "3",
}
SERVER_VARIABLES = (
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "RATE_LIMIT_BACKEND",
    "VAR_DIR",
    "PROMETHEUS_MULTIPROC_DIR",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "GAM_URL",
    "GAM_TOKEN",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_python() -> Path:
    python = Path(os.environ.get("GAM_SERVER_PYTHON") or REPO / ".venv" / "bin" / "python")
    if not python.exists():
        raise RuntimeError(
            f"The server's virtualenv is missing ({python}): run `bash scripts/bootstrap.sh` first, or set "
            "GAM_SERVER_PYTHON."
        )
    return python


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@dataclass
class Member:
    server: LiveServer
    workspace_id: str
    member_id: str
    email: str
    api_token: str

    def api(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, base: str | None = None
    ) -> httpx.Response:
        """The workspace API (`/api/w/<wsId>/…`) as this member (personal token)."""
        url = f"{base or self.server.url('main')}/api/w/{self.workspace_id}/{path.lstrip('/')}"
        return httpx.request(method, url, json=body, headers={"Authorization": f"Token {self.api_token}"}, timeout=30)

    def credential(
        self,
        scopes: tuple[str, ...] = ("memory:read", "memory:write"),
        *,
        name: str = "client suite",
        context_set_id: str | None = None,
    ) -> str:
        body: dict[str, Any] = {"name": name, "scopes": list(scopes)}
        if context_set_id is not None:
            body["contextSetId"] = context_set_id
        response = self.api("POST", "agent-credentials", body)
        assert response.status_code == 201, response.text
        return response.json()["token"]


@dataclass
class Workspace:
    id: str
    owner: Member
    members: dict[str, Member] = field(default_factory=dict)


@dataclass
class World:
    main: Workspace  # agent memories on; editors for the tests that need a member of their own
    workspace_off: Workspace  # "Let agents keep memories" left off (the default)
    organization_off: Workspace  # the platform flag off (createworkspace --ai-memory-unavailable)
    non_retaining: Workspace  # createworkspace --non-retaining

    def member(self, name: str) -> Member:
        return self.main.members[name]


class LiveServer:
    def __init__(self, var_dir: Path):
        self.var_dir = var_dir
        self.python = server_python()
        self.processes: dict[str, subprocess.Popen] = {}
        self.ports: dict[str, int] = {}
        database_url = os.environ.get("DATABASE_URL")
        self.redis_url = os.environ.get("REDIS_URL") if database_url else None
        self.database_url = None
        if database_url:
            name = urlsplit(database_url).path.lstrip("/") or "memory"
            self.database_url = _with_database(database_url, f"test_{name}_live")
        self.backend = "PostgreSQL + Redis" if self.database_url else "SQLite"

    # --- processes ---------------------------------------------------------------------------
    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in SERVER_VARIABLES}
        env.update(
            VAR_DIR=str(self.var_dir),
            DEBUG="0",
            PROMETHEUS_MULTIPROC_DIR=str(self.var_dir / "prometheus"),
            LOG_LEVEL="INFO",
            LOG_FORMAT="json",
            PYTHONUNBUFFERED="1",
        )
        if self.database_url:
            env["DATABASE_URL"] = self.database_url
            env["REDIS_URL"] = self.redis_url or "redis://127.0.0.1:6379/0"
        env.update(extra)
        return env

    def run(self, *args: str, env: dict[str, str] | None = None, input: str | None = None) -> str:
        completed = subprocess.run(
            [str(self.python), *args],
            cwd=REPO,
            env=env or self.env(),
            input=input,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if completed.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args[:3])} failed "
                f"({completed.returncode}):\n{completed.stdout[-2000:]}\n{completed.stderr[-4000:]}"
            )
        return completed.stdout

    def manage(self, *commands: list[str]) -> list[dict[str, Any]]:
        """Run management commands (each with --json) in one process; their JSON answers."""
        script = (
            "import io, json, sys\n"
            "from django.core.management import call_command\n"
            "for argv in json.loads(sys.stdin.read()):\n"
            "    out = io.StringIO()\n"
            "    call_command(*argv, '--json', stdout=out)\n"
            "    print(out.getvalue().strip())\n"
        )
        # These commands embed nothing, so they skip loading the default model (seconds per process).
        output = self.run(
            "manage.py",
            "shell",
            "-c",
            script,
            env=self.env(MEMORY_EMBEDDER="hashing"),
            input=json.dumps([list(c) for c in commands]),
        )
        return [json.loads(line) for line in output.splitlines() if line.startswith("{")]

    def _prepare_backend(self) -> None:
        self.var_dir.mkdir(parents=True, exist_ok=True)
        if not self.database_url:
            return
        script = (
            "import sys, psycopg, redis\n"
            "url, name, admin, redis_url = sys.argv[1:5]\n"
            "with psycopg.connect(admin, autocommit=True) as c:\n"
            "    for db in (name, f'{name}_keyring'):  # the key store too: its keys need this run's KEK\n"
            "        c.execute(f'DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)')\n"
            "    if sys.argv[5] == 'create':\n"
            "        c.execute(f'CREATE DATABASE \"{name}\"')\n"
            "redis.Redis.from_url(redis_url).flushdb()\n"
        )
        self._backend_script = script
        self._backend("create")

    def _backend(self, action: str) -> None:
        name = urlsplit(self.database_url).path.lstrip("/")
        admin = _with_database(self.database_url, "postgres")
        self.run("-c", self._backend_script, self.database_url, name, admin, self.env()["REDIS_URL"], action)

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> None:
        log = (self.var_dir / f"{name}.log").open("wb")
        self.processes[name] = subprocess.Popen(
            [str(self.python), *args], cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )

    def _web(self, name: str, **extra: str) -> None:
        port = free_port()
        self.ports[name] = port
        self._spawn(
            name,
            ["-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1", "--port", str(port), "--no-access-log"],
            self.env(**extra),
        )

    def start(self) -> None:
        self._prepare_backend()
        (self.var_dir / "prometheus").mkdir(parents=True, exist_ok=True)
        self.run("manage.py", "migrate", "--noinput")
        self.run("manage.py", "encrypt_memories")  # as the run command does (a no-op on a fresh database)
        self._spawn(
            "worker",
            ["-m", "celery", "-A", "config", "worker", "--concurrency=1", "--pool=threads", "--loglevel=WARNING"],
            self.env(),
        )
        self._web("main")
        self._web("tight", **TIGHT)
        broker = self.env().get("REDIS_URL") or f"sqla+sqlite:///{self.var_dir / 'celery-broker.sqlite3'}"
        self._web(
            "nolimiter",
            RATE_LIMIT_BACKEND="redis",
            REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
            CELERY_BROKER_URL=broker,
            MEMORY_EMBEDDER="hashing",
        )
        self._ready = False  # url() waits for them: the world's management commands run meanwhile

    def wait_ready(self) -> None:
        if not self._ready:
            for name in self.ports:
                self._wait(name)
            self._ready = True

    def _wait(self, name: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                status = httpx.get(f"http://127.0.0.1:{self.ports[name]}/healthz", timeout=2).status_code
                # nolimiter's health check reports its (deliberately) unreachable Redis: answering is enough
                if status == 200 or name == "nolimiter":
                    return
            except httpx.TransportError:
                pass  # not listening yet: poll again until the deadline
            if self.processes[name].poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{name} did not start: {self.log(name)[-3000:]}")
            time.sleep(0.2)

    def url(self, name: str = "main") -> str:
        self.wait_ready()
        return f"http://127.0.0.1:{self.ports[name]}"

    def log(self, name: str) -> str:
        path = self.var_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def server_errors(self) -> list[str]:
        """Log lines of answers with status 500, and tracebacks, from every process."""
        found = []
        for name in self.processes:
            for line in self.log(name).splitlines():
                if '"status": 500' in line or "Traceback" in line:
                    found.append(f"{name}: {line[:300]}")
        return found

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if self.database_url and getattr(self, "_backend_script", None):
            self._backend("drop")

    # --- a world to test in ----------------------------------------------------------------------
    def workspaces(self, *specs: tuple[str, tuple[str, ...], tuple[str, ...]]) -> list[Workspace]:
        """Workspaces `(name, editors, createworkspace flags)`, each with its owner and editors
        (management commands, two processes in all) and agent memories switched on unless
        flagged `off`."""
        slugs = [name.lower().replace(" ", "-") for name, _, _ in specs]
        created = self.manage(
            *[
                ["createworkspace", name, "--owner", f"owner@{slug}.test", *[f for f in flags if f != "off"]]
                for (name, _, flags), slug in zip(specs, slugs)
            ]
        )
        commands: list[list[str]] = []
        for (_, members, _), slug, ws in zip(specs, slugs, created):
            commands.append(["issue_api_token", f"owner@{slug}.test"])
            for member in members:
                commands += [
                    ["addmember", ws["workspaceId"], f"{member}@{slug}.test", "--role", "editor"],
                    ["issue_api_token", f"{member}@{slug}.test"],
                ]
        answers = iter(self.manage(*commands))
        result = []
        for (_, members, flags), slug, ws in zip(specs, slugs, created):
            ws_id = ws["workspaceId"]
            workspace = Workspace(
                ws_id, Member(self, ws_id, ws["ownerMemberId"], f"owner@{slug}.test", next(answers)["token"])
            )
            for member in members:
                member_id = next(answers)["memberId"]
                workspace.members[member] = Member(
                    self, ws_id, member_id, f"{member}@{slug}.test", next(answers)["token"]
                )
            if "off" not in flags:
                response = workspace.owner.api("PUT", "ask-history/settings", {"agentMemoriesEnabled": True})
                assert response.status_code == 200, response.text
            result.append(workspace)
        return result
