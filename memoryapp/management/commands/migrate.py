"""This command replaces Django's own `migrate` (an app's command of the same name wins over
Django's): `manage.py migrate` migrates the key store too (SPEC §8.2). Everything else is Django's
command, unchanged (docs/operations.md, "Migrations").

The data keys live in a database of their own (alias `keyring`, memoryapp.routers). So that every
place that sets the product up — the README's run command, CI, the client's live server, the
benchmarks — needs no second step, migrating the default database migrates the keyring after it
(creating its PostgreSQL database first when it does not exist yet). `migrate --database keyring`
migrates the keyring alone. Inside a test database (the test runner migrates each alias itself)
nothing more is done.
"""

from __future__ import annotations

from typing import Any

from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import DEFAULT_DB_ALIAS, connections

from memoryapp.routers import KEYRING


def _in_test_database() -> bool:
    """Under a test runner (Django's or pytest-django's), which sets the test environment up
    before it creates the test databases and migrates every alias itself."""
    from django.test.utils import _TestState

    return hasattr(_TestState, "saved_data")


def ensure_postgres_database(alias: str) -> bool:
    """Create the alias's PostgreSQL database when it does not exist (True when created)."""
    import psycopg
    from psycopg import sql

    params = connections[alias].get_connection_params()
    name = params.pop("dbname")
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    with psycopg.connect(**{**params, "dbname": "postgres"}, autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            return False
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return True


def _close_pool(alias: str) -> None:
    connection = connections[alias]
    connection.close()
    connection.close_pool()


class Command(DjangoMigrate):
    help = "Updates the database schema, then the key store's (`--database keyring` for the keyring alone)."

    def handle(self, *args: Any, **options: Any) -> None:
        both = options["database"] == DEFAULT_DB_ALIAS and not options.get("app_label") and not _in_test_database()
        if (options["database"] == KEYRING or both) and connections[KEYRING].vendor == "postgresql":
            # before anything reads the key store (the KEK start-up check does): a pool opened on
            # a database that did not exist yet keeps backing off and can time out once it does
            if ensure_postgres_database(KEYRING):
                _close_pool(KEYRING)
                if options["verbosity"] >= 1:
                    self.stdout.write(f"Created the key store's database {connections[KEYRING].settings_dict['NAME']}.")
        super().handle(*args, **options)
        if not both:
            return
        if options["verbosity"] >= 1:
            self.stdout.write("Key store (database alias `keyring`):")
        super().handle(*args, **{**options, "database": KEYRING})
