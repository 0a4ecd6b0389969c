"""An erase never waits for a WAL flush while it holds the write lock (issue 32, row 3).

Backup and replication tools hold read transactions open on the SQLite files. The erase used to
checkpoint the key store's WAL with TRUNCATE from inside its transaction, retrying 5 times, each
waiting the busy timeout (30 s) for that reader: every other write of every workspace waited
behind it, and past the busy timeout answered an HTML 500. Now the erase checkpoints without
waiting, the request answers at once, other writes go on, and the WAL sweep truncates the WAL
once the reader has ended (docs/encryption.md, "The WAL window").

The busy timeout is lowered to 1 s here so that the old behaviour fails in seconds, not minutes;
what is asserted (other writes succeed while the erase runs, the erased key leaves the files
once the reader is gone) is the production behaviour."""

from __future__ import annotations

import subprocess
import sys
import threading
from uuid import uuid4

import pytest
from django.db import connections

from memoryapp.keyring import KEYRING, DataKey, key_store
from memoryapp.models import MemoryVersion
from retention import erasure, lifecycle
from retention.forgetting import occurrences_on_disk, sqlite_files
from tests import sqlite_locks
from tests.support import make_agent

pytestmark = [pytest.mark.django_db(transaction=True)]

HOLD_READER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN")
db.execute("SELECT count(*) FROM memoryapp_datakey").fetchone()
print("reading", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


@pytest.fixture
def short_busy_timeout():
    with sqlite_locks.short_busy_timeout():
        yield


@pytest.fixture
def keyring_reader():
    """Another process holding a read transaction open on the key store's file (what a backup tool
    does), until the test releases it."""
    if connections["default"].vendor != "sqlite" or connections[KEYRING].vendor != "sqlite":
        pytest.skip("backend: SQLite only (the embedded default's WAL)")
    name = connections[KEYRING].settings_dict["NAME"]
    reader = subprocess.Popen(
        [sys.executable, "-c", HOLD_READER, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert reader.stdout.readline().strip() == "reading"

    def release() -> None:
        if reader.poll() is None:
            reader.stdin.write("\n")
            reader.stdin.flush()
            reader.wait(timeout=10)

    yield release
    release()


def test_forget_with_a_reader_held_open_does_not_stall_other_workspaces(
    world, short_busy_timeout, keyring_reader, monkeypatch
):
    editor, other = make_agent(world.editor), make_agent(world.outsider)
    assert editor.remember(namespace="n", key="k", text="a note to forget").status_code == 201
    assert other.remember(namespace="o", text="a note that stays").status_code == 201
    key_id = MemoryVersion.objects.get(member=world.editor).key_id
    wrapped = bytes(DataKey.objects.using(KEYRING).get(pk=key_id).wrapped)

    destroying = threading.Event()
    destroy = erasure.destroy_keys

    def destroy_keys(key_ids):
        destroying.set()  # the erase holds the write lock from here to its commit
        return destroy(key_ids)

    monkeypatch.setattr(erasure, "destroy_keys", destroy_keys)
    answers: dict[str, object] = {}

    def run(name, call):
        try:
            editor.client.raise_request_exception = other.client.raise_request_exception = False
            answers[name] = call()
        finally:
            connections.close_all()

    forget = threading.Thread(target=run, args=("forget", lambda: editor.forget(namespace="n", key="k")))
    forget.start()
    assert destroying.wait(timeout=30)
    others = [
        threading.Thread(
            target=run, args=("remember", lambda: other.remember(namespace="o", text="written while the erase runs"))
        ),
        threading.Thread(target=run, args=("recall", lambda: other.recall(query="note"))),
    ]
    for thread in others:
        thread.start()
    for thread in [forget, *others]:
        thread.join(timeout=120)

    assert answers["forget"].status_code == 200 and answers["forget"].json()["forgotten"] == 1
    assert answers["remember"].status_code == 201, answers["remember"].content[:300]
    assert answers["recall"].status_code == 200, answers["recall"].content[:300]

    # The reader ends; the sweep's bounded TRUNCATE then leaves no byte of the destroyed key.
    keyring_reader()
    assert lifecycle.wal_sweep() == {"walsTruncated": True}
    assert occurrences_on_disk(sqlite_files(KEYRING), wrapped) == 0


def test_the_erase_checkpoints_without_waiting_for_a_held_reader(world, keyring_reader):
    # PASSIVE in effect: with frames newer than the reader's snapshot in the WAL, the checkpoint
    # answers busy at once instead of waiting the busy timeout (30 s here), and the sweep
    # completes it once the reader is gone.
    key_store().put({uuid4(): bytes(32)}, owner="test")
    assert erasure.flush_erased_wals() is False
    keyring_reader()
    assert erasure.truncate_wals() is True


@pytest.fixture
def checkpoints(monkeypatch):
    """Every WAL checkpoint asked for, as (database, attempts, wait_ms)."""
    import core.wal
    import memoryapp.keyring

    calls: list[tuple[str, int, int]] = []

    def spy(connection, *, attempts, wait_ms, what):
        calls.append((what, attempts, wait_ms))
        return core.wal.sqlite_checkpoint(connection, attempts=attempts, wait_ms=wait_ms, what=what)

    monkeypatch.setattr(erasure, "sqlite_checkpoint", spy)
    monkeypatch.setattr(memoryapp.keyring, "sqlite_checkpoint", spy)
    return calls


def test_the_erase_never_waits_and_the_sweep_waits_a_bounded_time_once_per_database(checkpoints):
    # The erase's flush holds no lock but answers a request: it never waits for a reader (0 ms,
    # a few passive attempts). The sweep waits at most its bound, once per database, so a held
    # reader costs it 2 s per run, not the busy timeout. On PostgreSQL neither has a WAL to flush.
    sqlite = connections["default"].vendor == "sqlite"
    assert erasure.flush_erased_wals() is sqlite
    assert erasure.truncate_wals() is (True if sqlite else None)
    assert erasure.truncate_wals(wait_ms=150) is (True if sqlite else None)
    expected = [
        ("database", 3, 0),
        ("keyring", 3, 0),
        ("database", 1, erasure.SWEEP_CHECKPOINT_WAIT_MS),
        ("keyring", 1, erasure.SWEEP_CHECKPOINT_WAIT_MS),
        ("database", 1, 150),
        ("keyring", 1, 150),
    ]
    assert checkpoints == (expected if sqlite else [])
    assert erasure.SWEEP_CHECKPOINT_WAIT_MS == 2000


def test_a_reader_held_on_the_key_store_alone_keeps_the_sweep_from_reporting_empty_wals(keyring_reader, checkpoints):
    key_store().put({uuid4(): bytes(32)}, owner="test")
    assert erasure.truncate_wals(wait_ms=0) is False  # the data's WAL empties, the key store's cannot
    assert [what for what, _, _ in checkpoints] == ["database", "keyring"]
    keyring_reader()
    assert erasure.truncate_wals(wait_ms=0) is True


def test_no_checkpoint_is_attempted_inside_a_transaction(checkpoints):
    from django.db import transaction

    with transaction.atomic():
        assert erasure.checkpoint_sqlite_wal() is False
    with transaction.atomic(using=KEYRING):
        assert key_store().checkpoint() is False
    assert checkpoints == []


@pytest.mark.parametrize("on_postgresql", ["default", KEYRING])
def test_a_mixed_deployment_truncates_the_sqlite_side_alone(on_postgresql, checkpoints):
    # KEYRING_DATABASE_URL may put the key store on SQLite beside data on PostgreSQL, or the
    # reverse: the sweep truncates the WAL of the SQLite one and reports on it alone.
    from unittest import mock

    if connections["default"].vendor != "sqlite" or connections[KEYRING].vendor != "sqlite":
        pytest.skip("backend: SQLite only (one side is made to read as PostgreSQL)")
    with mock.patch.object(connections[on_postgresql], "vendor", "postgresql"):
        assert erasure.truncate_wals(wait_ms=0) is True
        # the erase's flush empties the SQLite side's WAL too; it answers False whenever the data
        # is on PostgreSQL (checkpoint_sqlite_wal has no WAL to empty there)
        assert erasure.flush_erased_wals() is (on_postgresql == KEYRING)
    sqlite_side = "keyring" if on_postgresql == "default" else "database"
    assert [what for what, _, _ in checkpoints] == [sqlite_side, sqlite_side]
