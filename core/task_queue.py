"""Celery work is queued by task name (Zulip's `queue_event_on_commit`): the code that causes
work never imports the module that does it, so the domain layers stay below the tasks.

Payloads are ids only, never text. Every task module is registered in every process by its
app's `AppConfig.ready()`, so a name resolves wherever work is queued (and, in eager mode, runs
in place)."""

from __future__ import annotations

from celery import current_app
from django.db import OperationalError, transaction


def queue_task(name: str, *args: int) -> None:
    """Send the task registered as `name` now; a broker failure propagates to the caller."""
    current_app.tasks[name].delay(*args)


def queue_on_commit(name: str, *args: int) -> None:
    """Send the task `name` once the current transaction commits (never for a rolled-back cause)."""
    transaction.on_commit(lambda: queue_task(name, *args))


# The options of every periodic task: retry only transient database errors (a job is idempotent,
# so a retry never does its work twice), and acknowledge once it ran.
PERIODIC_TASK = {"autoretry_for": (OperationalError,), "retry_backoff": True, "max_retries": 3, "acks_late": True}
