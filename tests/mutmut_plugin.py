"""pytest plugin loaded only by mutation runs (`-p tests.mutmut_plugin`, set in [tool.mutmut]).

mutmut forks one child per mutant from the process that ran the stats pass, and each child runs
its own pytest session. On SQLite the test database is one file under VAR_DIR, so two children
running at once would share (and flush) it. Here the first session builds the schema once into
a template file (kept with --reuse-db); every other process gets a private copy named by its pid,
so a mutant's run costs its tests, not a migration.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

_made: list[Path] = []


def _clear_process_caches() -> None:
    """The forked mutant runs inherit the caches the clean run filled: a cached answer of the
    original code would hide a mutant (masking's per-character normalisation map, the limiter)."""
    from core import backends
    from memoryapp.masking import text

    text._CHAR_MAP.clear()
    backends.forget("RATE_LIMIT_BACKEND")


def pytest_sessionstart(session):
    from django.conf import settings

    _clear_process_caches()

    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.sqlite3":
        return
    base = Path(settings.VAR_DIR) / "mutmut"
    base.mkdir(parents=True, exist_ok=True)
    template, owner = base / "template.sqlite3", base / "template.pid"
    if not template.exists() or owner.read_text() == str(os.getpid()):
        owner.write_text(str(os.getpid()))
        db.setdefault("TEST", {})["NAME"] = str(template)
        return
    private = base / f"test-{os.getpid()}.sqlite3"
    source, target = sqlite3.connect(template), sqlite3.connect(private)
    with target:
        source.backup(target)
    source.close()
    target.close()
    _made.append(private)
    db.setdefault("TEST", {})["NAME"] = str(private)


def pytest_sessionfinish(session, exitstatus):
    while _made:
        path = _made.pop()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
