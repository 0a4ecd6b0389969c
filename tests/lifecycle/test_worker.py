"""Integration: a real Celery worker and beat process erase a cascade — once from the task started
on commit, once from the beat-driven cascade sweep (a task the broker never got) — and settle
usage under the credits task's name (`credits.tasks.settle_usage`, renamed from `retention.tasks`).
On the PostgreSQL + Redis suite the broker is Redis; on the SQLite suite it is the SQLite-backed
broker the README's run command uses."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from config.celery import app as celery_app
from governance import actions as governance
from memoryapp.models import MemoryVersion
from retention import cascades
from retention.models import DeletionReceipt, Operation
from tests.processes import BASE_DIR as ROOT
from tests.processes import stop, test_database_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CELERY = str(Path(sys.executable).with_name("celery"))
FAST_BEAT = """
from datetime import timedelta
from config.celery import app
app.conf.beat_schedule = {
    "cascade-sweep": {
        "task": "retention.tasks.cascade_sweep",
        "schedule": timedelta(seconds=2),
        "options": {"expires": 10},
    },
    "settle-usage": {
        "task": "credits.tasks.settle_usage",
        "schedule": timedelta(seconds=2),
        "options": {"expires": 10},
    },
}
"""


def wait_until(condition, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.3)
    return False


def start_worker(tmp_path, *pool_args: str, extra_env: dict[str, str] | None = None) -> tuple[subprocess.Popen, object]:
    env = {
        **os.environ,
        **test_database_env(),
        "VAR_DIR": str(tmp_path),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,  # the broker this test process sends to
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        **(extra_env or {}),
    }
    log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 -- closed by the caller
    command = [CELERY, "-A", "config", "worker", *pool_args, "--without-mingle", "--without-gossip", "-l", "INFO"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log


@pytest.fixture
def worker_and_beat(tmp_path):
    (tmp_path / "fastbeat.py").write_text(FAST_BEAT)
    env = {
        **os.environ,
        **test_database_env(),
        "VAR_DIR": str(tmp_path),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,  # the broker this test process sends to
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    # closed in the finally below
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("worker", "beat")}  # noqa: SIM115
    processes = [
        subprocess.Popen(
            [CELERY, "-A", "config", "worker", "--pool=solo", "--without-mingle", "--without-gossip", "-l", "INFO"],
            cwd=ROOT,
            env=env,
            stdout=logs["worker"],
            stderr=subprocess.STDOUT,
        ),
        subprocess.Popen(
            [CELERY, "-A", "fastbeat", "beat", "-s", str(tmp_path / "schedule"), "-l", "INFO"],
            cwd=ROOT,
            env=env,
            stdout=logs["beat"],
            stderr=subprocess.STDOUT,
        ),
    ]
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False  # send to the real broker
    try:
        yield tmp_path
    finally:
        celery_app.conf.task_always_eager = eager
        stop(processes)
        for log in logs.values():
            log.close()


def test_a_real_worker_and_beat_erase_cascades(world, agent, worker_and_beat):
    assert settings.CELERY_BROKER_URL.startswith("redis" if settings.REDIS_URL else "sqla+sqlite")
    collection = governance.create_collection(world.workspace, name="Handbook")
    document = governance.create_document(collection, title="Deploys", text="Deploys happen on Tuesdays.")
    response = agent.remember(
        namespace="ops", text="Deploys are on Tuesdays.", citations=[str(document.passages.first().pk)]
    )
    assert response.status_code == 201
    cited = int(response.json()["memory"]["id"])

    governance.delete_document(document, actor=world.owner.user)  # commits; on_commit sends the task
    erased = wait_until(lambda: not MemoryVersion.objects.filter(pk=cited).exists())
    assert erased, (worker_and_beat / "worker.log").read_text()[-3000:]
    assert DeletionReceipt.objects.filter(operation=Operation.CASCADE_DOCUMENT, memory_version_ids=[cited]).exists()

    response = agent.remember(namespace="ops", text="A note whose erase task was lost.")
    lost = int(response.json()["memory"]["id"])
    cascades.mark_unreachable(MemoryVersion.objects.filter(pk=lost), Operation.MEMBER_REMOVAL)  # marked, never enqueued
    erased = wait_until(lambda: not MemoryVersion.objects.filter(pk=lost).exists())
    assert erased, (worker_and_beat / "beat.log").read_text()[-3000:]
    assert "retention.tasks.cascade_sweep" in (worker_and_beat / "beat.log").read_text()
    assert DeletionReceipt.objects.filter(
        operation=Operation.MEMBER_REMOVAL, actor_label="system: cascade sweep"
    ).exists()


def test_the_beat_runs_the_credit_jobs_under_their_credits_names(world, worker_and_beat):
    from decimal import Decimal

    from credits.models import LedgerEntry, UsageRecord, UsageStatus

    usage = UsageRecord.objects.create(
        workspace=world.workspace,
        member=world.editor,
        role=world.editor.role,
        category="ai_memory",
        model_name="m",
        input_tokens=1000,
        output_tokens=100,
        input_cost=Decimal("1"),
        output_cost=Decimal("0.25"),
    )
    settled = wait_until(lambda: UsageRecord.objects.get(pk=usage.pk).status == UsageStatus.SETTLED)
    assert settled, (worker_and_beat / "worker.log").read_text()[-3000:]
    assert LedgerEntry.objects.get(usage_record=usage).amount == Decimal("-1.25")
    assert "credits.tasks.settle_usage" in (worker_and_beat / "beat.log").read_text()
    assert "Task credits.tasks.settle_usage[" in (worker_and_beat / "worker.log").read_text()


def test_a_prefork_worker_embeds_with_a_two_thread_engine(world, tmp_path):
    """The production worker command (prefork pool): the master loads and warms the e5 model on
    two OpenMP threads, then forks; a child consolidating a turn embeds the memories it stores.
    A master thread that had run the engine itself would leave the child hanging (libgomp is not
    fork-safe)."""
    from memoryapp.models import ASSISTANT_NAMESPACE, MemoryEmbedding
    from memoryapp.recall.embedders import E5Embedder
    from tests.credits.support import ai_agent, grant, post_turn, user_says
    from tests.support import make_agent

    grant(world.workspace, "100")
    agent, client = ai_agent(world), make_agent(world.editor)
    worker, log = start_worker(
        tmp_path,
        "--pool=prefork",
        "--concurrency=2",
        extra_env={"MEMORY_EMBEDDER": "e5", "MEMORY_EMBEDDER_THREADS": "2"},
    )
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False  # send to the real broker
    try:
        response = post_turn(client, agent, user_says("Please answer in Japanese from now on."))
        assert response.status_code == 202, response.json()

        def embedded():
            return MemoryEmbedding.objects.filter(
                memory__member=world.editor, memory__namespace=ASSISTANT_NAMESPACE, embedder_id=E5Embedder.id
            ).exists()

        assert wait_until(embedded, timeout=90), (tmp_path / "worker.log").read_text()[-3000:]
        assert "concurrency: 2 (prefork)" in (tmp_path / "worker.log").read_text()  # the task ran in a forked child
    finally:
        celery_app.conf.task_always_eager = eager
        stop([worker])
        log.close()
