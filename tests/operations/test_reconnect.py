"""A connection the PostgreSQL server dropped (a restart, a failover, an idle timeout) is replaced
at the next request, on every path: also where the product reads through psycopg's own cursor for
binary results (the key store's keys), which Django's health check did not
reach. Before, such a path kept the dead connection until CONN_MAX_AGE ran out: every recall of
that process thread failed with a raw psycopg error (bench/faults.py, "keyring_down")."""

from __future__ import annotations

from uuid import uuid4

import psycopg
import pytest
from django.db import OperationalError, connection, connections

from memoryapp.crypto import new_data_key
from memoryapp.keyring import KEYRING, key_store

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgres_only():
    if connection.vendor != "postgresql" or connections[KEYRING].vendor != "postgresql":
        pytest.skip("backend: PostgreSQL only; SQLite connections are not kept between requests")


@pytest.fixture(autouse=True)
def _kept_connections():
    """Connections kept between requests (DB_CONN_MAX_AGE > 0, the pool-less set-up for PgBouncer):
    the case where a dropped one could be reused."""
    saved = {}
    for alias in ("default", KEYRING):
        connections[alias].close()
        saved[alias] = connections[alias].settings_dict["CONN_MAX_AGE"]
        connections[alias].settings_dict["CONN_MAX_AGE"] = 60
    yield
    for alias, value in saved.items():
        connections[alias].close()
        connections[alias].settings_dict["CONN_MAX_AGE"] = value


def drop_connection(alias: str) -> None:
    """The server ends this alias's connection, as a restart does; Django still holds it."""
    wrapper = connections[alias]
    wrapper.ensure_connection()
    pid = wrapper.connection.info.backend_pid
    params = wrapper.get_connection_params()
    with psycopg.connect(
        host=params.get("host") or "127.0.0.1",
        port=params.get("port") or 5432,
        user=params.get("user"),
        password=params.get("password"),
        dbname=params["dbname"],
        autocommit=True,
    ) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    wrapper.close_if_unusable_or_obsolete()  # what Django does when the next request starts
    assert wrapper.connection is not None and wrapper.health_check_enabled  # kept (CONN_MAX_AGE), checked on first use


def test_the_key_store_reconnects_when_its_server_dropped_the_connection():
    keys = {uuid4(): new_data_key()}
    key_store().put(keys, owner="tests.reconnect")
    drop_connection(KEYRING)
    assert key_store().get_many(keys) == keys


def test_a_failure_on_the_native_cursor_is_djangos_error_and_marks_the_connection():
    """An error there is django.db's (mapped like every database error) and flags the connection,
    so the end of the request replaces it."""
    wrapper = connections[KEYRING]
    wrapper.ensure_connection()
    wrapper.connection.close()  # broken under Django's feet, health check already done this request
    wrapper.health_check_done = True
    try:
        with pytest.raises(OperationalError):
            key_store().get_many([uuid4()])
        assert wrapper.errors_occurred
    finally:
        wrapper.close()
