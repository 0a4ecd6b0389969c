"""Celery tasks of governance: thin wrappers, ids only. Queued by name (`core.task_queue`)."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from governance import linking


@shared_task(
    name=linking.LINK_TASK, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5, acks_late=True
)
def link_workspace(workspace_id: int) -> None:
    linking.link_workspace(workspace_id)
