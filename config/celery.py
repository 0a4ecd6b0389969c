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
