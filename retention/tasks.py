"""Celery tasks: thin wrappers around retention functions. Payloads carry ids only, never text.

The beat entries (`CELERY_BEAT_SCHEDULE`, each with `expires`) name `retention.tasks.<job>`; a
task is registered here for every job of `retention.jobs.JOBS` that is not defined explicitly."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from retention import cascades, lifecycle
from retention.jobs import JOBS

# Retry only transient database errors; a job is idempotent, so a retry never double-erases.
PERIODIC = {"autoretry_for": (OperationalError,), "retry_backoff": True, "max_retries": 3, "acks_late": True}


@shared_task(autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5, acks_late=True)
def erase_unreachable_task(workspace_id: int) -> int:
    return cascades.erase_unreachable(workspace_id)


@shared_task(name="retention.tasks.expiry_sweep", **PERIODIC)
def expiry_sweep() -> dict:
    return lifecycle.expiry_sweep()


@shared_task(name="retention.tasks.cascade_sweep", **PERIODIC)
def cascade_sweep() -> dict:
    return lifecycle.cascade_sweep()


@shared_task(name="retention.tasks.grace_purge", **PERIODIC)
def grace_purge() -> dict:
    return lifecycle.grace_purge()


def _job_task(job_name: str):
    def run() -> dict:
        return JOBS[job_name]()

    run.__name__ = job_name
    return shared_task(name=f"retention.tasks.{job_name}", **PERIODIC)(run)


for _name in list(JOBS):
    if _name not in globals():
        globals()[_name] = _job_task(_name)


# --- consolidation (SPEC §9) ------------------------------------------------------------------
# The payload is the consolidation id: the turn's (clean) messages wait in its database row.
# Not retried: a model failure is an outcome (recorded, not charged), and the run is claimed once.
@shared_task(name="retention.tasks.consolidate_turn", acks_late=True)
def consolidate_turn(consolidation_id: int) -> dict:
    from memoryapp.consolidation import run_consolidation

    return run_consolidation(consolidation_id)
