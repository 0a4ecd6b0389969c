"""The credit jobs live in `credits.jobs` and run as `credits.tasks.<job>` (issue 35): every beat
entry names a registered task, the four credit entries run the credits app's jobs, and the names
they ran under before (`retention.tasks.<job>`) still run them — queued messages and a beat's
stored schedule keep working across the rename."""

from __future__ import annotations

import pytest
from celery.beat import PersistentScheduler
from django.conf import settings

from config.celery import app
from credits import jobs as credit_jobs
from credits import tasks as credit_tasks
from retention.jobs import CREDIT_JOBS, JOBS

CREDIT_ENTRIES = {
    "settle-usage": "settle_usage",
    "daily-rollup": "daily_rollup",
    "quota-reset": "quota_reset",
    "reconcile-credits": "reconcile_credits",
}

# Loading the default modules runs the worker's start-up check (config.celery), which reads the key store.
pytestmark = pytest.mark.django_db


def test_every_beat_entry_names_a_registered_task():
    app.loader.import_default_modules()
    missing = [entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values() if entry["task"] not in app.tasks]
    assert missing == []


def test_the_web_process_registers_the_credit_tasks_without_the_worker():
    # AppConfig.ready() imported credits.tasks: work queued by name from a web process resolves.
    assert {f"credits.tasks.{job}" for job in CREDIT_ENTRIES.values()} <= set(app.tasks)


@pytest.mark.parametrize(("entry_name", "job"), CREDIT_ENTRIES.items())
def test_a_credit_beat_entry_runs_the_credits_job_under_the_credits_name(entry_name, job, monkeypatch):
    assert JOBS[job] is CREDIT_JOBS[job] is getattr(credit_jobs, job)
    name = settings.CELERY_BEAT_SCHEDULE[entry_name]["task"]
    assert name == f"credits.tasks.{job}"
    ran = []
    monkeypatch.setattr(credit_jobs, job, lambda: ran.append(job) or {"ran": 1})
    assert app.tasks[name].apply().get() == {"ran": 1} and ran == [job]


@pytest.mark.parametrize("job", CREDIT_ENTRIES.values())
def test_the_former_name_still_runs_the_same_job(job, monkeypatch):
    former = f"retention.tasks.{job}"
    assert former in credit_tasks.FORMER_NAMES and former in app.tasks
    ran = []
    monkeypatch.setattr(credit_jobs, job, lambda: ran.append(job) or {"ran": 1})
    assert app.tasks[former].apply().get() == {"ran": 1} and ran == [job]


def test_retention_registers_no_credit_task_of_its_own():
    from retention import tasks as retention_tasks

    assert set(retention_tasks.TASKS) == set(JOBS) - set(CREDIT_JOBS)
    assert {f"retention.tasks.{name}" for name in retention_tasks.TASKS} <= set(app.tasks)


def test_a_schedule_stored_under_the_former_names_runs_the_renamed_tasks(tmp_path, monkeypatch):
    """A beat of the previous release stored its schedule with `retention.tasks.<job>`; the next
    beat starts from that file and runs the names CELERY_BEAT_SCHEDULE gives now."""
    stored = tmp_path / "celerybeat-schedule"
    current = dict(app.conf.beat_schedule)
    former = {
        key: {**entry, "task": entry["task"].replace("credits.tasks.", "retention.tasks.")}
        for key, entry in current.items()
    }
    assert sum(
        e["task"].startswith("retention.tasks.") and e["task"] != current[k]["task"] for k, e in former.items()
    ) == len(CREDIT_ENTRIES)
    monkeypatch.setitem(app.conf, "beat_schedule", former)
    before = PersistentScheduler(app=app, schedule_filename=str(stored))
    assert before.schedule["settle-usage"].task == "retention.tasks.settle_usage"
    before.close()
    monkeypatch.setitem(app.conf, "beat_schedule", current)
    after = PersistentScheduler(app=app, schedule_filename=str(stored))
    try:
        tasks = {key: entry.task for key, entry in after.schedule.items() if key in current}
        assert tasks == {key: entry["task"] for key, entry in current.items()}
        assert all(name in app.tasks for name in tasks.values())
    finally:
        after.close()
