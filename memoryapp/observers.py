"""Reactions that feed the metrics and the task log: Celery's task signals (every task, in the
worker and in eager mode alike) and the deletion receipts as they are written (every erase, by
whatever path: forget, deletes, sweeps, cascades, admin, the forgetting check).
`memoryapp.apps.MemoryAppConfig.ready()` connects them once per process."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from celery import signals as celery_signals
from django.db import transaction
from django.db.models.signals import post_save

from core import logs
from memoryapp import metrics, sealing
from retention.models import DeletionReceipt

_OUTCOMES = {"SUCCESS": "success", "FAILURE": "failure", "RETRY": "retry"}
_running: dict[str, dict[str, Any]] = {}
_running_lock = threading.Lock()


def _task_id(task_id: str | None, task: Any) -> str:
    return str(task_id or getattr(getattr(task, "request", None), "id", "") or "")


def task_started(sender: Any = None, task_id: str | None = None, task: Any = None, **_: Any) -> None:
    key = _task_id(task_id, task)
    token, _fields = logs.begin(request_id=key, task=getattr(task, "name", ""))
    with _running_lock:
        _running[key] = {"started": time.perf_counter(), "token": token, "error_type": None, "outcome": None}


def task_failed(
    sender: Any = None, task_id: str | None = None, exception: BaseException | None = None, **_: Any
) -> None:
    with _running_lock:
        run = _running.get(_task_id(task_id, sender))
    if run is not None:
        run["outcome"] = "failure"
        if exception is not None:
            run["error_type"] = f"{type(exception).__module__}.{type(exception).__qualname__}"


def task_retried(sender: Any = None, request: Any = None, reason: Any = None, **_: Any) -> None:
    with _running_lock:
        run = _running.get(str(getattr(request, "id", "") or ""))
    if run is not None:
        run["outcome"] = "retry"
        if isinstance(reason, BaseException):
            run["error_type"] = f"{type(reason).__module__}.{type(reason).__qualname__}"


def task_ended(
    sender: Any = None, task_id: str | None = None, task: Any = None, state: str | None = None, **_: Any
) -> None:
    key = _task_id(task_id, task)
    with _running_lock:
        run = _running.pop(key, None)
    name = getattr(task, "name", "") or "unknown"
    # task_failure / task_retry said so, or the state does; an eager run that propagates its
    # error reaches here with no state, while the error is still in flight.
    outcome = (run or {}).get("outcome") or _OUTCOMES.get(state or "", "failure")
    in_flight = sys.exc_info()[0]
    if run is not None and run["error_type"] is None and in_flight is not None and outcome != "success":
        run["error_type"] = f"{in_flight.__module__}.{in_flight.__qualname__}"
    seconds = time.perf_counter() - run["started"] if run else None
    metrics.task_finished(name, outcome, seconds, finished_at=time.time())
    logs.task_line(
        task=name,
        task_id=key,
        outcome=outcome,
        seconds=seconds,
        error_type=run["error_type"] if run else None,
        retries=int(getattr(getattr(task, "request", None), "retries", 0) or 0),
    )
    if run:
        logs.end(run["token"])


def receipt_saved(
    sender: type[DeletionReceipt], instance: DeletionReceipt, created: bool, update_fields: Any = None, **_: Any
) -> None:
    """Count a receipt once its transaction commits (a rolled-back erase wrote none); a
    re-verification that finds something left counts as a failed check of its own."""
    clean = bool((instance.verification or {}).get("clean", False))
    operation = str(instance.operation)
    if created:
        versions = int(instance.versions_erased or 0)
        transaction.on_commit(lambda: metrics.receipt_written(operation, versions, clean=clean))
    elif update_fields and "verification" in update_fields and not clean:
        transaction.on_commit(lambda: metrics.verification_failed("reverify", operation))


def content_unreadable(sender: Any = None, reason: str = "", count: int = 0, **_: Any) -> None:
    metrics.content_unreadable(sender._meta.label if sender is not None else "", reason, count)


def connect() -> None:
    sealing.content_unreadable.connect(
        content_unreadable, weak=False, dispatch_uid="memoryapp.observers.content_unreadable"
    )
    celery_signals.task_prerun.connect(task_started, weak=False, dispatch_uid="memoryapp.observers.task_started")
    celery_signals.task_failure.connect(task_failed, weak=False, dispatch_uid="memoryapp.observers.task_failed")
    celery_signals.task_retry.connect(task_retried, weak=False, dispatch_uid="memoryapp.observers.task_retried")
    celery_signals.task_postrun.connect(task_ended, weak=False, dispatch_uid="memoryapp.observers.task_ended")
    post_save.connect(
        receipt_saved, sender=DeletionReceipt, weak=False, dispatch_uid="memoryapp.observers.receipt_saved"
    )
