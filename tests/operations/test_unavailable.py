"""A database that cannot serve now answers 503 SERVICE_UNAVAILABLE with Retry-After — JSON on the
REST API and the MCP tools, a page elsewhere — never a 500 (issue 32): a lost or refused
connection, a pool with no connection free in time (PostgreSQL), a lock not granted in time
(SQLite's "database is locked"). A database mistake stays a 500."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connection
from django.db.utils import OperationalError
from django.test import Client

from core.unavailable import is_database_unavailable
from memoryapp.mcp.tools import run_operation
from tests.support import error_code, make_agent

pytestmark = pytest.mark.django_db


def lost_connection() -> OperationalError:
    """What Django raises when the server dropped or refused the connection: its OperationalError
    with the driver's as the cause (as `wrap_database_errors` builds it)."""
    if connection.vendor == "sqlite":
        driver = sqlite3.OperationalError("database is locked")
    else:
        driver = psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")
    error = OperationalError(*driver.args)
    error.__cause__ = driver
    return error


@contextmanager
def failing_queries(error: Exception):
    """Every query of this thread's default connection fails with `error`, in the real request path."""

    def fail(execute, sql, params, many, context):
        raise error

    with connection.execute_wrapper(fail):
        yield


def assert_unavailable(response) -> None:
    assert response.status_code == 503
    assert error_code(response) == "SERVICE_UNAVAILABLE"
    assert int(response["Retry-After"]) >= 1
    assert response.json()["error"]["message"]


def test_a_lost_connection_answers_503_json_on_the_rest_api(world):
    agent = make_agent(world.editor)
    with failing_queries(lost_connection()):
        recall = agent.recall(query="which editor")
        remember = agent.remember(namespace="prefs", text="Prefers vim.")
    assert_unavailable(recall)
    assert_unavailable(remember)


def test_the_workspace_api_answers_503_json_too(world):
    client = Client(raise_request_exception=False)
    client.force_login(world.owner.user)
    with failing_queries(lost_connection()):
        response = client.get(f"/api/w/{world.workspace.id}/members")
    assert_unavailable(response)


def test_a_page_answers_an_html_503_page(world):
    client = Client(raise_request_exception=False)
    client.force_login(world.owner.user)
    with failing_queries(lost_connection()):
        response = client.get("/")
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
    assert int(response["Retry-After"]) >= 1
    assert b"503" in response.content


def test_an_mcp_tool_answers_the_same_code(world):
    agent = make_agent(world.editor)
    with failing_queries(lost_connection()):
        result = run_operation(agent.token, "recall", {"query": "which editor"})
    assert result.is_error
    assert result.structured_content["error"]["code"] == "SERVICE_UNAVAILABLE"


def test_a_database_mistake_stays_a_500(world):
    """Only "not now" is a 503: a statement the database refuses is a bug, and says so."""
    driver = (
        sqlite3.OperationalError("no such table: x")
        if connection.vendor == "sqlite"
        else psycopg.errors.UndefinedTable("relation x does not exist")
    )
    error = OperationalError(*driver.args)
    error.__cause__ = driver
    agent = make_agent(world.editor)
    agent.client.raise_request_exception = False
    with failing_queries(error):
        response = agent.recall(query="which editor")
    assert response.status_code == 500
    assert error_code(response) == "INTERNAL_ERROR"


@pytest.mark.parametrize(
    ("error", "unavailable"),
    [
        (psycopg.OperationalError("connection refused"), True),  # no SQLSTATE: the connection itself
        (psycopg.errors.TooManyConnections("too many clients already"), True),
        (psycopg.errors.AdminShutdown("terminating connection due to administrator command"), True),
        (psycopg.errors.LockNotAvailable("could not obtain lock"), True),
        (psycopg.errors.QueryCanceled("canceling statement due to statement timeout"), True),
        (psycopg.errors.DeadlockDetected("deadlock detected"), True),
        (psycopg.errors.UndefinedTable("relation x does not exist"), False),
        (psycopg.errors.ProgramLimitExceeded("index row size exceeds maximum"), False),
        (sqlite3.OperationalError("database is locked"), True),
        (sqlite3.OperationalError("unable to open database file"), True),
        (sqlite3.OperationalError("no such table: x"), False),
        (ValueError("database is locked"), False),
    ],
)
def test_which_errors_mean_not_now(error, unavailable):
    wrapped = OperationalError(*error.args)
    wrapped.__cause__ = error
    assert is_database_unavailable(error) is unavailable
    assert is_database_unavailable(wrapped) is unavailable


def test_a_pool_timeout_is_not_now():
    from psycopg_pool import PoolTimeout

    wrapped = OperationalError("couldn't get a connection after 10.00 sec")
    wrapped.__cause__ = PoolTimeout("couldn't get a connection after 10.00 sec")
    assert is_database_unavailable(wrapped)


# --- the real thing, on each backend -------------------------------------------------------------
@pytest.fixture
def tiny_pool():
    """PostgreSQL: the default database's pool shrunk to one connection and a 0.3 s wait."""
    if connection.vendor != "postgresql":
        pytest.skip("backend: the connection pool is PostgreSQL's")
    options = connection.settings_dict["OPTIONS"]
    connection.close()
    options["pool"] = {"min_size": 1, "max_size": 1, "timeout": 0.3}
    try:
        yield connection.pool
    finally:
        connection.close()
        connection.close_pool()
        options.pop("pool")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_pool_with_no_connection_free_answers_503(world, tiny_pool):
    agent = make_agent(world.editor)
    connection.close()  # give this thread's connection back: the request must borrow one
    held = tiny_pool.getconn()  # another request holds the only one
    try:
        response = agent.recall(query="which editor")
    finally:
        tiny_pool.putconn(held)
    assert_unavailable(response)
    assert agent.recall(query="which editor").status_code == 200  # and then it serves again


@pytest.fixture
def short_busy_timeout():
    """SQLite: the default database waits 0.2 s for a lock instead of 30 s."""
    if connection.vendor != "sqlite":
        pytest.skip("backend: SQLite's lock")
    options = connection.settings_dict["OPTIONS"]
    saved = dict(options)
    connection.close()
    options.update(timeout=0.2, init_command=options["init_command"].replace("busy_timeout=30000", "busy_timeout=200"))
    try:
        yield connection.settings_dict["NAME"]
    finally:
        connection.close()
        options.clear()
        options.update(saved)


@pytest.mark.django_db(transaction=True)
def test_a_write_lock_held_elsewhere_answers_503(world, short_busy_timeout):
    agent = make_agent(world.editor)
    other = sqlite3.connect(short_busy_timeout, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        response = agent.remember(namespace="prefs", text="Prefers vim.")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert_unavailable(response)
    assert agent.remember(namespace="prefs", text="Prefers vim.").status_code == 201
