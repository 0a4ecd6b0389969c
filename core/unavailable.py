"""A database that cannot serve the request right now — its pool has no connection free in time,
the server refused or dropped the connection, a lock was not granted — is a 503 the client may
retry, never a 500: `SERVICE_UNAVAILABLE` with `Retry-After`, on the REST API, the MCP tools and
(as a page) everywhere else.

Only these: an OperationalError that is a mistake (a missing table, a bad statement) stays a 500."""

from __future__ import annotations

import sqlite3

from django.db import utils as db_utils

from core.errors import ApiError

try:  # PostgreSQL's driver and its pool; the embedded default (SQLite) needs neither
    import psycopg
except ImportError:  # pragma: no cover - psycopg is a dependency
    psycopg = None
try:
    from psycopg_pool import PoolTimeout, TooManyRequests
except ImportError:  # pragma: no cover - psycopg[pool] is a dependency
    PoolTimeout = TooManyRequests = None

# SQLSTATE classes and codes that say "not now", not "never": 08 connection exception,
# 53 insufficient resources (too many connections), 57 operator intervention (shutdown, statement
# or lock timeout, cannot connect now), 55P03 lock not available, 40001 / 40P01 serialization
# failure and deadlock (the transaction was rolled back).
_RETRYABLE_CLASSES = ("08", "53", "57")
_RETRYABLE_STATES = {"55P03", "40001", "40P01"}
# SQLite: another connection holds the lock past the busy timeout, or the file cannot be reached
# now (moved, its volume gone or failing): the embedded deployment's "server unreachable".
_SQLITE_BUSY = (
    "database is locked",
    "database table is locked",
    "database schema is locked",
    "unable to open database file",
    "disk I/O error",
)
RETRY_AFTER_SECONDS = 2


def _chain(exc: BaseException):
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _retryable(exc: BaseException) -> bool:
    if PoolTimeout is not None and isinstance(exc, (PoolTimeout, TooManyRequests)):
        return True
    if psycopg is not None and isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        # No SQLSTATE: the connection itself failed (refused, lost, closed by the server).
        return state is None or state.startswith(_RETRYABLE_CLASSES) or state in _RETRYABLE_STATES
    if psycopg is not None and isinstance(exc, psycopg.InterfaceError):
        return "closed" in str(exc)  # "the connection is closed": lost between two queries
    if isinstance(exc, sqlite3.OperationalError):
        return str(exc).startswith(_SQLITE_BUSY)
    return False


def is_database_unavailable(exc: BaseException | None) -> bool:
    """Whether `exc` (a Django database error, or the driver's or pool's own) says the database
    cannot serve now: Django wraps the driver's exception and keeps it as the cause."""
    if not isinstance(
        exc,
        (
            db_utils.OperationalError,
            db_utils.InterfaceError,
            sqlite3.Error,
            *(() if psycopg is None else (psycopg.Error,)),
        ),
    ):
        return False
    return any(_retryable(link) for link in _chain(exc))


def service_unavailable() -> ApiError:
    return ApiError(
        503,
        "SERVICE_UNAVAILABLE",
        "The database cannot serve this request right now (busy or unreachable); try again shortly.",
        {"retryAfterSeconds": RETRY_AFTER_SECONDS},
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def database_unavailable(exc: BaseException | None) -> ApiError | None:
    """The 503 for `exc`, or None when it is not a database that cannot serve now."""
    return service_unavailable() if is_database_unavailable(exc) else None
