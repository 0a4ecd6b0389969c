"""The credit jobs moved to `credits.jobs` (issue 23 step 4) and kept their Celery names: every beat
entry names a registered task, and the four credit entries run the credits app's jobs."""

from __future__ import annotations

import pytest
from django.conf import settings

from config.celery import app
from credits import jobs as credit_jobs
from retention.jobs import JOBS

CREDIT_ENTRIES = {"settle-usage": "settle_usage", "daily-rollup": "daily_rollup", "quota-reset": "quota_reset", "reconcile-credits": "reconcile_credits"}

# Loading the default modules runs the worker's start-up check (config.celery), which reads the key store.
pytestmark = pytest.mark.django_db


def test_every_beat_entry_names_a_registered_task():
    app.loader.import_default_modules()
    missing = [entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values() if entry["task"] not in app.tasks]
    assert missing == []


@pytest.mark.parametrize(("entry_name", "job"), CREDIT_ENTRIES.items())
def test_a_credit_beat_entry_runs_the_credits_job(entry_name, job, monkeypatch):
    app.loader.import_default_modules()
    assert JOBS[job] is getattr(credit_jobs, job)
    ran = []
    monkeypatch.setitem(JOBS, job, lambda: ran.append(job) or {"ran": 1})
    task = app.tasks[settings.CELERY_BEAT_SCHEDULE[entry_name]["task"]]
    assert task.apply().get() == {"ran": 1} and ran == [job]
