"""The Django project's wiring: settings, the URLconf, the ASGI/WSGI entry points and the Celery
app. It imports the apps; no app imports it (import-linter's layers contract)."""

# Celery's documented place for the app: loaded with the settings, so @shared_task binds to it
# and `celery -A config` finds it.
from config.celery import app as celery_app

__all__ = ["celery_app"]
