"""psycopg's own cursor on one of Django's connections (binary results, no query logging), opened
the way Django's `cursor()` opens its own: the connection is health-checked first
(`CONN_HEALTH_CHECKS`: one the server dropped — a restart, a failover — is replaced, instead of
being reused until `CONN_MAX_AGE` runs out), and errors come out as `django.db`'s, marking the
connection so that the end of the request replaces it (bench/faults.py, docs/operations.md "Fault
rehearsal"). `binary_like_django` makes such a cursor's binary results read as Django's text ones
(recall's candidate rows)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper


@contextmanager
def native_cursor(wrapper: BaseDatabaseWrapper) -> Iterator[Any]:
    import psycopg

    wrapper.close_if_health_check_failed()
    wrapper.ensure_connection()
    with wrapper.wrap_database_errors, psycopg.Cursor(wrapper.connection) as cursor:
        yield cursor


def binary_like_django(cursor: Any) -> None:
    """Binary results on a native cursor as close as they get to what Django's own (text) cursor
    returns: a `jsonb` comes as its text (Django registers a text loader for it, and JSONField
    decodes it). Binary results skip the hex of every bytea and the text parsing of every
    timestamp (Python code in Django's loader). A `timestamptz` keeps psycopg's own binary
    loader (C): the right instant in the session's time zone (UTC, which Django sets: then the
    very tzinfo Django's loader gives), where Django's loader stamps the connection's `timezone`
    (None without USE_TZ): `django_datetime` does that for the values a caller keeps (recall
    reads 1,800 timestamps and shows at most 50)."""
    cursor.adapters.register_loader("jsonb", _jsonb_text())


def django_datetime(value: Any, wrapper: BaseDatabaseWrapper) -> Any:
    """A timestamp from a binary native cursor as Django's loader gives it (`binary_like_django`)."""
    return value if value is None else value.replace(tzinfo=wrapper.timezone)


@cache
def _jsonb_text() -> type:
    from psycopg import pq
    from psycopg.adapt import Loader

    class JsonbText(Loader):
        """Binary `jsonb` (a version byte, 1, then the JSON text) as its text."""

        format = pq.Format.BINARY

        def load(self, data: Any) -> str:
            if bytes(data[:1]) != b"\x01":
                raise ValueError("unknown jsonb binary format version")
            return bytes(data[1:]).decode("utf-8")

    return JsonbText
