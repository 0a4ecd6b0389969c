"""pytest plugin loaded only by mutation runs (`-p tests.mutmut_plugin`, set in [tool.mutmut]).

mutmut forks one child per mutant from the process that ran the stats pass, and each child runs
its own pytest session. Two children running at once must not share (and flush) a test database:
the first process builds the schema once (kept with --reuse-db) and is the template; every other
process gets private copies of every database, the data's and the key store's, named by its pid,
so a mutant's run costs its tests, not a migration.

SQLite: a copy of each template file. PostgreSQL (`MUTATION_DATABASE_URL`, bench/mutation.sh):
`CREATE DATABASE … TEMPLATE`, dropped when the session ends (and leftovers of killed children
when the next run's template process starts).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

_made: list[Path] = []
_cloned: list[str] = []


def _clear_process_caches() -> None:
    """The forked mutant runs inherit the caches the clean run filled: a cached answer of the
    original code would hide a mutant (masking's per-character normalisation map, its detectors'
    functools caches, the limiter)."""
    import sys

    from core import backends
    from memoryapp.masking import text

    text._CHAR_MAP.clear()
    for name, module in list(sys.modules.items()):
        if name.startswith("memoryapp.masking") and module is not None:
            for value in vars(module).values():
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()
    backends.forget("RATE_LIMIT_BACKEND")


def _postgres(sql: str, params: tuple = ()) -> list[tuple]:
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    with psycopg.connect(
        dbname="postgres",
        user=db.get("USER") or None,
        password=db.get("PASSWORD") or None,
        host=db.get("HOST") or None,
        port=db.get("PORT") or None,
        autocommit=True,
    ) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def _test_name(db: dict) -> str:
    return db.get("TEST", {}).get("NAME") or f"test_{db['NAME']}"


def _clone(template: str, private: str, lock: Path) -> None:
    """CREATE DATABASE … TEMPLATE, one at a time (PostgreSQL refuses a template another session
    reads, and two clones at once are two such sessions), retried while a session lingers. A clone
    that cannot be made ends the process with 35, mutmut's "suspicious": an infrastructure failure
    must never count as a killed mutant."""
    import fcntl
    import time

    for attempt in range(30):
        with open(lock, "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            try:
                _postgres(f'DROP DATABASE IF EXISTS "{private}" WITH (FORCE)')
                _postgres(f'CREATE DATABASE "{private}" TEMPLATE "{template}"')
                return
            except Exception as exc:  # noqa: BLE001 -- retried, then reported as suspicious
                failure = exc
        time.sleep(0.2 * (attempt + 1))
    print(f"mutmut_plugin: could not clone {template}: {failure}", flush=True)
    os._exit(35)


def pytest_sessionstart(session):
    from django.conf import settings

    _clear_process_caches()

    base = Path(settings.VAR_DIR) / "mutmut"
    base.mkdir(parents=True, exist_ok=True)
    owner = base / "template.pid"
    first = not owner.exists() or owner.read_text() == str(os.getpid())
    if first:
        owner.write_text(str(os.getpid()))
    for alias, db in settings.DATABASES.items():
        if db["ENGINE"] == "django.db.backends.sqlite3":
            template = base / f"template-{alias}.sqlite3"
            if first:
                db.setdefault("TEST", {})["NAME"] = str(template)
                continue
            private = base / f"test-{alias}-{os.getpid()}.sqlite3"
            try:
                source, target = sqlite3.connect(template), sqlite3.connect(private)
                with target:
                    source.backup(target)
                source.close()
                target.close()
            except sqlite3.Error as exc:  # as _clone: never a killed mutant
                print(f"mutmut_plugin: could not copy {template}: {exc}", flush=True)
                os._exit(35)
            _made.append(private)
            db.setdefault("TEST", {})["NAME"] = str(private)
        elif db["ENGINE"] == "django.db.backends.postgresql":
            template = _test_name(db)
            if first:
                for (name,) in _postgres("SELECT datname FROM pg_database WHERE datname LIKE %s", (f"{template}_p%",)):
                    _postgres(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                continue
            private = f"{template}_p{os.getpid()}"
            _clone(template, private, base / "clone.lock")
            _cloned.append(private)
            db.setdefault("TEST", {})["NAME"] = private


def pytest_sessionfinish(session, exitstatus):
    from django.db import connections

    # the template process closes its connections too: a database being read cannot be a TEMPLATE
    connections.close_all()
    while _made:
        path = _made.pop()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    while _cloned:
        _postgres(f'DROP DATABASE IF EXISTS "{_cloned.pop()}" WITH (FORCE)')
