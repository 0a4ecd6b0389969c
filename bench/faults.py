"""Fault rehearsal: each fault injected under load into the product as it is deployed, and what the
clients saw.

    .venv/bin/python bench/faults.py [--backend postgres sqlite] [--short] [--only NAME ...] [--clients 4]

It never touches the machine's own servers: it starts its OWN PostgreSQL clusters (data on 8055, key
store on 8057), redis-server (8056) and the run command's processes (web on 8050), and restarts or
kills only those. Faults: `pg_restart`, `redis_restart`, `keyring_down`, `worker_kill` (PostgreSQL +
Redis), and `keyring_down`, `worker_kill` on the embedded default. A client loop runs before, during
and after each; every memory answered 201 must still exist and open at the end, and after every
fault the same worker must erase a removed probe member's memories by itself.

The last line is `RESULT <json>`; the exit status is 1 when a check failed (lost 201s, no recovery,
a half-done erase, a probe the worker never erased). JSON-ness is reported, not enforced:
tests/operations/test_faults.py states what it expects. What each fault does and what is printed:
docs/operations.md "Fault rehearsal".
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from _setup import wait_ready  # noqa: E402

VENV_BIN = ROOT / ".venv" / "bin"
BIN = VENV_BIN if (VENV_BIN / "celery").exists() else Path(sys.executable).parent
WEB_PORT, PG_PORT, REDIS_PORT, KEYRING_PORT = 8050, 8055, 8056, 8057
FAULTS = {
    "postgres": ["pg_restart", "redis_restart", "keyring_down", "worker_kill"],
    "sqlite": ["keyring_down", "worker_kill"],
}
WORDS = (
    "shipping warehouse invoice vim emacs python meeting lunch aisle window seat "
    "deadline budget report review osaka tokyo coffee tea"
).split()
ERASE_TASK = "retention.tasks.erase_unreachable_task"


def log(message: str) -> None:
    print(message, flush=True)


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=True, capture_output=True, text=True, **kwargs)


# --- services the harness owns -----------------------------------------------------------------
class PgCluster:
    """A throwaway PostgreSQL cluster in a temp dir, run as `postgres` when we are root."""

    def __init__(self, root: Path, port: int):
        self.dir, self.port = root / f"pg{port}", port
        self.bin = (
            sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
            if Path("/usr/lib/postgresql").exists()
            else Path(shutil.which("pg_ctl") or "pg_ctl").parent
        )
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _pg(self, tool: str, *args: str) -> subprocess.CompletedProcess:
        return run([*self.as_user, str(self.bin / tool), *args])

    def init(self) -> None:
        self.dir.mkdir(parents=True)
        if self.as_user:
            shutil.chown(self.dir, "postgres", "postgres")
        self._pg("initdb", "-D", str(self.dir), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        conf = (
            f"port = {self.port}\n"
            "listen_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{self.dir}'\n"
            "max_connections = 200\n"
            "shared_buffers = 32MB\n"
        )
        with open(self.dir / "postgresql.conf", "a") as handle:
            handle.write(conf)
        self.start()

    def start(self) -> None:
        self._pg("pg_ctl", "-D", str(self.dir), "-l", str(self.dir / "server.log"), "-w", "-t", "60", "start")

    def stop(self, mode: str = "immediate") -> None:
        self._pg("pg_ctl", "-D", str(self.dir), "-m", mode, "-w", "stop")

    def create_database(self, name: str) -> str:
        self._pg("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-c", f'CREATE DATABASE "{name}"')
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"


class RedisServer:
    def __init__(self, root: Path, port: int):
        self.dir, self.port, self.process = root / "redis", port, None
        self.dir.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        command = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.dir),
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if (
                subprocess.run(
                    ["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True
                ).stdout.strip()
                == "PONG"
            ):
                return
            time.sleep(0.1)
        raise RuntimeError("redis-server did not start")

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


class SqliteGone:
    """The key store's file unreachable, as on a volume that went away: moved aside and a directory
    put in its place, so no new connection can open it (SQLite connections are not kept between
    requests). A connection still open keeps its file descriptors and writes to the real file."""

    def __init__(self, path: Path):
        self.path, self.aside = path, path.with_name(path.name + ".away")

    def take(self) -> None:
        os.rename(self.path, self.aside)
        os.mkdir(self.path)

    def release(self) -> None:
        os.rmdir(self.path)
        os.rename(self.aside, self.path)


class Processes:
    """The product's own processes, each in its own process group (a kill reaches its children)."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root, self.env, self.running = root, env, {}

    def start(self, name: str, command: list[str]) -> subprocess.Popen:
        out = open(self.root / f"{name}.log", "a")  # noqa: SIM115 -- the process owns it
        process = subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.running[name] = process
        return process

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        process = self.running.pop(name)
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    def stop_all(self) -> None:
        for name in list(self.running):
            self.kill(name, signal.SIGTERM)

    def tail(self, name: str, chars: int = 3000) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")[-chars:]


# --- the product, seeded ---------------------------------------------------------------------------
def seed(load_members: int, victim_memories: int, probes: int) -> dict:
    """A workspace, members with credentials for the load, one member with many sealed memories
    (the erase to interrupt), and small probe members (the worker's liveness after each fault)."""
    from governance import actions
    from memoryapp.models import MemoryEmbedding, MemoryVersion
    from memoryapp.recall.index import index_entry
    from memoryapp.sealing import prepare_keys

    workspace, owner = actions.create_workspace("Faults", owner_email="owner@faults.test")
    actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=None)
    tokens = []
    for m in range(load_members):
        member = actions.add_member(workspace, f"load{m}@faults.test", role="editor")
        tokens += [
            actions.create_credential(member, name="load", scopes=["memory:read", "memory:write"])[1] for _ in range(2)
        ]

    def member_with(email: str, count: int) -> dict:
        member = actions.add_member(workspace, email, role="editor")
        rng = random.Random(email)
        rows = [
            MemoryVersion(
                workspace=workspace,
                member=member,
                namespace="notes",
                text="Note " + " ".join(rng.choice(WORDS) for _ in range(10)),
                text_length=60,
            )
            for _ in range(count)
        ]
        for start in range(0, count, 1000):
            batch = rows[start : start + 1000]
            prepare_keys(batch)
            MemoryVersion.objects.bulk_create(batch)
        versions = list(MemoryVersion.objects.filter(member=member))
        MemoryEmbedding.objects.bulk_create([index_entry(v) for v in versions], batch_size=1000)
        return {"member": member.pk, "ids": [v.pk for v in versions], "keys": [str(v.key_id) for v in versions]}

    return {
        "workspace": workspace.pk,
        "owner_token": actions.issue_personal_token(owner.user),
        "tokens": tokens,
        "victims": [member_with("victim@faults.test", victim_memories)],
        "probes": [member_with(f"probe{n}@faults.test", 3) for n in range(probes)],
    }


# --- the client loop ---------------------------------------------------------------------------------
class Load:
    """Clients sending remember / recall / list until stopped; every answer recorded."""

    def __init__(self, base: str, tokens: list[str], clients: int):
        self.base, self.tokens, self.clients = base, tokens, clients
        self.answers: list[dict] = []
        self.remembered: list[int] = []
        self.stop_event = threading.Event()
        self.running = threading.Event()  # cleared: clients wait before their next request
        self.running.set()
        self.thread: threading.Thread | None = None
        self.t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def _client(self, n: int) -> None:
        import httpx

        rng = random.Random(n)
        async with httpx.AsyncClient(base_url=self.base, timeout=45) as client:
            i = 0
            while not self.stop_event.is_set():
                while not self.running.is_set():
                    await asyncio.sleep(0.05)
                token = self.tokens[(n + i * self.clients) % len(self.tokens)]
                roll = rng.random()
                if roll < 0.3:
                    op, body = (
                        "remember",
                        {"namespace": "faults", "text": "Fault note " + " ".join(rng.choice(WORDS) for _ in range(8))},
                    )
                elif roll < 0.65:
                    op, body = "recall", {"query": " ".join(rng.choice(WORDS) for _ in range(2))}
                else:
                    op, body = "list", {"limit": 20}
                sent = self.now()
                answer = {"op": op, "sent": sent}
                try:
                    response = await client.post(
                        f"/api/agent/v1/memories/{op}", json=body, headers={"Authorization": f"Bearer {token}"}
                    )
                    answer.update(status=response.status_code, **classify(response))
                    if response.status_code == 201:
                        self.remembered.append(int(response.json()["memory"]["id"]))
                except httpx.HTTPError as exc:
                    answer.update(status=0, json=False, code=type(exc).__name__)
                answer["done"] = self.now()
                self.answers.append(answer)
                i += 1
                if answer["status"] not in (200, 201):
                    await asyncio.sleep(0.2)  # a client backs off a little when refused

    def start(self) -> None:
        async def main() -> None:
            await asyncio.gather(*(self._client(n) for n in range(self.clients)))

        self.thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(60)

    def between(self, start: float, end: float) -> list[dict]:
        return [a for a in self.answers if start <= a["done"] < end]


def classify(response) -> dict:
    """json: the answer is JSON, and a refusal carries the house body; code: its error code."""
    try:
        body = response.json()
    except ValueError:
        return {"json": False, "code": response.headers.get("content-type", "?").split(";")[0]}
    if response.status_code < 400:
        return {"json": isinstance(body, dict), "code": ""}
    error = body.get("error") if isinstance(body, dict) else None
    house = isinstance(error, dict) and {"code", "message", "details"} <= set(error)
    return {
        "json": bool(house),
        "code": error.get("code", "?") if isinstance(error, dict) else "?",
        "retry_after": "retry-after" in response.headers,
    }


def wait_recovered(load: Load, since: float, quiet: float, bound: float) -> float | None:
    """Seconds from `since` to the last failed answer, once `quiet` seconds of answers (at least
    5) have all succeeded; None when that did not happen within `bound` seconds."""
    while load.now() < since + bound:
        time.sleep(0.5)
        recent = load.between(load.now() - quiet, load.now() + 1)
        if len(recent) >= 5 and all(a["status"] in (200, 201) for a in recent) and load.now() - since >= quiet:
            failed = [a["done"] for a in load.between(since, load.now() + 1) if a["status"] not in (200, 201)]
            return round(max(failed) - since, 2) if failed else 0.0
    return None


def summary(answers: list[dict]) -> dict:
    statuses = Counter(a["status"] for a in answers)
    failures = Counter(f"{a['status']} {a['code']}" for a in answers if a["status"] not in (200, 201))
    return {
        "requests": len(answers),
        "statuses": dict(sorted(statuses.items())),
        "nonJson": sum(1 for a in answers if not a.get("json")),
        "failures": dict(failures.most_common()),
        "5xxWithoutRetryAfter": sum(1 for a in answers if a["status"] >= 500 and not a.get("retry_after")),
    }


# --- checks ------------------------------------------------------------------------------------------
def fresh_connections() -> None:
    from django.db import connections

    connections.close_all()


def lost_remembers(ids: list[int]) -> dict:
    """Every memory answered 201 still stored and readable (its text opens)."""
    from memoryapp.models import MemoryVersion
    from memoryapp.sealing import is_unreadable

    fresh_connections()
    found = {}
    for start in range(0, len(ids), 500):
        for version in MemoryVersion.objects.filter(pk__in=ids[start : start + 500]).keep_unreadable():
            found[version.pk] = not is_unreadable(version)
    return {
        "answered201": len(ids),
        "missing": len(set(ids) - set(found)),
        "unreadable": sum(1 for ok in found.values() if not ok),
    }


def erase_state(victim: dict) -> dict:
    from memoryapp.keyring import key_store
    from memoryapp.models import MemoryVersion
    from retention.models import DeletionReceipt

    fresh_connections()
    rows = dict(MemoryVersion.objects.filter(pk__in=victim["ids"]).values_list("pk", "key_id"))
    present = {str(k) for k in key_store().present(victim["keys"])}
    receipts = list(
        DeletionReceipt.objects.filter(member_ref=victim["member"]).values_list("memory_version_ids", flat=True)
    )
    erased = Counter(i for ids in receipts for i in ids)
    return {
        "rows": len(rows),
        "keys": len(present),
        "rowsWithoutKey": sum(1 for k in rows.values() if str(k) not in present),
        "keysWithoutRow": len(present - {str(k) for k in rows.values()}),
        "receipts": len(receipts),
        "idsInReceipts": len(erased),
        "idsInTwoReceipts": sum(1 for c in erased.values() if c > 1),
    }


def remove_member(base: str, seeded: dict, member_id: int) -> int:
    import httpx

    url = f"{base}/api/w/{seeded['workspace']}/members/{member_id}"
    return httpx.delete(url, headers={"Authorization": f"Token {seeded['owner_token']}"}, timeout=30).status_code


def probe_worker(base: str, seeded: dict, probe: dict, bound: float) -> dict:
    """Remove a probe member over the API; the worker (not a sweep) must erase their memories."""
    from memoryapp.models import MemoryVersion

    started = time.monotonic()
    status = remove_member(base, seeded, probe["member"])
    while time.monotonic() - started < bound:
        fresh_connections()
        if not MemoryVersion.objects.filter(pk__in=probe["ids"]).exists():
            return {"removeStatus": status, "erasedByWorkerIn": round(time.monotonic() - started, 2)}
        time.sleep(0.5)
    return {"removeStatus": status, "erasedByWorkerIn": None}


def run_sweeps(env: dict[str, str]) -> dict:
    out = run(
        [
            str(BIN / "python"),
            "manage.py",
            "run_periodic_jobs",
            "--only",
            "cascade_sweep",
            "--only",
            "keyring_sweep",
            "--json",
        ],
        cwd=ROOT,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- one backend -------------------------------------------------------------------------------------
class Rehearsal:
    def __init__(self, backend: str, root: Path, args: argparse.Namespace):
        self.backend, self.root, self.args = backend, root, args
        self.base = f"http://127.0.0.1:{WEB_PORT}"
        self.pg = self.keyring_pg = self.redis = None
        self.env = self._environment()
        self.procs = Processes(root, self.env)

    def _environment(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k
            not in (
                "DATABASE_URL",
                "REDIS_URL",
                "CELERY_BROKER_URL",
                "KEYRING_DATABASE_URL",
                "PROMETHEUS_MULTIPROC_DIR",
            )
        }
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings",
            VAR_DIR=str(self.root / "var"),
            DEBUG="0",
            ALLOWED_HOSTS="127.0.0.1",
            MEMORY_KEK=base64.b64encode(secrets.token_bytes(32)).decode(),
            MEMORY_EMBEDDER=self.args.embedder,
            LOG_LEVEL="INFO",
            AGENT_REMEMBERS_PER_HOUR="1000000",
            MEMORY_READS_PER_HOUR="1000000",
            CELERY_TASK_ALWAYS_EAGER="0",
        )
        if self.backend == "postgres":
            self.pg, self.keyring_pg, self.redis = (
                PgCluster(self.root, PG_PORT),
                PgCluster(self.root, KEYRING_PORT),
                RedisServer(self.root, REDIS_PORT),
            )
            self.pg.init()
            self.keyring_pg.init()
            self.redis.start()
            env.update(
                DATABASE_URL=self.pg.create_database("memory"),
                KEYRING_DATABASE_URL=self.keyring_pg.create_database("memory_keyring"),
                REDIS_URL=f"redis://127.0.0.1:{REDIS_PORT}/0",
            )
        return env

    def start_web(self) -> None:
        command = [
            str(BIN / "uvicorn"),
            "config.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(WEB_PORT),
            "--no-access-log",
        ]
        if self.backend == "postgres":
            command += ["--workers", str(self.args.web_workers)]
        self.procs.start("web", command)
        wait_ready(self.base, seconds=60, describe=lambda: self.procs.tail("web"))

    def start_worker(self) -> None:
        pool = (
            ["--pool=prefork", "--concurrency=2"]
            if self.backend == "postgres"
            else ["--pool=threads", "--concurrency=2"]
        )
        self.procs.start("worker", [str(BIN / "celery"), "-A", "config", "worker", *pool, "-l", "INFO"])
        deadline = time.monotonic() + 90
        while "ready." not in self.procs.tail("worker", 100_000):
            if time.monotonic() > deadline:
                raise RuntimeError("worker did not start: " + self.procs.tail("worker"))
            time.sleep(0.3)

    def setup(self) -> None:
        os.environ.update(self.env)
        for name in ("DATABASE_URL", "REDIS_URL", "KEYRING_DATABASE_URL"):
            if name not in self.env:
                os.environ.pop(name, None)
        import django

        django.setup()
        import logging

        logging.getLogger().setLevel(
            logging.WARNING
        )  # the harness's own log; the product's processes log at INFO to their files
        from django.core.management import call_command

        started = time.monotonic()
        call_command("migrate", verbosity=0)
        self.seeded = seed(8, self.args.victim_memories, len(FAULTS[self.backend]) + 1)
        self.start_web()
        self.start_worker()
        log(f"{self.backend}: migrated, seeded and started in {time.monotonic() - started:.0f} s")

    # --- faults: each returns (time the service went down, time it came back, extra details) -----
    def fault_pg_restart(self, load: Load) -> tuple[float, float, dict]:
        down = load.now()
        self.pg.stop("immediate")
        time.sleep(self.args.down)
        self.pg.start()
        return down, load.now(), {}

    def fault_keyring_down(self, load: Load) -> tuple[float, float, dict]:
        if self.backend == "postgres":
            down = load.now()
            self.keyring_pg.stop("immediate")
            time.sleep(self.args.down)
            self.keyring_pg.start()
            return down, load.now(), {}
        gone = SqliteGone(Path(self.env["VAR_DIR"]) / "keyring.sqlite3")
        gone.take()
        down = load.now()
        time.sleep(self.args.down)
        gone.release()
        return down, load.now(), {}

    def fault_redis_restart(self, load: Load) -> tuple[float, float, dict]:
        down = load.now()
        self.redis.kill()
        time.sleep(self.args.down)
        self.redis.start()
        return down, load.now(), {}

    def fault_worker_kill(self, load: Load) -> tuple[float, float, dict]:
        """Remove the victim member (the erase is a Celery task queued on commit); SIGKILL the
        worker's process group once its erase has started destroying keys (or 3 s after it got
        the task); start a new worker; run the sweeps once."""
        victim = self.seeded["victims"][0]
        from memoryapp.keyring import key_store

        before_log = len(self.procs.tail("worker", 10_000_000))
        down = load.now()
        status = remove_member(self.base, self.seeded, victim["member"])
        received = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if received is None and ERASE_TASK + "[" in self.procs.tail("worker", 10_000_000)[before_log:]:
                received = time.monotonic()
            fresh_connections()
            if len(key_store().present(victim["keys"])) < len(victim["keys"]) or (
                received and time.monotonic() - received > 3
            ):
                break
            time.sleep(0.01)
        self.procs.kill("worker")
        at_kill = erase_state(victim)
        self.start_worker()
        up = load.now()
        sweeps = run_sweeps(self.env)
        return (
            down,
            up,
            {
                "victimMemories": len(victim["ids"]),
                "removeStatus": status,
                "taskSeen": received is not None,
                "afterKill": at_kill,
                "sweeps": sweeps,
                "afterSweep": erase_state(victim),
            },
        )

    def rehearse(self, name: str, probe: dict) -> dict:
        load = Load(self.base, self.seeded["tokens"], self.args.clients)
        load.start()
        time.sleep(self.args.before)
        down, up, details = getattr(self, f"fault_{name}")(load)
        recovered = wait_recovered(load, up, self.args.quiet, self.args.bound)
        end = load.now()
        load.stop()
        result = {
            "backend": self.backend,
            "fault": name,
            "downFor": round(up - down, 2),
            **summary(load.answers),
            "whileDown": summary(load.between(down, up)),
        }
        result["timeToRecover"] = recovered
        result["lost201"] = lost_remembers(load.remembered)
        result["worker"] = probe_worker(self.base, self.seeded, probe, self.args.bound)
        result["afterRecovery"] = summary(load.between(up + (recovered or 0) + 0.01, end + 1))
        result.update(details)
        return result

    def run(self) -> list[dict]:
        results = []
        try:
            self.setup()
            names = [n for n in FAULTS[self.backend] if not self.args.only or n in self.args.only]
            for name, probe in zip(names, self.seeded["probes"], strict=False):
                log(f"--- {self.backend}: {name}")
                result = self.rehearse(name, probe)
                report(result)
                results.append(result)
            results.append(
                {
                    "backend": self.backend,
                    "fault": "all",
                    "lost201": None,
                    "webRestarted": self.procs.running["web"].poll() is not None,
                }
            )
        finally:
            self.procs.stop_all()
            if self.redis:
                self.redis.kill()
            for cluster in (self.pg, self.keyring_pg):
                if cluster:
                    try:
                        cluster.stop("fast")
                    except subprocess.CalledProcessError:
                        pass
        return results


def failed_checks(result: dict) -> list[str]:
    """What makes a fault's rehearsal fail (JSON-ness is reported, not judged here)."""
    if result["fault"] == "all":
        return ["the web process died"] if result["webRestarted"] else []
    problems = []
    if result["timeToRecover"] is None:
        problems.append("no recovery within the bound")
    lost = result["lost201"]
    if lost["missing"] or lost["unreadable"]:
        problems.append(f"{lost['missing']} remembered memories missing, {lost['unreadable']} unreadable")
    if result["worker"]["erasedByWorkerIn"] is None:
        problems.append("the worker did not erase the probe member's memories")
    after = result.get("afterSweep")
    if after and (
        after["rows"]
        or after["keys"]
        or after["idsInTwoReceipts"]
        or after["idsInReceipts"] != result["victimMemories"]
    ):
        problems.append(f"erase not converged: {after}")
    return problems


def report(result: dict) -> None:
    log(
        f"  requests {result['requests']}, statuses {result['statuses']}, not JSON {result['nonJson']}, 5xx without "
        f"Retry-After {result['5xxWithoutRetryAfter']}"
    )
    log(
        f"  while down ({result['downFor']} s): {result['whileDown']['requests']} requests, "
        f"{result['whileDown']['statuses']}, failures {result['whileDown']['failures']}"
    )
    log(f"  time to recover: {result['timeToRecover']} s; after recovery: {result['afterRecovery']['statuses']}")
    log(f"  lost 201s: {result['lost201']}; worker after the fault: {result['worker']}")
    if "afterKill" in result:
        log(f"  erase right after the kill: {result['afterKill']}")
        log(f"  erase after the sweep:      {result['afterSweep']}  (sweeps: {result['sweeps']})")
    problems = failed_checks(result)
    log("  checks: " + ("passed" if not problems else "FAILED: " + "; ".join(problems)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", nargs="+", choices=sorted(FAULTS), default=["postgres", "sqlite"])
    parser.add_argument("--only", nargs="+", choices=sorted({f for names in FAULTS.values() for f in names}))
    parser.add_argument("--short", action="store_true", help="the test's form: shorter phases, fewer memories")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument(
        "--embedder",
        default="hashing",
        help="MEMORY_EMBEDDER of the product's processes (default: hashing, light on CPU)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    timing = (
        {"before": 2, "down": 4, "quiet": 3, "bound": 60, "victim_memories": 3000}
        if args.short
        else {"before": 5, "down": 10, "quiet": 5, "bound": 90, "victim_memories": 5000}
    )
    for key, value in timing.items():
        setattr(args, key, value)
    if args.child:  # one backend per process: Django is configured once per process
        with tempfile.TemporaryDirectory(prefix=f"faults-{args.child}-") as tmp:
            root = Path(tmp)
            if os.geteuid() == 0:
                os.chmod(root, 0o755)
            results = Rehearsal(args.child, root, args).run()
        log("RESULT " + json.dumps(results))
        return 0
    everything, failed = [], False
    for backend in args.backend:
        command = [
            sys.executable,
            __file__,
            "--child",
            backend,
            "--clients",
            str(args.clients),
            "--web-workers",
            str(args.web_workers),
            "--embedder",
            args.embedder,
        ]
        command += ["--short"] if args.short else []
        command += ["--only", *args.only] if args.only else []
        out = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        lines = out.stdout.splitlines()
        print("\n".join(line for line in lines if not line.startswith("RESULT ")), flush=True)
        results = [json.loads(line[7:]) for line in lines if line.startswith("RESULT ")]
        if out.returncode or not results:
            log(f"{backend}: the rehearsal itself failed (exit {out.returncode})")
            failed = True
            continue
        everything += results[0]
    failed = failed or any(failed_checks(r) for r in everything)
    log("RESULT " + json.dumps(everything))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
