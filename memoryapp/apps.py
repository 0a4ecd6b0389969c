from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.backends.signals import connection_created

from core import private_files
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
        check_embedder()


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
