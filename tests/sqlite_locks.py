"""SQLite connections that wait at most 1 s for a lock (production: 30 s), for the tests of what
must not wait behind the write lock: a write held behind it then fails within a second instead
of succeeding 30 s later."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections


@contextmanager
def short_busy_timeout(seconds: int = 1) -> Iterator[None]:
    saved = {}
    for alias in connections:
        options = connections.settings[alias].setdefault("OPTIONS", {})
        saved[alias] = dict(options)
        if connections[alias].vendor == "sqlite":
            options["timeout"] = seconds
            options["init_command"] = options.get("init_command", "").replace(
                "busy_timeout=30000", f"busy_timeout={seconds * 1000}"
            )
    connections.close_all()
    try:
        yield
    finally:
        for alias, options in saved.items():
            connections.settings[alias]["OPTIONS"] = options
        connections.close_all()
