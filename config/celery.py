import logging.config
import os

from celery import Celery, signals
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("memoryapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.setup_logging.connect
def use_django_logging(**kwargs) -> None:
    """Workers and beat log like the web processes (JSON lines, settings.LOGGING) instead of
    Celery's own format: a receiver here tells Celery not to configure logging itself."""
    logging.config.dictConfig(settings.LOGGING)


@signals.worker_init.connect
@signals.beat_init.connect
def refuse_without_keys(**kwargs) -> None:
    """A worker or beat does not start when stored data keys would not open (a deleted key file,
    an unset MEMORY_KEK): it would read every memory as missing and seal new ones under another
    key. Exit status 1 with the message naming the missing KEK ids (docs/encryption.md "The KEK")."""
    # Not at module level: config.celery is imported before the app registry is ready (models).
    from memoryapp.keyring import require_keks_or_exit

    require_keks_or_exit(status=1)
