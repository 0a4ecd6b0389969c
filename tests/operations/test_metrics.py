"""Prometheus metrics (SPEC §11): `/metrics` behind METRICS_TOKEN, the request, agent, masking,
recall, erasure, receipt and task metrics after real traffic, multiprocess aggregation, the
scrape-time broker depth and erase backlog — and no label that carries content."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from config.celery import app as celery_app
from governance import actions as governance
from memoryapp import metrics
from memoryapp.models import MemoryVersion
from memoryapp.recall.embedders import get_embedder
from retention.erasure import erase_memories
from tests.support import client_for, error_code, make_agent

pytestmark = pytest.mark.django_db

TOKEN = "metrics-token-for-tests-0123456789"
MARKER = "zqmetricsmarker"
PII_EMAIL = "jane.metricsleak@example.org"
ROOT = Path(__file__).resolve().parents[2]

# Every label name any metric may carry: none of them names content, a namespace, a key, a
# credential or a member.
# model and reason: gam_sealed_content_unreadable_total (a model label, missing_key | bad_key | corrupt)
ALLOWED_LABELS = {
    "route",
    "method",
    "status",
    "code",
    "operation",
    "transport",
    "kind",
    "ranking",
    "embedder",
    "outcome",
    "task",
    "check",
    "queue",
    "le",
    "model",
    "reason",
}


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def scrape(client, token: str = TOKEN):
    return client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_TOKEN = TOKEN
    return TOKEN


def test_metrics_are_off_without_a_token(client, settings):
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404
    assert scrape(client, "anything").status_code == 404


def test_metrics_refuse_a_missing_or_wrong_token(client, metrics_on):
    missing = client.get("/metrics")
    assert missing.status_code == 401 and missing["WWW-Authenticate"].startswith("Bearer")
    assert scrape(client, TOKEN + "x").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Token {TOKEN}").status_code == 401
    ok = scrape(client)
    assert ok.status_code == 200 and ok["Content-Type"].startswith("text/plain")


def test_traffic_shows_in_the_histograms_and_counters_and_no_label_holds_content(
    world, client, metrics_on, django_capture_on_commit_callbacks
):
    agent = make_agent(world.editor)
    before = {
        "remember": sample("gam_http_request_duration_seconds_count", route="agent-remember", method="POST"),
        "created": sample("gam_agent_operations_total", operation="remember", transport="rest", code="OK"),
        "disabled": sample(
            "gam_agent_operations_total", operation="recall", transport="rest", code="AGENT_MEMORY_DISABLED"
        ),
        "validation": sample(
            "gam_http_responses_total", route="agent-remember", method="POST", status="400", code="VALIDATION_ERROR"
        ),
        "email": sample("gam_masking_detections_total", kind="EMAIL"),
        "recalls": sample("gam_recalls_total"),
        # ok or over_budget: a loaded machine may miss the 800 ms budget; the histogram records both.
        "embedding": sum(
            sample("gam_recall_query_embedding_seconds_count", embedder=settings_embedder(), outcome=o)
            for o in ("ok", "over_budget")
        ),
        "receipts": sample("gam_deletion_receipts_total", operation="forget"),
        "erased": sample("gam_erased_memory_versions_total", operation="forget"),
        "page": sample("gam_http_request_duration_seconds_count", route="pages:agent-memories", method="GET"),
    }
    created = agent.remember(
        namespace=f"ns-{MARKER}", key=f"key_{MARKER}", text=f"{MARKER} likes Tuesday reports; write to {PII_EMAIL}"
    )
    assert created.status_code == 201, created.content
    assert agent.recall(query=f"{MARKER} Tuesday {PII_EMAIL}").status_code == 200
    assert agent.list(namespace=f"ns-{MARKER}").status_code == 200
    assert (
        error_code(agent.remember(namespace=f"ns-{MARKER}", text=MARKER, source=f"bogus-{MARKER}"))
        == "VALIDATION_ERROR"
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert agent.forget(namespace=f"ns-{MARKER}", key=f"key_{MARKER}").status_code == 200
    page_client = client_for(world.editor)
    page_client.force_login(world.editor.user)
    assert (
        page_client.get(f"/w/{world.workspace.pk}/what-bundata-remembers/", {"namespace": f"ns-{MARKER}"}).status_code
        == 200
    )
    assert page_client.get(f"/w/{world.workspace.pk}/{MARKER}/").status_code == 404
    governance.set_remember_me(world.editor, False)
    assert error_code(agent.recall(query=MARKER)) == "AGENT_MEMORY_DISABLED"

    assert (
        sample("gam_http_request_duration_seconds_count", route="agent-remember", method="POST")
        == before["remember"] + 2
    )
    assert (
        sample("gam_agent_operations_total", operation="remember", transport="rest", code="OK") == before["created"] + 1
    )
    assert (
        sample("gam_agent_operations_total", operation="recall", transport="rest", code="AGENT_MEMORY_DISABLED")
        == before["disabled"] + 1
    )
    assert (
        sample("gam_http_responses_total", route="agent-remember", method="POST", status="400", code="VALIDATION_ERROR")
        == before["validation"] + 1
    )
    assert sample("gam_masking_detections_total", kind="EMAIL") == before["email"] + 1
    assert sample("gam_recalls_total") == before["recalls"] + 1
    assert (
        sum(
            sample("gam_recall_query_embedding_seconds_count", embedder=settings_embedder(), outcome=o)
            for o in ("ok", "over_budget")
        )
        == before["embedding"] + 1
    )
    assert sample("gam_deletion_receipts_total", operation="forget") == before["receipts"] + 1
    assert sample("gam_erased_memory_versions_total", operation="forget") == before["erased"] + 1
    assert (
        sample("gam_http_request_duration_seconds_count", route="pages:agent-memories", method="GET")
        == before["page"] + 1
    )
    assert sample("gam_http_responses_total", route="unmatched", method="GET", status="404", code="HTTP_404") >= 1

    response = scrape(client)
    exposition = response.content.decode()
    for needle in (
        MARKER,
        PII_EMAIL,
        "jane",
        "metricsleak",
        "editor@acme.test",
        "test agent",
        world.workspace.name,
        "Tuesday",
    ):
        assert needle not in exposition, needle
    assert 'gam_http_request_duration_seconds_bucket{le="0.005",method="POST",route="agent-remember"}' in exposition
    families = {family.name: family for family in text_string_to_metric_families(exposition)}
    for family in families.values():
        if not family.name.startswith("gam_"):
            continue  # the client library's own process and runtime metrics
        for s in family.samples:
            assert set(s.labels) <= ALLOWED_LABELS, (family.name, s.labels)
            for value in s.labels.values():
                assert re.fullmatch(r"[A-Za-z0-9_.:@<>/+-]{1,120}", value), (family.name, s.labels)
    for name in (
        "gam_http_request_duration_seconds",
        "gam_http_responses",
        "gam_agent_operation_duration_seconds",
        "gam_agent_operations",
        "gam_masking_detections",
        "gam_recalls",
        "gam_recall_query_embedding_seconds",
        "gam_deletion_receipts",
        "gam_erased_memory_versions",
        "gam_broker_up",
        "gam_broker_queue_depth",
        "gam_erase_backlog_versions",
        "gam_erase_backlog_oldest_seconds",
    ):
        assert name in families, name


def settings_embedder() -> str:
    return get_embedder(django_settings.MEMORY_EMBEDDER).id


def test_a_label_value_outside_the_vocabulary_becomes_other():
    assert metrics.bounded("AGENT_MEMORY_FULL") == "AGENT_MEMORY_FULL"
    assert metrics.bounded("pages:usage") == "pages:usage"
    assert metrics.bounded("api/w/<id:ws_id>/usage") == "api/w/<id:ws_id>/usage"
    for hostile in ("jane doe@example.org", "x" * 200, "line\nbreak", "長野フーズ", "", None):
        assert metrics.bounded(hostile) == "other"


def test_a_receipt_whose_verification_finds_something_left_counts_as_a_failure(
    world, monkeypatch, django_capture_on_commit_callbacks
):
    agent = make_agent(world.editor)
    assert agent.remember(namespace="crm", key="tier", text="Enterprise tier").status_code == 201
    monkeypatch.setattr(
        "retention.erasure.verify",
        lambda ids, key_ids=(): {
            "checkedAt": timezone.now().isoformat(),
            "remaining": {"memory_version": 1},
            "clean": False,
        },
    )
    failures = sample("gam_verification_failures_total", check="receipt", operation="forget")
    with django_capture_on_commit_callbacks(execute=True):
        assert agent.forget(namespace="crm", key="tier").status_code == 200
    assert sample("gam_verification_failures_total", check="receipt", operation="forget") == failures + 1


def test_a_rolled_back_erase_counts_no_receipt(world, django_capture_on_commit_callbacks):
    agent = make_agent(world.editor)
    assert agent.remember(namespace="crm", key="tier", text="Enterprise tier").status_code == 201
    ids = list(MemoryVersion.objects.filter(member=world.editor).values_list("pk", flat=True))
    receipts = sample("gam_deletion_receipts_total", operation="admin_erase")
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError), transaction.atomic():
        erase_memories(ids, operation="admin_erase", workspace_id=world.workspace.pk, actor_label="test")
        raise RuntimeError("roll back")
    assert sample("gam_deletion_receipts_total", operation="admin_erase") == receipts
    assert MemoryVersion.objects.filter(pk__in=ids).count() == len(ids)


def test_celery_tasks_report_duration_success_and_failure(world, monkeypatch):
    runs = sample("gam_celery_tasks_total", task="retention.tasks.expiry_sweep", outcome="success")
    timed = sample("gam_celery_task_duration_seconds_count", task="retention.tasks.expiry_sweep")
    celery_app.tasks["retention.tasks.expiry_sweep"].delay()
    assert sample("gam_celery_tasks_total", task="retention.tasks.expiry_sweep", outcome="success") == runs + 1
    assert sample("gam_celery_task_duration_seconds_count", task="retention.tasks.expiry_sweep") == timed + 1
    assert sample("gam_celery_task_last_success_timestamp_seconds", task="retention.tasks.expiry_sweep") > 0

    def boom(*args, **kwargs):
        raise ValueError("a failure that names no content")

    monkeypatch.setattr("retention.cascades.erase_unreachable", boom)
    failures = sample("gam_celery_tasks_total", task="retention.tasks.erase_unreachable_task", outcome="failure")
    with pytest.raises(ValueError):
        celery_app.tasks["retention.tasks.erase_unreachable_task"].delay(world.workspace.pk)
    assert (
        sample("gam_celery_tasks_total", task="retention.tasks.erase_unreachable_task", outcome="failure")
        == failures + 1
    )


def test_the_erase_backlog_is_read_at_scrape_time(world, client, metrics_on):
    agent = make_agent(world.editor)
    assert agent.remember(namespace="crm", key="tier", text="Enterprise tier").status_code == 201
    MemoryVersion.objects.filter(member=world.editor).update(
        unreachable_at=timezone.now() - timezone.timedelta(minutes=10), unreachable_reason="cascade_document"
    )
    families = {f.name: f for f in text_string_to_metric_families(scrape(client).content.decode())}
    assert families["gam_erase_backlog_versions"].samples[0].value == 1
    assert 590 <= families["gam_erase_backlog_oldest_seconds"].samples[0].value <= 3600


@pytest.mark.filterwarnings("ignore::celery.exceptions.AlwaysEagerIgnored")
def test_the_broker_queue_depth_is_read_at_scrape_time(client, metrics_on, db):
    def depth() -> float:
        families = {f.name: f for f in text_string_to_metric_families(scrape(client).content.decode())}
        assert families["gam_broker_up"].samples[0].value == 1
        return {s.labels["queue"]: s.value for s in families["gam_broker_queue_depth"].samples}["celery"]

    celery_app.control.purge()
    try:
        start = depth()
        # send_task publishes whatever task_always_eager says: a real message on the test broker.
        celery_app.send_task("credits.tasks.quota_reset")
        celery_app.send_task("credits.tasks.quota_reset")
        assert depth() == start + 2
    finally:
        celery_app.control.purge()


CHILD = """
import os, sys, django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()
from memoryapp import metrics
for _ in range(int(sys.argv[1])):
    metrics.observe_request("agent-recall", "POST", 200, "OK", 0.02)
metrics.task_finished("retention.tasks.expiry_sweep", "success", 0.5, finished_at=float(sys.argv[2]))
"""


def test_several_processes_add_up_in_multiprocess_mode(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("DATABASE_URL", None)  # the children touch no database
    for count, finished in ((3, 1000.0), (4, 2000.0)):
        subprocess.run(
            [sys.executable, "-c", CHILD, str(count), str(finished)], env=env, cwd=ROOT, check=True, timeout=120
        )
    assert len(list(tmp_path.glob("*.db"))) >= 2  # one file per process and kind
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(tmp_path))
    assert (
        registry.get_sample_value(
            "gam_http_request_duration_seconds_count", {"route": "agent-recall", "method": "POST"}
        )
        == 7
    )
    assert (
        registry.get_sample_value(
            "gam_http_responses_total", {"route": "agent-recall", "method": "POST", "status": "200", "code": "OK"}
        )
        == 7
    )
    assert (
        registry.get_sample_value(
            "gam_celery_task_last_success_timestamp_seconds", {"task": "retention.tasks.expiry_sweep"}
        )
        == 2000.0
    )


SCRAPER = """
import os, django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()
from memoryapp import metrics
metrics.observe_request("pages:usage", "GET", 200, "OK", 0.01)
print(metrics.exposition().decode())
"""


def test_a_scrape_in_multiprocess_mode_reads_every_process(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", CHILD, "2", "5.0"], env=env, cwd=ROOT, check=True, timeout=120)
    out = subprocess.run(
        [sys.executable, "-c", SCRAPER], env=env, cwd=ROOT, check=True, timeout=120, capture_output=True, text=True
    ).stdout
    families = {f.name: f for f in text_string_to_metric_families(out)}
    counts = {
        tuple(sorted(s.labels.items())): s.value
        for s in families["gam_http_request_duration_seconds"].samples
        if s.name.endswith("_count")
    }
    assert counts[(("method", "POST"), ("route", "agent-recall"))] == 2
    assert counts[(("method", "GET"), ("route", "pages:usage"))] == 1
