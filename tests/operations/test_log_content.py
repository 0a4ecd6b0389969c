"""Structured logs (SPEC §11, §4.1): one JSON line per request and per task, with ids and codes —
and never memory text, queries, details, message bodies or unmasked values, in ANY log record or
Celery message.

The content test remembers and recalls a marker and a personal-data value over REST and MCP, adds
an assistant memory with details, runs a real consolidation turn and a cascade through the
broker (eager mode off: the messages are published, read back raw and run), hits error paths
(a 400 that echoes the bad value, a body that is not JSON, a 500 whose exception quotes the
marker), then formats every record every logger emitted at DEBUG and greps them all."""

from __future__ import annotations

import json
import logging
import re

import pytest
from celery.signals import before_task_publish
from kombu.simple import SimpleQueue
from rest_framework.test import APIClient

from config.celery import app as celery_app
from core import logs
from credits.models import Consolidation
from governance import actions as governance
from memoryapp.mcp.tools import run_operation
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion
from tests.credits.support import ai_agent, grant, post_turn, user_says
from tests.support import client_for, make_agent

pytestmark = pytest.mark.django_db

MARKER = "zqlogcanarymarker"
PII = "ada.logleak@example.net"
NEEDLES = (MARKER, PII, "logleak")

FORMATTER = logs.JsonFormatter(
    "%(levelname)s %(name)s %(message)s", rename_fields={"levelname": "level", "name": "logger"}, timestamp=True
)


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: dict[int, logging.LogRecord] = {}

    def emit(self, record: logging.LogRecord) -> None:
        self.records[id(record)] = record

    def lines(self) -> list[str]:
        return [FORMATTER.format(record) + "\n" + record.getMessage() for record in self.records.values()]

    def of(self, name: str) -> list[dict]:
        return [json.loads(FORMATTER.format(r)) for r in self.records.values() if r.name == name]


@pytest.fixture
def every_record():
    """Every logger, the root and those that do not propagate, at DEBUG, into one handler."""
    handler = Capture()
    loggers = [logging.getLogger()] + [
        lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    saved = [(lg, lg.level, lg.disabled) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
        lg.disabled = False
        lg.addHandler(handler)
    yield handler
    for lg, level, disabled in saved:
        lg.setLevel(level)
        lg.disabled = disabled
        lg.removeHandler(handler)


@pytest.fixture
def broker():
    """Eager mode off: tasks are really published to the test broker; `drain()` reads each message
    back raw, keeps its bytes, and runs it here."""
    published: list[dict] = []
    raw: list[bytes] = []

    def on_publish(sender=None, body=None, headers=None, **kwargs):
        published.append({"task": sender, "body": body, "headers": headers})

    def drain() -> int:
        ran = 0
        with celery_app.connection_for_read() as connection:
            queue = SimpleQueue(connection, "celery")
            while True:
                try:
                    message = queue.get(block=True, timeout=1)
                except queue.Empty:
                    break
                raw.append(message.body if isinstance(message.body, bytes) else str(message.body).encode())
                raw.append(json.dumps(message.headers, default=str).encode())
                args, kwargs, _embed = message.decode()
                message.ack()
                celery_app.tasks[message.headers["task"]].apply(args=args, kwargs=kwargs)
                ran += 1
            queue.close()
        return ran

    before_task_publish.connect(on_publish, weak=False)
    celery_app.control.purge()
    celery_app.conf.task_always_eager = False
    try:
        yield published, raw, drain
    finally:
        celery_app.conf.task_always_eager = True
        before_task_publish.disconnect(on_publish)
        celery_app.control.purge()


def _post(client: APIClient, path: str, body, token: str, *, raw: bytes | None = None):
    data = raw if raw is not None else json.dumps(body)
    return client.generic("POST", path, data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def test_no_log_record_and_no_celery_message_holds_memory_content(
    world, every_record, broker, monkeypatch, django_capture_on_commit_callbacks
):
    published, raw, drain = broker
    capture = django_capture_on_commit_callbacks
    agent = make_agent(world.editor)
    collection = governance.create_collection(world.workspace, name="Handbook")
    document = governance.create_document(collection, title="Reports", text="Reports go out on Tuesdays.")
    passage = document.passages.first()

    with capture(execute=True):
        remembered = agent.remember(
            namespace=f"ns_{MARKER}",
            key=f"key_{MARKER}",
            text=f"{MARKER} wants the Tuesday report; write to {PII}",
            citations=[str(passage.pk)],
        )
    assert remembered.status_code == 201, remembered.content
    assert "[EMAIL]" in remembered.json()["memory"]["text"]
    assert agent.recall(query=f"what does {MARKER} want? {PII}").json()["memories"]
    assert agent.list(namespace=f"ns_{MARKER}").status_code == 200
    mcp = run_operation(agent.token, "recall", {"query": f"{MARKER} {PII}"})
    assert not mcp.is_error

    member = client_for(world.editor)
    member.force_login(world.editor.user)
    added = member.post(
        f"/api/w/{world.workspace.pk}/ai-memory/memories",
        {
            "kind": "fact",
            "topic": f"topic_{MARKER}",
            "summary": f"{MARKER} summary {PII}",
            "details": [f"{MARKER} detail {PII}"],
        },
        format="json",
    )
    assert added.status_code == 201, added.content
    assert (
        member.get(f"/api/w/{world.workspace.pk}/ask-history/agent-memories", {"namespace": f"ns_{MARKER}"}).status_code
        == 200
    )
    assert (
        member.get(f"/w/{world.workspace.pk}/what-bundata-remembers/", {"namespace": f"ns_{MARKER}"}).status_code == 200
    )
    assert MARKER in member.get(f"/w/{world.workspace.pk}/ai-memory/").content.decode()

    # consolidation: one turn is sent to the model through a real broker message, one is refused
    grant(world.workspace)
    helper = ai_agent(world)
    queued = post_turn(agent, helper, user_says(f"Remember that {MARKER} reports go out on Tuesdays."), capture=capture)
    assert queued.status_code == 202, queued.content
    refused = post_turn(
        agent, helper, user_says(f"Write to {PII} about {MARKER}."), conversation_id="conv-2", capture=capture
    )
    assert refused.json()["consolidation"]["reason"] == "personal_data"

    # error paths: a 400 that echoes the bad value back, a body that is no JSON, a 500
    echoed = agent.remember(namespace=f"ns_{MARKER}", text=f"{MARKER} {PII}", source=f"bogus_{MARKER}")
    assert echoed.status_code == 400 and MARKER in echoed.content.decode()  # the response may echo; the logs must not
    assert (
        _post(
            agent.client,
            "/api/agent/v1/memories/remember",
            None,
            agent.token,
            raw=f'{{"text": "{MARKER} {PII}"'.encode(),
        ).status_code
        == 400
    )

    def explode(admission):
        raise RuntimeError(f"storage said: {MARKER} {PII}")

    monkeypatch.setattr("memoryapp.actions.memory_page", explode)
    unsafe = APIClient(raise_request_exception=False)
    assert _post(unsafe, "/api/agent/v1/memories/list", {"namespace": f"ns_{MARKER}"}, agent.token).status_code == 500
    monkeypatch.undo()

    # a cascade: deleting the cited document queues the erase task (by id)
    with capture(execute=True):
        assert member.delete(f"/api/w/{world.workspace.pk}/documents/{document.pk}").status_code in (200, 204)
    with capture(execute=True):
        assert agent.remember(namespace=f"ns_{MARKER}", key=f"key_{MARKER}", text=f"{MARKER} again").status_code == 201
        assert agent.forget(namespace=f"ns_{MARKER}", key=f"key_{MARKER}").status_code == 200

    assert drain() >= 2  # the consolidation and the cascade erase really ran from their messages
    consolidation = Consolidation.objects.get(conversation_id="conv-1")
    assert consolidation.status == "done", consolidation.status
    assert any(
        MARKER in v.text for v in MemoryVersion.objects.filter(member=world.editor, namespace=ASSISTANT_NAMESPACE)
    )  # sealed: opened to be searched
    assert {p["task"] for p in published} >= {
        "memoryapp.tasks.consolidate_turn",
        "retention.tasks.erase_unreachable_task",
    }

    for entry in published:
        wire = json.dumps(entry, default=str)
        for needle in NEEDLES:
            assert needle not in wire, (needle, entry["task"])
    for message in raw:
        for needle in NEEDLES:
            assert needle.encode() not in message, needle

    lines = every_record.lines()
    assert len(lines) > 20
    for line in lines:
        for needle in NEEDLES:
            assert needle not in line, (needle, line)

    requests = every_record.of("memoryapp.request")
    routes = {line["route"] for line in requests}
    assert {
        "agent-remember",
        "agent-recall",
        "agent-list",
        "mcp:recall",
        "pages:agent-memories",
        "agent-conversation-turns",
    } <= routes
    assert {"VALIDATION_ERROR", "OK", "INTERNAL_ERROR"} <= {
        line["code"] for line in requests
    }  # an API 500 is JSON with its code (error_pages.server_error)
    agent_lines = [line for line in requests if line["route"] == "agent-remember"]
    assert all(line["credential_id"] and line["workspace_id"] == world.workspace.pk for line in agent_lines)
    assert all(re.fullmatch(r"[0-9a-f]{32}", line["request_id"]) for line in requests if line["route"] != "mcp:recall")
    tasks = {(line["task"], line["outcome"]) for line in every_record.of("memoryapp.task")}
    assert {
        ("memoryapp.tasks.consolidate_turn", "success"),
        ("retention.tasks.erase_unreachable_task", "success"),
    } <= tasks
    crash = [r for r in every_record.records.values() if r.name == "django.request" and r.levelno >= logging.ERROR]
    assert crash and "RuntimeError" in FORMATTER.format(crash[0])  # the type and frames stay, the message goes


def test_a_sane_request_id_is_kept_and_echoed_and_anything_else_replaced(world, every_record):
    agent = make_agent(world.editor)
    kept = agent.client.generic(
        "POST",
        "/api/agent/v1/memories/list",
        "{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {agent.token}",
        HTTP_X_REQUEST_ID="lb-7f3a9c21-0001",
    )
    assert kept["X-Request-ID"] == "lb-7f3a9c21-0001"
    for hostile in (f"{MARKER} {PII}", "x" * 300, "short", "<script>"):
        replaced = agent.client.generic(
            "POST",
            "/api/agent/v1/memories/list",
            "{}",
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {agent.token}",
            HTTP_X_REQUEST_ID=hostile,
        )
        assert re.fullmatch(r"[0-9a-f]{32}", replaced["X-Request-ID"])
    ids = [line["request_id"] for line in every_record.of("memoryapp.request")]
    assert "lb-7f3a9c21-0001" in ids and not any(MARKER in i for i in ids)


def test_a_request_line_has_the_fields_operators_filter_on(world, every_record):
    agent = make_agent(world.editor)
    governance.set_remember_me(world.editor, False)
    refused = agent.recall(query="anything")
    assert refused.status_code == 403
    [line] = [line for line in every_record.of("memoryapp.request") if line["route"] == "agent-recall"]
    assert (
        line["status"] == 403
        and line["code"] == "AGENT_MEMORY_DISABLED"
        and line["method"] == "POST"
        and line["transport"] == "http"
    )
    assert (
        line["workspace_id"] == world.workspace.pk
        and isinstance(line["credential_id"], int)
        and line["duration_ms"] >= 0
    )
    assert (
        line["request_id"] == refused["X-Request-ID"]
        and line["level"] == "INFO"
        and line["logger"] == "memoryapp.request"
    )
    assert "path" not in line and "query" not in line


def test_the_formatter_keeps_an_exceptions_type_and_frames_and_drops_its_message():
    try:
        raise ValueError(f"value was {PII}")
    except ValueError:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "failed: %s", ("a count",), exc_info=__import__("sys").exc_info()
        )
    record.request = object()  # what Django attaches: its repr would carry the query string
    line = json.loads(FORMATTER.format(record))
    assert "builtins.ValueError" in line["exc_info"] and "test_log_content.py" in line["exc_info"]
    assert PII not in line["exc_info"] and line["message"] == "failed: a count" and line["request"] == "<object>"


def test_sql_is_never_logged_whatever_the_level(settings):
    assert logging.getLevelName(settings.LOGGING["loggers"]["django.db.backends"]["level"]) > logging.DEBUG
