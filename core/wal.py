"""SQLite write-ahead-log checkpoints that never wait longer than they are told.

An erase must not leave erased bytes in a WAL file, but a checkpoint that waits for readers while
its caller holds the write lock stalls every writer of the file. The erase
paths checkpoint without waiting; the sweep truncates later with a bounded wait
(`retention.erasure.truncate_wals`, docs/encryption.md)."""

from __future__ import annotations

import logging
import time

from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger(__name__)


def sqlite_checkpoint(connection: BaseDatabaseWrapper, *, attempts: int, wait_ms: int, what: str) -> bool:
    """`PRAGMA wal_checkpoint(TRUNCATE)` on a SQLite connection outside any transaction, with the
    busy timeout lowered to `wait_ms` for it (SQLite then checkpoints what it can without
    waiting, as PASSIVE does, and answers busy). True once the WAL was emptied."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        busy_timeout = cursor.fetchone()[0]
        cursor.execute(f"PRAGMA busy_timeout = {int(wait_ms)}")
        try:
            for attempt in range(attempts):
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                busy, _, _ = cursor.fetchone()
                if not busy:
                    return True
                if attempt + 1 < attempts:
                    time.sleep(0.02 * (attempt + 1))
        finally:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout)}")
    logger.info(
        "%s WAL checkpoint stayed busy after %d attempts (a reader is open); the sweep truncates it", what, attempts
    )
    return False
