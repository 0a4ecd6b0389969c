"""The embedded default's database files are private (issue 24, review finding 3): var/memory.sqlite3
and var/keyring.sqlite3, and their -wal and -shm, are mode 600 like the key files next to them,
whatever the process's umask."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest
from django.conf import settings
from django.db.backends.sqlite3.base import DatabaseWrapper

from core import private_files

SIDECARS = ("", "-wal", "-shm")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def loose_umask():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_a_database_file_made_private_keeps_its_wal_and_shm_private(tmp_path, loose_umask):
    path = tmp_path / "memory.sqlite3"
    private_files.create_private(path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES ('a')")
    db.commit()
    assert {suffix: mode(Path(f"{path}{suffix}")) for suffix in SIDECARS} == {suffix: 0o600 for suffix in SIDECARS}
    db.close()


@pytest.mark.django_db
def test_a_connection_to_a_file_created_with_a_loose_umask_leaves_it_private(tmp_path, loose_umask):
    path = tmp_path / "created_by_sqlite.sqlite3"
    wrapper = DatabaseWrapper(_sqlite_settings(path), alias="private_files_test")
    try:
        with wrapper.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("CREATE TABLE t (x)")
            cursor.execute("INSERT INTO t VALUES ('a')")
        assert {suffix: mode(Path(f"{path}{suffix}")) for suffix in SIDECARS} == {suffix: 0o600 for suffix in SIDECARS}
    finally:
        wrapper.close()


def test_an_older_install_s_readable_files_are_restricted_at_the_next_connection(tmp_path, loose_umask):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    db.commit()
    assert mode(path) == 0o644 and mode(Path(f"{path}-wal")) == 0o644
    private_files.restrict_sqlite_files(str(path))
    assert {suffix: mode(Path(f"{path}{suffix}")) for suffix in SIDECARS} == {suffix: 0o600 for suffix in SIDECARS}
    db.close()


@pytest.mark.skipif(settings.IS_POSTGRES, reason="backend: SQLite only (the embedded default's files)")
def test_the_embedded_default_creates_its_databases_private():
    for name in ("memory.sqlite3", "keyring.sqlite3"):
        assert mode(settings.VAR_DIR / name) == 0o600, name


def _sqlite_settings(path: Path) -> dict:
    from django.db.utils import ConnectionHandler

    handler = ConnectionHandler({"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path)}})
    return handler.settings["default"]
