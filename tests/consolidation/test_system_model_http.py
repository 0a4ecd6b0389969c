"""The OpenAI-compatible system model, against a small HTTP server on loopback (never the internet)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from credits.models import Consolidation, ModelPrice, UsageRecord
from memoryapp.models import MemoryVersion, Source
from memoryapp.system_models import OpenAICompatibleModel, SystemModelError
from tests.credits.support import post_turn, user_says

PII = ["jane.doe@example.com", "4111 1111 1111 1111", "+81 90-1234-5678", "sk-live-0123456789abcdefABCDEF"]


HANG = "hang"  # a delay that never ends before the test does: a timeout with no race against the clock


class FakeChatServer:
    """Answers chat-completions requests from a script of (status, body-or-None, delay); a delay
    of HANG holds the answer until the server shuts down."""

    def __init__(self):
        self.release = threading.Event()
        self.requests: list[dict] = []
        self.raw: list[bytes] = []
        self.headers: list[dict] = []
        self.script: list[tuple[int, object, float]] = []
        self.default = (200, {"memories": []}, 0.0)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.raw.append(raw)
                server.headers.append(dict(self.headers))
                server.requests.append(json.loads(raw))
                status, content, delay = server.script.pop(0) if server.script else server.default
                if delay == HANG:
                    server.release.wait()
                elif delay:
                    time.sleep(delay)
                if status == 200 and not isinstance(content, bytes):
                    payload = {
                        "id": "chatcmpl-1",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": json.dumps(content)},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366},
                    }
                    body = json.dumps(payload).encode()
                else:
                    body = content if isinstance(content, bytes) else b'{"error": "boom"}'
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def chat_server(settings, monkeypatch, db):
    """The fake server as the system model, "gpt-test-mini", priced."""
    ModelPrice.objects.create(model_name="gpt-test-mini", input_per_1k="0.5", output_per_1k="1.5")
    with FakeChatServer() as server:
        settings.SYSTEM_MODEL = "openai"
        settings.SYSTEM_MODEL_URL = server.url
        settings.SYSTEM_MODEL_NAME = "gpt-test-mini"
        settings.SYSTEM_MODEL_API_KEY = "test-key-123"
        settings.SYSTEM_MODEL_TIMEOUT_SECONDS = 2.0
        monkeypatch.setattr(OpenAICompatibleModel, "backoff_seconds", 0.0)
        yield server


def test_http_model_memories_are_stored_and_usage_comes_from_the_backend(
    world, ready, chat_server, django_capture_on_commit_callbacks
):
    agent, client = ready
    chat_server.default = (
        200,
        {
            "memories": [
                {
                    "type": "preference",
                    "topic": "preferred_language",
                    "summary": "Prefers answers in Japanese",
                    "details": ["since 2024"],
                }
            ]
        },
        0.0,
    )
    response = post_turn(
        client, agent, user_says("Please answer in Japanese."), capture=django_capture_on_commit_callbacks
    )
    assert response.status_code == 202

    sent = chat_server.requests[0]
    assert sent["model"] == "gpt-test-mini" and sent["response_format"] == {"type": "json_object"}
    assert "Please answer in Japanese." in sent["messages"][1]["content"]
    assert chat_server.headers[0]["Authorization"] == "Bearer test-key-123"
    memory = MemoryVersion.objects.get(member=world.editor, key="preferred_language")
    assert memory.source == Source.AI_EXTRACTED and memory.details == "since 2024"
    record = UsageRecord.objects.get()
    assert (record.model_name, record.input_tokens, record.output_tokens) == ("gpt-test-mini", 321, 45)
    assert str(record.input_cost) == "0.160500" and str(record.output_cost) == "0.067500"


def test_personal_data_never_reaches_the_http_model(world, ready, chat_server, django_capture_on_commit_callbacks):
    agent, client = ready
    for secret in PII:
        messages = [
            {"role": "user", "content": "I prefer short answers."},
            {"role": "user", "content": f"by the way: {secret}"},
            {"role": "assistant", "content": "ok"},
        ]
        response = post_turn(client, agent, messages, capture=django_capture_on_commit_callbacks)
        assert response.json()["consolidation"]["reason"] == "personal_data"
    post_turn(client, agent, user_says("I prefer short answers."), capture=django_capture_on_commit_callbacks)
    assert len(chat_server.requests) == 1  # only the clean turn was sent
    everything_received = b"".join(chat_server.raw).decode()
    for secret in PII:
        assert secret not in everything_received
    assert all(c.messages is None for c in Consolidation.objects.all())


def test_transient_errors_are_retried(world, ready, chat_server, django_capture_on_commit_callbacks):
    agent, client = ready
    chat_server.script = [(503, None, 0.0), (429, None, 0.0)]
    post_turn(client, agent, user_says("hello"), capture=django_capture_on_commit_callbacks)
    assert len(chat_server.requests) == 3
    assert Consolidation.objects.get().status == "done"
    assert UsageRecord.objects.count() == 1


def test_persistent_failure_is_bounded_and_charges_nothing(
    world, ready, chat_server, django_capture_on_commit_callbacks
):
    agent, client = ready
    chat_server.default = (500, None, 0.0)
    post_turn(client, agent, user_says("hello"), capture=django_capture_on_commit_callbacks)
    assert len(chat_server.requests) == OpenAICompatibleModel.max_attempts
    consolidation = Consolidation.objects.get()
    assert (consolidation.status, consolidation.reason) == ("failed", "model_error")
    assert UsageRecord.objects.count() == 0


def test_client_errors_are_not_retried(world, ready, chat_server, django_capture_on_commit_callbacks):
    agent, client = ready
    chat_server.default = (401, None, 0.0)
    post_turn(client, agent, user_says("hello"), capture=django_capture_on_commit_callbacks)
    assert len(chat_server.requests) == 1
    assert Consolidation.objects.get().reason == "model_error"


def test_timeout_fails_without_charge(world, ready, chat_server, settings, django_capture_on_commit_callbacks):
    agent, client = ready
    settings.SYSTEM_MODEL_TIMEOUT_SECONDS = 0.2
    chat_server.default = (200, {"memories": []}, HANG)
    post_turn(client, agent, user_says("hello"), capture=django_capture_on_commit_callbacks)
    assert Consolidation.objects.get().reason == "model_error"
    assert UsageRecord.objects.count() == 0


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b'{"choices": []}',
        b'{"choices": [{"message": {"content": "no json here"}}]}',
        b'{"choices": [{"message": {"content": "{\\"memories\\": 3}"}}]}',
    ],
)
def test_malformed_answers_fail_without_charge(world, ready, chat_server, content, django_capture_on_commit_callbacks):
    agent, client = ready
    chat_server.default = (200, content, 0.0)
    post_turn(client, agent, user_says("hello"), capture=django_capture_on_commit_callbacks)
    assert Consolidation.objects.get().reason == "model_error"
    assert UsageRecord.objects.count() == 0


def test_bad_memories_in_an_answer_are_dropped_and_the_rest_stored(
    world, ready, chat_server, django_capture_on_commit_callbacks
):
    agent, client = ready
    chat_server.default = (
        200,
        {
            "memories": [
                {"type": "fact", "topic": "bad topic!", "summary": "x"},
                {"type": "fact", "topic": "job_role", "summary": "[EMAIL]"},
                {"type": "fact", "topic": "team", "summary": "Works in the data team"},
                "junk",
            ]
        },
        0.0,
    )
    post_turn(client, agent, user_says("hello"), capture=django_capture_on_commit_callbacks)
    consolidation = Consolidation.objects.get()
    assert consolidation.status == "done" and consolidation.memories_stored == 1
    assert list(MemoryVersion.objects.values_list("key", flat=True)) == ["team"]


def test_missing_usage_is_estimated(world, ready, chat_server):
    model = OpenAICompatibleModel()

    class Response:
        def json(self):
            return {"choices": [{"message": {"content": '{"memories": []}'}}]}

    extraction = model.parse(Response(), user_says("hello there"))
    assert extraction.input_tokens > 0 and extraction.output_tokens > 0


def test_unset_url_is_a_model_error(settings):
    settings.SYSTEM_MODEL_URL = ""
    with pytest.raises(SystemModelError):
        OpenAICompatibleModel()
