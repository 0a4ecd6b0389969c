"""Celery tasks: thin wrappers around retention functions. Payloads carry ids only, never text.

The beat entries (`CELERY_BEAT_SCHEDULE`, each with `expires`) name `retention.tasks.<job>`: a
task is registered here (`TASKS`) for every job of `retention.jobs.JOBS` but the credit
accounting's, which `credits.tasks` registers. Work caused by an action (the cascade erase) is
queued by name (`core.task_queue`), so nothing below imports this module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import shared_task
from django.db import OperationalError

from core.task_queue import PERIODIC_TASK
from retention import cascades
from retention.jobs import CREDIT_JOBS, JOBS


@shared_task(
    name=cascades.ERASE_TASK, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5, acks_late=True
)
def erase_unreachable_task(workspace_id: int) -> int:
    return cascades.erase_unreachable(workspace_id)


def _job_task(job_name: str) -> Callable[[], dict[str, Any]]:
    def run() -> dict[str, Any]:
        return JOBS[job_name]()

    run.__name__ = job_name
    return shared_task(name=f"retention.tasks.{job_name}", **PERIODIC_TASK)(run)


TASKS = {name: _job_task(name) for name in JOBS if name not in CREDIT_JOBS}
