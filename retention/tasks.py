"""Celery tasks: thin wrappers around retention functions. Payloads carry ids only, never text."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from retention import cascades


@shared_task(autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5, acks_late=True)
def erase_unreachable_task(workspace_id: int) -> int:
    return cascades.erase_unreachable(workspace_id)
