from django.apps import AppConfig
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.db.backends.signals import connection_created

from core import backends, private_files
from memoryapp.recall.embedders import EmbedderUnavailable, configure_engine, require_embedder


class MemoryAppConfig(AppConfig):
    name = "memoryapp"
    verbose_name = "Memories"

    def ready(self) -> None:
        # The Celery tasks, registered in every process (not only workers) so that work queued by
        # name resolves, and runs in place in eager mode; metrics and task log lines for every task
        # and every deletion receipt (the observers). Importing either needs the models.
        from memoryapp import observers, tasks  # noqa: F401 -- tasks: importing registers them

        observers.connect()
        # The SQLite databases' files (and their -wal, -shm) mode 600, whatever the umask.
        connection_created.connect(private_files.on_connection_created, dispatch_uid="private_sqlite_files")
        # Every configured backend's dotted path imports (the servers and workers do not run the
        # system checks, so it is run here as well: a wrong path stops every process at start).
        checks.register(backends.check_backends)
        backends.require_backends()
        check_embedder()
        checks.register(check_key_encryption_keys)


def check_key_encryption_keys(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """memoryapp.E001: stored data keys that no configured KEK opens (a deleted key file, an unset
    MEMORY_KEK, a KEK missing from RETIRED_KEKS). Every management command that runs the system
    checks refuses then, naming the missing KEK ids (`check`, `rotate_kek`, `seed_demo`, `migrate`
    too); the servers and Celery run `require_keks()` themselves. Before `migrate`, or with the key
    store unreachable, there is nothing to check (`makemigrations --check` needs no database)."""
    # Not at module level: memoryapp.keyring defines a model, which needs the app registry.
    from memoryapp.kek import KekUnavailable
    from memoryapp.keyring import keks_missing  # (the same: a model module)

    try:
        missing = keks_missing()
    except DatabaseError:
        return []
    except KekUnavailable as exc:  # memoryapp.E002: a PKCS#11 module, token or PIN that does not work
        return [
            checks.Error(
                f"The key-encryption keys cannot be used: {exc}",
                hint='docs/encryption.md, "KEK backends"',
                id="memoryapp.E002",
            )
        ]
    if missing is None:
        return []
    return [checks.Error(missing.message(), hint='docs/encryption.md, "The KEK"', id="memoryapp.E001")]


def check_embedder() -> None:
    """SPEC §4.4: a setting that names an embedder whose weights are missing stops the process at
    start-up (web, workers, management commands) instead of failing every remember. Loading the
    configured model here also means the first request does not pay for it."""
    configure_engine(settings.MEMORY_EMBEDDER_THREADS, settings.MEMORY_QUERIES_IN_FLIGHT)
    try:
        require_embedder(settings.MEMORY_EMBEDDER)
    except EmbedderUnavailable as exc:
        raise ImproperlyConfigured(
            f"MEMORY_EMBEDDER={settings.MEMORY_EMBEDDER!r} cannot be loaded: {exc}. "
            "Install the project with `bash scripts/bootstrap.sh` (or `pip install .`), "
            "or set MEMORY_EMBEDDER=hashing to run without a model."
        ) from exc
