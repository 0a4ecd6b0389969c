"""pytest plugin loaded only by mutation runs (`-p tests.mutmut_plugin`, set in [tool.mutmut]).

mutmut forks one child per mutant from the process that ran the stats pass, and each child runs
its own pytest session. Two children running at once must not share (and flush) a test database:
the first process builds the schema once (kept with --reuse-db) and is the template; every other
process gets private copies of every database, the data's and the key store's, named by its pid,
so a mutant's run costs its tests, not a migration.

SQLite: a copy of each template file. PostgreSQL (`MUTATION_DATABASE_URL`, bench/mutation.sh):
`CREATE DATABASE … TEMPLATE` from a copy of the first process's test database that no session
opens, dropped when the session ends (and leftovers of killed runs when the next run starts).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import time
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


_templates: list[tuple[str, Path]] = []


def _clone(template: str, private: str, lock: Path) -> None:
    """CREATE DATABASE … TEMPLATE, one at a time (PostgreSQL refuses a template another session
    reads, and two clones at once are two such sessions), retried while a session lingers. A clone
    that cannot be made ends the process with 35, mutmut's "suspicious": an infrastructure failure
    must never count as a killed mutant."""
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


def pytest_runtest_setup(item):
    """The character map again before each test: filled by an earlier test, it would answer a
    later one without calling `_normalise_char`, so mutmut's stats pass would not record that
    test as reaching it, and would not run it against the function's mutants (the `Nd` branch
    survived that way while `test_normalisation.py` fails it)."""
    from memoryapp.masking import text

    text._CHAR_MAP.clear()


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
            test = db.setdefault("TEST", {})
            if first:
                # pinned in the first session: Django renames NAME to the test database's name, and
                # a later session would otherwise test in "test_test_…"
                test["NAME"] = test.get("NAME") or f"test_{db['NAME']}"
                for (name,) in _postgres(
                    "SELECT datname FROM pg_database WHERE datname LIKE %s", (f"{test['NAME']}_p%",)
                ):
                    _postgres(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                _templates.append((test["NAME"], base / "clone.lock"))
                continue
            private = f"{test['NAME']}_p{os.getpid()}"
            _clone(f"{test['NAME']}_tpl", private, base / "clone.lock")
            _cloned.append(private)
            test["NAME"] = private
    if not first:
        _drop_inherited_connections()


def _drop_inherited_connections() -> None:
    """A forked mutant run inherits the template process's open connections: never use them (they
    point at the template), close them so the run opens its own."""
    from django.db import DatabaseError, connections

    with contextlib.suppress(DatabaseError, OSError):  # an inherited socket may already be gone
        connections.close_all()


def pytest_sessionfinish(session, exitstatus):
    from django.db import connections

    connections.close_all()
    while _made:
        path = _made.pop()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    while _cloned:
        _postgres(f'DROP DATABASE IF EXISTS "{_cloned.pop()}" WITH (FORCE)')
    # The template process copies its test database to `<name>_tpl`, which no session ever opens,
    # so the mutant runs clone from a database nobody reads (a TEMPLATE must have no sessions).
    while _templates:
        name, lock = _templates.pop()
        with open(lock, "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            _postgres(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            _postgres(f'DROP DATABASE IF EXISTS "{name}_tpl" WITH (FORCE)')
            _postgres(f'CREATE DATABASE "{name}_tpl" TEMPLATE "{name}"')
