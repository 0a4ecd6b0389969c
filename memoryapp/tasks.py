"""Celery tasks of the memory app: thin wrappers around `memoryapp.consolidation`. Payloads carry
ids only, never text; the work is queued by name (`core.task_queue`)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from memoryapp.consolidation import CONSOLIDATE_TASK, run_consolidation


# The turn's (clean) messages wait in its database row. Not retried: a model failure is an
# outcome (recorded, not charged), and the run is claimed once.
@shared_task(name=CONSOLIDATE_TASK, acks_late=True)
def consolidate_turn(consolidation_id: int) -> dict[str, Any]:
    return run_consolidation(consolidation_id)
