"""The access-log entry against erases and crashes (issue 32 build item 2, SPEC §8.1).

- An erase that commits between a read and its entry must not leave the entry listing what it
  erased: `access_log.record` lists only the versions still stored (and counts the others in
  `erased`). Before, the plain INSERT wrote the erased ids back after the erase had struck them.
- On PostgreSQL the check holds with the two running side by side (real threads, real row locks):
  an erase holding its locks makes the entry wait and find the memory gone; an entry holding its
  lock makes the erase wait and then strike it.
- A server killed with SIGKILL right after answering has written the entry of every read it
  answered (the entry is written before the answer: nothing is held in memory to lose).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest
from django.db import connection, transaction

from governance.models import Credential
from memoryapp import access_log
from memoryapp.models import AccessEntry, MemoryVersion
from retention import erasure
from tests.processes import BASE_DIR, free_port, server_env, stop, wait_until_serving
from tests.support import make_agent, postgres_threads

GUARD = 60  # seconds a thread may wait before the test fails as hung (not a timing assertion)


def remember(agent, text: str) -> int:
    response = agent.remember(namespace="prefs", text=text)
    assert response.status_code == 201, response.content
    return int(response.json()["memory"]["id"])


def erase_before_the_entry(monkeypatch, erase) -> None:
    """The read runs, then `erase` commits, then the read's entry is written: the interleaving a
    concurrent forget can produce, made deterministic."""
    original = access_log.record

    def record(**fields):
        erase()
        return original(**fields)

    monkeypatch.setattr(access_log, "record", record)


@pytest.mark.django_db
def test_an_erase_between_the_read_and_its_entry_leaves_no_reference_to_what_it_erased(world, monkeypatch):
    agent = make_agent(world.editor)
    ids = [remember(agent, f"Prefers quokka number {i}") for i in range(3)]
    forgotten = ids[1]
    statuses: list[int] = []
    erase_before_the_entry(monkeypatch, lambda: statuses.append(agent.forget(memoryId=str(forgotten)).status_code))
    response = agent.list()
    assert statuses == [200]
    assert response.status_code == 200 and forgotten in {
        int(m["id"]) for m in response.json()["memories"]
    }  # read before the erase
    entry = AccessEntry.objects.get()
    assert sorted(entry.memory_ids) == sorted(set(ids) - {forgotten})
    assert (entry.returned, entry.erased) == (3, 1)
    assert access_log.count_listing([forgotten]) == 0


@pytest.mark.django_db
def test_a_read_whose_every_memory_was_erased_since_leaves_no_entry(world, monkeypatch):
    agent = make_agent(world.editor)
    only = remember(agent, "Prefers the quokka at the window")
    statuses: list[int] = []
    erase_before_the_entry(monkeypatch, lambda: statuses.append(agent.forget(memoryId=str(only)).status_code))
    response = agent.recall(query="quokka at the window")
    assert statuses == [200]
    assert response.status_code == 200 and [int(m["id"]) for m in response.json()["memories"]] == [only]
    assert not AccessEntry.objects.exists()


# --- side by side, on PostgreSQL ---------------------------------------------------------------------
def waiting_on_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return bool(row) and row[0] == "Lock"


def until(condition) -> None:
    deadline = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < deadline, "the other side never got there"
        time.sleep(0.01)


class Side(threading.Thread):
    """`work` in a transaction of its own connection, held open after `work` until released."""

    def __init__(self, work):
        super().__init__(daemon=True)
        self.work, self.result, self.error = work, None, None
        self.pid: int | None = None
        self.reached, self.release = threading.Event(), threading.Event()

    def run(self) -> None:
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    self.pid = cursor.fetchone()[0]
                self.result = self.work()
                self.reached.set()
                assert self.release.wait(GUARD)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.reached.set()
            connection.close()


def entry_for(world, agent_credential, ids):
    memories = [{"id": pk, "version": 1} for pk in ids]
    return lambda: access_log.record(
        credential=agent_credential,
        member=world.editor,
        operation="recall",
        surface="rest",
        memories=memories,
        hidden=0,
    )


def forget(world, pk):
    return lambda: erasure.erase_memories(
        [pk], operation="forget", workspace_id=world.workspace.pk, member_id=world.editor.pk, actor_label="racer"
    )


@postgres_threads
def test_an_entry_written_while_an_erase_holds_its_locks_waits_and_finds_the_memory_gone(world):
    agent = make_agent(world.editor)
    ids = [remember(agent, f"Prefers quokka number {i}") for i in range(2)]
    credential = Credential.objects.filter(member=world.editor).latest("pk")
    eraser = Side(forget(world, ids[0]))
    eraser.start()
    assert eraser.reached.wait(GUARD) and eraser.error is None  # erased, not committed
    writer = Side(entry_for(world, credential, ids))
    writer.start()
    until(lambda: writer.pid is not None and waiting_on_a_lock(writer.pid))  # the entry waits for the erase
    eraser.release.set()
    eraser.join(GUARD)
    assert writer.reached.wait(GUARD) and writer.error is None
    writer.release.set()
    writer.join(GUARD)
    entry = AccessEntry.objects.get()
    assert entry.memory_ids == [ids[1]] and (entry.returned, entry.erased) == (2, 1)
    assert access_log.count_listing([ids[0]]) == 0


@postgres_threads
def test_an_erase_running_while_an_entry_is_uncommitted_waits_for_it_and_strikes_it(world):
    agent = make_agent(world.editor)
    ids = [remember(agent, f"Prefers quokka number {i}") for i in range(2)]
    credential = Credential.objects.filter(member=world.editor).latest("pk")
    writer = Side(entry_for(world, credential, ids))
    writer.start()
    assert writer.reached.wait(GUARD) and writer.error is None and writer.result is not None  # written, not committed
    eraser = Side(forget(world, ids[0]))
    eraser.start()
    until(lambda: eraser.pid is not None and waiting_on_a_lock(eraser.pid))  # the erase waits for the entry
    writer.release.set()
    writer.join(GUARD)
    assert eraser.reached.wait(GUARD) and eraser.error is None
    eraser.release.set()
    eraser.join(GUARD)
    entry = AccessEntry.objects.get()
    assert entry.memory_ids == [ids[1]] and (entry.returned, entry.erased) == (2, 1)
    assert access_log.count_listing([ids[0]]) == 0


# --- a crash right after the answer ------------------------------------------------------------------
READS = 8


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("surface", ["rest", "mcp"])
def test_a_server_killed_right_after_answering_has_written_the_entry_of_every_read_it_answered(
    world, tmp_path, surface
):
    """uvicorn serving config.asgi (one process) gets READS concurrent recalls, one credential
    each, over REST or MCP's streamable HTTP, and is SIGKILLed the moment the first answer
    arrives. Every read answered has its entry; a read still running may or may not have one (it
    answered nothing). An entry written after the answer dies with the process: moving the write
    in `memoryapp.reads` to a timer thread made this test fail (REST with a 50 ms timer; MCP, whose
    answer takes longer to reach the client, with 0.5 s)."""
    from governance import actions as governance

    writer = make_agent(world.editor)
    for i in range(3):
        remember(writer, f"Prefers quokka number {i}")
    readers = [
        governance.create_credential(world.editor, name=f"reader {i}", scopes=["memory:read"]) for i in range(READS)
    ]
    port = free_port()
    log = tmp_path / "uvicorn.log"
    env = server_env(MEMORY_EMBEDDER="hashing", DEBUG="0", ALLOWED_HOSTS="127.0.0.1")
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "config.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-access-log",
        "--log-level",
        "warning",
    ]
    with log.open("wb") as stderr:
        server = subprocess.Popen(
            command, cwd=BASE_DIR, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr
        )
    base = f"http://127.0.0.1:{port}"
    answered: set[int] = set()

    def kill_on_answer(pk: int) -> None:
        answered.add(pk)
        if server.poll() is None:
            os.kill(server.pid, signal.SIGKILL)  # right after the first answer: whatever was pending is lost

    async def over_rest(http: httpx.AsyncClient, pk: int, token: str) -> None:
        response = await http.post(
            "/api/agent/v1/memories/recall",
            json={"query": "which quokka"},
            headers={"Authorization": f"Bearer {token}"},
        )
        if response.status_code == 200 and len(response.json()["memories"]) == 3:
            kill_on_answer(pk)

    async def over_mcp(_http: httpx.AsyncClient, pk: int, token: str) -> None:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        session = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=GUARD)
        async with session, Client(streamable_http_client(f"{base}/mcp", http_client=session)) as client:
            result = await client.call_tool("recall_memories", {"query": "which quokka"})
            if not result.is_error and len(result.structured_content["memories"]) == 3:
                kill_on_answer(pk)

    read = over_rest if surface == "rest" else over_mcp
    try:
        wait_until_serving(f"{base}/readyz", [server], log)

        async def drive() -> list[None | BaseException]:
            async with httpx.AsyncClient(base_url=base, timeout=GUARD) as http:
                return await asyncio.gather(
                    *(read(http, credential.pk, token) for credential, token in readers), return_exceptions=True
                )

        outcomes = asyncio.run(drive())
    finally:
        stop([server])
    assert server.returncode == -signal.SIGKILL
    assert answered, outcomes
    assert MemoryVersion.objects.count() == 3
    for pk in answered:
        entry = AccessEntry.objects.get(credential_ref=pk)
        assert entry.returned == 3 and len(entry.memory_ids) == 3 and entry.surface == surface


@postgres_threads
def test_only_the_entry_commits_without_waiting_for_the_wal_flush(world):
    """The entry's statement relaxes synchronous_commit for its own transaction only: the
    connection's next transaction (a remember, say) commits as configured again, and inside a
    caller's transaction the entry leaves the caller's setting alone."""
    agent = make_agent(world.editor)
    remember(agent, "Prefers the quokka at the window")

    def setting() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            return cursor.fetchone()[0]

    configured = setting()
    assert agent.recall(query="quokka").status_code == 200 and AccessEntry.objects.count() == 1
    assert setting() == configured
    memories = [
        {"id": pk, "version": 1}
        for pk in MemoryVersion.objects.filter(member=world.editor).values_list("pk", flat=True)
    ]
    credential = Credential.objects.filter(member=world.editor).latest("pk")
    with transaction.atomic():
        assert (
            access_log.record(
                credential=credential,
                member=world.editor,
                operation="list",
                surface="rest",
                memories=memories,
                hidden=0,
            )
            is not None
        )
        assert setting() == configured
    assert setting() == configured and AccessEntry.objects.count() == 2
