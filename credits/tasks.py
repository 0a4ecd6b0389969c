"""Celery tasks of the credit accounting (SPEC §9): thin wrappers around `credits.jobs`, run by
beat (`CELERY_BEAT_SCHEDULE` names `credits.tasks.<job>`) and idempotent, so a retry or a second
runner settles nothing twice.

Their former names, `retention.tasks.<job>`, stay registered (`FORMER_NAMES`),
running the same jobs, so that a message queued under one (a worker restarted with a full queue, a
beat of the previous release during a rolling deploy) still runs. A beat's stored schedule
(`celerybeat-schedule`) needs nothing: at start Celery replaces each stored entry's task name with
the one `CELERY_BEAT_SCHEDULE` gives the entry of the same key.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from core.task_queue import PERIODIC_TASK
from credits import jobs


@shared_task(name="credits.tasks.settle_usage", **PERIODIC_TASK)
def settle_usage() -> dict[str, Any]:
    return jobs.settle_usage()


@shared_task(name="credits.tasks.daily_rollup", **PERIODIC_TASK)
def daily_rollup() -> dict[str, Any]:
    return jobs.daily_rollup()


@shared_task(name="credits.tasks.quota_reset", **PERIODIC_TASK)
def quota_reset() -> dict[str, Any]:
    return jobs.quota_reset()


@shared_task(name="credits.tasks.reconcile_credits", **PERIODIC_TASK)
def reconcile_credits() -> dict[str, Any]:
    return jobs.reconcile_credits()


# The earlier names, registered as aliases of the same work (see the module docstring).
@shared_task(name="retention.tasks.settle_usage", **PERIODIC_TASK)
def former_settle_usage() -> dict[str, Any]:
    return jobs.settle_usage()


@shared_task(name="retention.tasks.daily_rollup", **PERIODIC_TASK)
def former_daily_rollup() -> dict[str, Any]:
    return jobs.daily_rollup()


@shared_task(name="retention.tasks.quota_reset", **PERIODIC_TASK)
def former_quota_reset() -> dict[str, Any]:
    return jobs.quota_reset()


@shared_task(name="retention.tasks.reconcile_credits", **PERIODIC_TASK)
def former_reconcile_credits() -> dict[str, Any]:
    return jobs.reconcile_credits()


FORMER_NAMES = (
    "retention.tasks.settle_usage",
    "retention.tasks.daily_rollup",
    "retention.tasks.quota_reset",
    "retention.tasks.reconcile_credits",
)
