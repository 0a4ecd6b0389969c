"""psycopg's own cursor on one of Django's connections (binary results, no query logging), opened
the way Django's `cursor()` opens its own: the connection is health-checked first
(`CONN_HEALTH_CHECKS`: one the server dropped — a restart, a failover — is replaced, instead of
being reused until `CONN_MAX_AGE` runs out), and errors come out as `django.db`'s, marking the
connection so that the end of the request replaces it (bench/faults.py, docs/operations.md "Fault
rehearsal")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper


@contextmanager
def native_cursor(wrapper: BaseDatabaseWrapper) -> Iterator[Any]:
    import psycopg

    wrapper.close_if_health_check_failed()
    wrapper.ensure_connection()
    with wrapper.wrap_database_errors, psycopg.Cursor(wrapper.connection) as cursor:
        yield cursor
