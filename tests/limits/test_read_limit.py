"""SPEC §4.7: reads (recall and list, REST and MCP) are limited per credential — a budget of their
own (MEMORY_READS_PER_HOUR, generous default), 429 AGENT_MEMORY_RATE_LIMITED with
`details.operation: "read"` and the remember limit's headers. Every 429 names its budget
(`remember`, `read`, `turn`). The attacker's view: a read-only credential that loops, across
both surfaces, against a neighbour credential's budget, with requests that are refused anyway."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memoryapp import mcp
from memoryapp.ratelimit import READ_BUCKET, get_limiter
from tests.credits.support import ai_agent, post_turn, user_says
from tests.limits.support import _age_redis_window, _credential_id
from tests.recall.support import _django_setup
from tests.support import error_code, make_agent


def _read(agent, surface: str, operation: str, body: dict | None = None):
    """(status, error body or None, headers) of one read on either surface."""
    body = body if body is not None else ({"query": "window seats"} if operation == "recall" else {})
    if surface == "rest":
        response = agent.call(operation, body)
        return response.status_code, response.json() if response.status_code >= 400 else None, response
    result = mcp.run_operation(agent.token, operation, body)
    error = result.structured_content if result.is_error else None
    status = (
        200
        if not result.is_error
        else {"AGENT_MEMORY_RATE_LIMITED": 429, "VALIDATION_ERROR": 400, "INSUFFICIENT_SCOPE": 403}[
            error["error"]["code"]
        ]
    )
    return status, error, None


# --- settings -------------------------------------------------------------------------------------
def test_the_read_limit_is_generous_by_default_and_read_from_the_environment(tmp_path):
    assert settings.MEMORY_READS_PER_HOUR == 1200  # one read every 3 s for a whole hour
    code = "from django.conf import settings; print(settings.MEMORY_READS_PER_HOUR)"
    result = _django_setup(
        {"VAR_DIR": str(tmp_path / "v1"), "MEMORY_EMBEDDER": "hashing", "MEMORY_READS_PER_HOUR": "7"}, code=code
    )
    assert result.returncode == 0 and result.stdout.split() == ["7"], result.stderr


@pytest.mark.parametrize("value", ["0", "-5", "many", "1.5"])
def test_a_bad_read_limit_stops_start_up(value, tmp_path):
    result = _django_setup(
        {"VAR_DIR": str(tmp_path / "v"), "MEMORY_EMBEDDER": "hashing", "MEMORY_READS_PER_HOUR": value}
    )
    assert result.returncode != 0 and "started" not in result.stdout
    assert "MEMORY_READS_PER_HOUR" in result.stderr


# --- the 429 ---------------------------------------------------------------------------------------
@override_settings(MEMORY_READS_PER_HOUR=3, MEMORY_EMBEDDER="hashing")
def test_reads_over_the_limit_answer_429_read_with_the_remember_limits_headers(world):
    agent = make_agent(world.viewer, scopes=("memory:read",))  # the read-only credential of the issue
    answered = [agent.recall(query="window seats"), agent.list(), agent.recall(query="editor")]
    assert [r.status_code for r in answered] == [200, 200, 200]
    assert [r["RateLimit-Limit"] for r in answered] == ["3", "3", "3"]
    assert [r["RateLimit-Remaining"] for r in answered] == ["2", "1", "0"]
    assert all(1 <= int(r["RateLimit-Reset"]) <= settings.RATE_LIMIT_WINDOW_SECONDS for r in answered)
    assert all("Retry-After" not in r for r in answered)

    for refused in (agent.list(), agent.recall(query="window seats")):
        assert refused.status_code == 429 and error_code(refused) == "AGENT_MEMORY_RATE_LIMITED"
        error = refused.json()["error"]
        assert error["details"]["operation"] == "read" and error["message"]
        assert 1 <= error["details"]["retryAfterSeconds"] <= settings.RATE_LIMIT_WINDOW_SECONDS
        assert refused["RateLimit-Limit"] == "3" and refused["RateLimit-Remaining"] == "0"
        assert 1 <= int(refused["Retry-After"]) <= settings.RATE_LIMIT_WINDOW_SECONDS
        assert refused["Retry-After"] == str(max(1, int(refused["RateLimit-Reset"])))


@override_settings(MEMORY_READS_PER_HOUR=2, MEMORY_EMBEDDER="hashing")
def test_mcp_reads_share_the_credentials_budget_and_refuse_like_rest(world):
    agent = make_agent(world.editor)
    assert not mcp.run_operation(agent.token, "recall", {"query": "tea"}).is_error
    assert not mcp.run_operation(agent.token, "list", {}).is_error
    rest = agent.recall(query="tea")
    assert rest.status_code == 429 and rest.json()["error"]["details"]["operation"] == "read"
    for operation, body in (("recall", {"query": "tea"}), ("list", {})):
        result = mcp.run_operation(agent.token, operation, body)
        assert result.is_error and result.structured_content["error"]["code"] == "AGENT_MEMORY_RATE_LIMITED"
        assert result.structured_content["error"]["details"]["operation"] == "read"
        assert "AGENT_MEMORY_RATE_LIMITED (HTTP 429)" in result.content[0].text


@override_settings(MEMORY_READS_PER_HOUR=2, AGENT_REMEMBERS_PER_HOUR=2, MEMORY_EMBEDDER="hashing")
def test_reads_and_remembers_are_separate_budgets_and_each_429_names_its_own(world):
    agent = make_agent(world.editor)
    assert [agent.remember(namespace="n", text=f"note {i}").status_code for i in range(2)] == [201, 201]
    assert [agent.recall(query="note").status_code, agent.list().status_code] == [200, 200]  # remembers used none
    remember = agent.remember(namespace="n", text="third")
    assert remember.status_code == 429 and remember.json()["error"]["details"]["operation"] == "remember"
    read = agent.list()
    assert read.status_code == 429 and read.json()["error"]["details"]["operation"] == "read"


@override_settings(AGENT_TURNS_PER_HOUR=1, MEMORY_EMBEDDER="hashing")
def test_the_turn_limits_429_names_turn(world, django_capture_on_commit_callbacks):
    helper, agent = ai_agent(world), make_agent(world.editor)
    first = post_turn(agent, helper, user_says("hello"), capture=django_capture_on_commit_callbacks)
    assert first.status_code in (200, 202), first.json()
    refused = post_turn(
        agent, helper, user_says("hello again"), conversation_id="conv-2", capture=django_capture_on_commit_callbacks
    )
    assert refused.status_code == 429 and refused.json()["error"]["details"]["operation"] == "turn"


# --- who pays ---------------------------------------------------------------------------------------
@override_settings(MEMORY_READS_PER_HOUR=2, MEMORY_EMBEDDER="hashing")
def test_one_credential_exhausting_its_reads_leaves_every_other_credential_alone(world):
    hostile = make_agent(world.viewer, scopes=("memory:read",))
    neighbour_same_member = make_agent(world.viewer, scopes=("memory:read",))
    other_member = make_agent(world.editor)
    for _ in range(2):
        assert hostile.recall(query="x").status_code == 200
    assert hostile.recall(query="x").status_code == 429
    for agent in (neighbour_same_member, other_member):
        answer = agent.recall(query="x")
        assert answer.status_code == 200 and answer["RateLimit-Remaining"] == "1"


@override_settings(MEMORY_READS_PER_HOUR=2, MEMORY_EMBEDDER="hashing")
def test_a_read_refused_for_another_reason_uses_no_read(world):
    agent = make_agent(world.editor)
    write_only = make_agent(world.editor, scopes=("memory:write",))
    assert error_code(agent.recall(query="")) == "VALIDATION_ERROR"
    assert error_code(agent.list(cursor="garbage")) == "VALIDATION_ERROR"  # fails inside the read: slot handed back
    assert error_code(agent.call("recall", {"query": "x" * 1001})) == "VALIDATION_ERROR"
    assert error_code(write_only.recall(query="x")) == "INSUFFICIENT_SCOPE"
    assert agent.recall(query="x")["RateLimit-Remaining"] == "1"
    assert write_only.remember(namespace="n", text="note").status_code == 201


OPERATION = st.tuples(
    st.sampled_from(["a", "b"]), st.sampled_from(["rest", "mcp"]), st.sampled_from(["recall", "list", "bad"])
)


@given(calls=st.lists(OPERATION, min_size=1, max_size=14), limit=st.integers(1, 4))
@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_interleaving_admits_exactly_the_limit_per_credential(world, calls, limit):
    """Generated sequences of reads by two credentials over both surfaces, with invalid ones mixed
    in: each credential gets exactly `limit` successful reads, refusals for another reason use
    none, and every refusal over the limit is the read 429."""
    agents = {"a": make_agent(world.viewer, scopes=("memory:read",)), "b": make_agent(world.editor)}
    used = {"a": 0, "b": 0}
    with override_settings(MEMORY_READS_PER_HOUR=limit, MEMORY_EMBEDDER="hashing"):
        for who, surface, operation in calls:
            if operation == "bad":
                status, error, _ = _read(agents[who], surface, "recall", {"query": ""})
                assert status == 400 and error["error"]["code"] == "VALIDATION_ERROR"  # before the budget, over it too
                continue
            status, error, response = _read(agents[who], surface, operation)
            if used[who] < limit:
                assert status == 200, error
                used[who] += 1
                if response is not None:
                    assert response["RateLimit-Remaining"] == str(limit - used[who])
            else:
                assert status == 429 and error["error"]["details"]["operation"] == "read"
    for agent in agents.values():
        get_limiter().reset(_credential_id(agent), READ_BUCKET)


@override_settings(MEMORY_READS_PER_HOUR=1, RATE_LIMIT_WINDOW_SECONDS=60, MEMORY_EMBEDDER="hashing")
def test_the_read_window_rolls(world, time_machine):
    from django.utils import timezone

    agent = make_agent(world.editor)
    assert agent.list().status_code == 200
    assert agent.list().status_code == 429
    if type(get_limiter()).__name__ == "RedisRateLimiter":
        _age_redis_window(_credential_id(agent), 61, bucket=READ_BUCKET)  # Redis keeps its own clock
    else:
        from datetime import timedelta

        time_machine.move_to(timezone.now() + timedelta(seconds=61))
    assert agent.list().status_code == 200


@override_settings(RATE_LIMIT_BACKEND="redis", REDIS_URL="redis://127.0.0.1:1/0", MEMORY_EMBEDDER="hashing")
def test_with_the_limiter_down_reads_go_on_without_its_headers(agent):
    response = agent.recall(query="anything")
    assert response.status_code == 200 and "RateLimit-Limit" not in response
    assert agent.remember(namespace="n", text="not without a counter").status_code == 503
