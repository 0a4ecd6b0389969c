"""Retries only where they are safe, against the live product: a 429 is waited out for as long as
the server says (and only within the caller's max wait), a 503 RATE_LIMIT_UNAVAILABLE is retried
with jittered back-off, a write whose outcome is unknown is never sent twice."""

from __future__ import annotations

import time
from collections.abc import Iterator

import anyio
import httpx
import pytest

from governed_memory import AsyncMemoryClient, MemoryClient, RetryPolicy, errors
from live_server import LiveServer, World, free_port


class Recorder:
    """The HTTP exchanges of one client (httpx event hooks) and the waits its policy asked for."""

    def __init__(self, *, really_sleep: bool = True):
        self.statuses: list[int] = []
        self.retry_after: list[str | None] = []
        self.requests = 0
        self.sleeps: list[float] = []
        self.really_sleep = really_sleep

    def on_request(self, request: httpx.Request) -> None:
        self.requests += 1

    def on_response(self, response: httpx.Response) -> None:
        self.statuses.append(response.status_code)
        self.retry_after.append(response.headers.get("Retry-After"))

    async def aon_request(self, request: httpx.Request) -> None:
        self.on_request(request)

    async def aon_response(self, response: httpx.Response) -> None:
        self.on_response(response)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.really_sleep:
            time.sleep(seconds)

    async def async_sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.really_sleep:
            await anyio.sleep(seconds)

    def http(self, **kwargs) -> httpx.Client:
        return httpx.Client(event_hooks={"request": [self.on_request], "response": [self.on_response]}, **kwargs)

    def async_http(self, **kwargs) -> httpx.AsyncClient:
        return httpx.AsyncClient(event_hooks={"request": [self.aon_request], "response": [self.aon_response]}, **kwargs)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    yield Recorder()


def test_a_refused_remember_is_retried_after_the_servers_retry_after(
    live: LiveServer, world: World, recorder: Recorder
):
    policy = RetryPolicy(max_wait=30, sleep=recorder.sleep)
    with MemoryClient(
        live.url("tight"), world.member("backoff").credential(), retry=policy, http_client=recorder.http()
    ) as memory:
        memory.remember("backoff", "one")
        memory.remember("backoff", "two")
        third = memory.remember("backoff", "three: waited for the window to move")
    assert recorder.statuses == [201, 201, 429, 201]
    asked = float(recorder.retry_after[2])
    assert 1 <= asked <= 4 and recorder.sleeps == [asked]  # exactly what the server asked, once
    assert third.memory.text.startswith("three") and third.superseded == 0


def test_a_429_longer_than_the_callers_max_wait_is_raised_at_once(live: LiveServer, world: World, recorder: Recorder):
    policy = RetryPolicy(max_wait=0.5, sleep=recorder.sleep)
    with MemoryClient(
        live.url("tight"), world.member("backoff2").credential(), retry=policy, http_client=recorder.http()
    ) as memory:
        memory.remember("backoff", "one")
        memory.remember("backoff", "two")
        with pytest.raises(errors.RateLimited) as raised:
            memory.remember("backoff", "three")
    assert recorder.sleeps == [] and recorder.statuses == [201, 201, 429]
    assert raised.value.retry_after == float(recorder.retry_after[2]) > 0.5


def test_a_read_over_the_read_budget_is_retried_after_the_servers_retry_after(
    live: LiveServer, world: World, recorder: Recorder
):
    policy = RetryPolicy(max_wait=30, sleep=recorder.sleep)
    with MemoryClient(
        live.url("tight"), world.member("reads").credential(("memory:read",)), retry=policy, http_client=recorder.http()
    ) as memory:
        for _ in range(3):
            memory.list_page()
        fourth = memory.recall("waited for the read window to move")  # MEMORY_READS_PER_HOUR=3
    assert recorder.statuses == [200, 200, 200, 429, 200]
    asked = float(recorder.retry_after[3])
    assert 1 <= asked <= 4 and recorder.sleeps == [asked]
    assert fourth.memories == []


def test_async_client_waits_out_a_429_on_a_turn(live: LiveServer, world: World):
    recorder = Recorder()
    agent = world.main.owner.api("POST", "agents", {"name": "retry bot", "vectorMemory": True}).json()["id"]
    token = world.member("turns").credential(name="turn retries")

    async def scenario() -> None:
        policy = RetryPolicy(max_wait=30, async_sleep=recorder.async_sleep)
        async with AsyncMemoryClient(
            live.url("tight"), token, retry=policy, http_client=recorder.async_http()
        ) as memory:
            await memory.submit_turn(agent, "retry-1", [("user", "Hello there")])
            await memory.submit_turn(agent, "retry-2", [("user", "Hello again")])  # AGENT_TURNS_PER_HOUR=1

    anyio.run(scenario)
    assert [s for s in recorder.statuses if s == 429] == [429] and recorder.statuses[-1] in (200, 202)
    assert recorder.sleeps == [float(recorder.retry_after[recorder.statuses.index(429)])]


def test_rate_limiter_unavailable_is_retried_with_jittered_backoff(live: LiveServer, world: World):
    recorder = Recorder(really_sleep=False)  # the server asks for 5 s each time; the waits are recorded, not slept
    jitter = iter([0.0, 1.0, 0.5])
    policy = RetryPolicy(max_attempts=3, max_wait=100, sleep=recorder.sleep, random=lambda: next(jitter))
    with (
        MemoryClient(
            live.url("nolimiter"), world.member("editor").credential(), retry=policy, http_client=recorder.http()
        ) as memory,
        pytest.raises(errors.RateLimitUnavailable) as raised,
    ):
        memory.remember("prefs", "the limiter is down")
    assert recorder.statuses == [503, 503, 503] and raised.value.retry_after == 5
    assert recorder.sleeps == [5.0 * 1.0, 5.0 * 1.5]  # never sooner than Retry-After, spread by the jitter


def test_a_remember_that_timed_out_is_never_sent_again(
    live: LiveServer, world: World, namespace: str, recorder: Recorder
):
    token = world.member("editor").credential()
    policy = RetryPolicy(max_attempts=4, sleep=recorder.sleep)
    too_short = httpx.Timeout(5.0, read=0.0005)  # an answer cannot come in half a millisecond
    with (
        MemoryClient(live.url(), token, retry=policy, timeout=too_short, http_client=recorder.http()) as memory,
        pytest.raises(errors.OutcomeUnknown) as raised,
    ):
        memory.remember(namespace, "Sent once, answer lost", key="once")
    assert recorder.requests == 1 and raised.value.request_sent is True
    with MemoryClient(live.url(), token) as memory:
        # Django cancels a request whose client went away, so the write may or may not have landed
        # (hence OutcomeUnknown); what must never happen is a second version from a blind retry.
        time.sleep(2)
        assert len(list(memory.list(namespace=namespace))) <= 1
        assert memory.remember(namespace, "The caller decides to send it again", key="once").memory.version <= 2


def test_a_read_that_timed_out_is_retried(live: LiveServer, world: World, recorder: Recorder):
    policy = RetryPolicy(max_attempts=3, sleep=recorder.sleep)
    timeout = httpx.Timeout(5.0, read=0.0005)
    with (
        MemoryClient(
            live.url(), world.member("editor").credential(), retry=policy, timeout=timeout, http_client=recorder.http()
        ) as memory,
        pytest.raises(errors.OutcomeUnknown),
    ):
        memory.recall("anything at all")
    assert recorder.requests == 3 and len(recorder.sleeps) == 2


def test_a_write_that_could_not_connect_is_retried(recorder: Recorder):
    policy = RetryPolicy(max_attempts=3, sleep=recorder.sleep)
    with (
        MemoryClient(f"http://127.0.0.1:{free_port()}", "gam_x", retry=policy, http_client=recorder.http()) as memory,
        pytest.raises(errors.ConnectionFailed),
    ):
        memory.remember("prefs", "never left this machine")
    assert recorder.requests == 3 and len(recorder.sleeps) == 2


def test_other_refusals_are_never_retried(live: LiveServer, world: World, recorder: Recorder):
    with MemoryClient(
        live.url(),
        world.member("editor").credential(),
        retry=RetryPolicy(sleep=recorder.sleep),
        http_client=recorder.http(),
    ) as memory:
        for call in (
            lambda: memory.remember("prefs", "ada@example.com"),
            lambda: memory.forget("999999999"),
            lambda: memory.recall("x", limit=0),
        ):
            with pytest.raises(errors.APIError):
                call()
    assert recorder.statuses == [400, 404, 400] and recorder.sleeps == []


def service_unavailable_transport(recorder: Recorder) -> httpx.Client:
    """A server whose database cannot serve: every call answers what the server answers then
    (core/unavailable.py), 503 SERVICE_UNAVAILABLE with Retry-After."""
    body = {
        "error": {
            "code": "SERVICE_UNAVAILABLE",
            "message": "The database cannot serve this request right now.",
            "details": {"retryAfterSeconds": 2},
        }
    }
    transport = httpx.MockTransport(lambda request: httpx.Response(503, json=body, headers={"Retry-After": "2"}))
    return httpx.Client(
        transport=transport, event_hooks={"request": [recorder.on_request], "response": [recorder.on_response]}
    )


def test_a_busy_database_is_a_typed_error_retried_for_reads_only():
    recorder = Recorder(really_sleep=False)
    policy = RetryPolicy(max_attempts=3, sleep=recorder.sleep)
    with MemoryClient(
        "http://memory.test", "gam_x", retry=policy, http_client=service_unavailable_transport(recorder)
    ) as memory:
        with pytest.raises(errors.ServiceUnavailable) as raised:
            memory.recall("anything")
        assert recorder.requests == 3 and len(recorder.sleeps) == 2 and all(wait >= 2 for wait in recorder.sleeps)
        assert raised.value.retry_after == 2 and raised.value.status == 503
        with pytest.raises(errors.ServiceUnavailable):
            memory.remember("prefs", "may or may not have landed")
        assert recorder.requests == 4  # a write is raised at once, never sent twice
