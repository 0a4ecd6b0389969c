"""Files only the service's user may read: the embedded default's SQLite databases.

`var/memory.sqlite3` and `var/keyring.sqlite3` hold ciphertext and wrapped keys, next to key files
that are mode 600; they are created 600 too (`create_private`, from the settings, before any
connection), and every SQLite connection restricts its database's files again
(`restrict_sqlite_files`, on `connection_created`): a file an older version created 644 is fixed
at the next start. SQLite creates a database's `-wal`, `-shm` and `-journal` with the database
file's own permission bits, so they follow.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE = 0o600
SQLITE_SIDECARS = ("", "-wal", "-shm", "-journal")


def create_private(path: Path | str) -> None:
    """Create `path` (empty) mode 600 if it does not exist, and make it 600 if it does."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) != PRIVATE:
            os.fchmod(fd, PRIVATE)
    finally:
        os.close(fd)


def _on_disk(name: str) -> bool:
    return bool(name) and name != ":memory:" and not name.startswith("file:") and "mode=memory" not in name


def restrict_sqlite_files(name: str) -> None:
    """Mode 600 for a SQLite database file and its -wal, -shm and -journal, those that exist."""
    if not _on_disk(name):
        return
    for suffix in SQLITE_SIDECARS:
        path = f"{name}{suffix}"
        try:
            if stat.S_IMODE(os.stat(path).st_mode) & 0o077:
                os.chmod(path, PRIVATE)
        except FileNotFoundError:
            continue


def on_connection_created(sender, connection, **kwargs) -> None:
    """`django.db.backends.signals.connection_created` receiver: every SQLite database's files private."""
    if connection.vendor == "sqlite":
        restrict_sqlite_files(str(connection.settings_dict.get("NAME") or ""))
