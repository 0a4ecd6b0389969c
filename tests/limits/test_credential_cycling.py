"""Issue 22, review finding F1: a member must not multiply a budget by revoking a spent credential
and creating a fresh one. Every budget (remember, read, turn) is charged to the credential (SPEC
§4.7, its RateLimit-* headers) and to the member; the member's bound is the limit times the
member's usable credentials at admission (docs/limits.md), so each live credential keeps its
full budget while a revoked or expired credential's spending stays on the member until the
window rolls. On both limiter backends (Redis when REDIS_URL is set, the database otherwise)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from governance import actions
from governance.models import Credential
from tests.credits.support import ai_agent, post_turn, user_says
from tests.support import AgentClient, error_code, make_agent, on_postgres

pytestmark = pytest.mark.django_db

CYCLES = 3


def _revoke(agent: AgentClient, member) -> None:
    credential = Credential.objects.filter(member=member, revoked_at__isnull=True).order_by("-id").first()
    assert credential is not None and credential.prefix in agent.token
    actions.revoke_credential(credential, actor=member.user)


def _cycle(member, spend, *, scopes=("memory:read", "memory:write"), cycles: int = CYCLES) -> tuple[int, list]:
    """Spend a credential until refused, revoke it, create the next, `cycles` times: how many
    units were admitted in all, and the refusals seen."""
    admitted, refusals = 0, []
    for _ in range(cycles):
        agent = make_agent(member, scopes=scopes)
        while True:
            response = spend(agent, admitted)
            if response.status_code == 429:
                refusals.append(response)
                break
            assert response.status_code in (200, 201, 202), response.json()
            admitted += 1
        _revoke(agent, member)
    return admitted, refusals


@override_settings(MEMORY_READS_PER_HOUR=3, MEMORY_EMBEDDER="hashing")
def test_cycling_credentials_does_not_reset_the_read_budget(world):
    admitted, refusals = _cycle(
        world.viewer,
        lambda agent, i: agent.recall(query="window seats") if i % 2 else agent.list(),
        scopes=("memory:read",),
    )
    assert admitted == 3  # the limit once, not once per credential (was 3 × CYCLES = 9)
    for refused in refusals:
        assert error_code(refused) == "AGENT_MEMORY_RATE_LIMITED"
        assert refused.json()["error"]["details"]["operation"] == "read"
        assert refused["RateLimit-Limit"] == "3" and refused["RateLimit-Remaining"] == "0"
        assert int(refused["Retry-After"]) >= 1


@override_settings(AGENT_REMEMBERS_PER_HOUR=2, MEMORY_EMBEDDER="hashing")
def test_cycling_credentials_does_not_reset_the_remember_budget(world):
    admitted, refusals = _cycle(
        world.editor, lambda agent, i: agent.remember(namespace="cycle", text=f"note number {i} {agent.token[-4:]}")
    )
    assert admitted == 2  # was 2 × CYCLES
    assert {r.json()["error"]["details"]["operation"] for r in refusals} == {"remember"}
    assert all(r["RateLimit-Remaining"] == "0" for r in refusals)


@override_settings(AGENT_TURNS_PER_HOUR=1, MEMORY_EMBEDDER="hashing")
def test_cycling_credentials_does_not_reset_the_turn_budget(world, django_capture_on_commit_callbacks):
    helper = ai_agent(world)

    def turn(agent, i):
        return post_turn(
            agent,
            helper,
            user_says(f"hello {i}"),
            conversation_id=f"conv-{agent.token[-6:]}-{i}",
            capture=django_capture_on_commit_callbacks,
        )

    admitted, refusals = _cycle(world.editor, turn)
    assert admitted == 1  # was 1 × CYCLES
    assert {r.json()["error"]["details"]["operation"] for r in refusals} == {"turn"}


@override_settings(MEMORY_READS_PER_HOUR=2, MEMORY_EMBEDDER="hashing")
def test_an_expired_credential_spending_stays_on_the_member(world):
    short = make_agent(world.viewer, scopes=("memory:read",))
    assert [short.list().status_code for _ in range(3)] == [200, 200, 429]
    Credential.objects.filter(member=world.viewer, revoked_at__isnull=True).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    fresh = make_agent(world.viewer, scopes=("memory:read",))
    refused = fresh.list()
    assert refused.status_code == 429 and refused.json()["error"]["details"]["operation"] == "read"


@override_settings(MEMORY_READS_PER_HOUR=2, MEMORY_EMBEDDER="hashing")
def test_each_live_credential_keeps_its_own_full_budget(world):
    """SPEC §4.7 stays per credential: two live credentials of one member read 2 each."""
    first, second = make_agent(world.viewer, scopes=("memory:read",)), make_agent(world.viewer, scopes=("memory:read",))
    answered = [first.list(), first.list(), second.list(), second.list()]
    assert [r.status_code for r in answered] == [200] * 4
    assert [r["RateLimit-Remaining"] for r in answered] == ["1", "0", "1", "0"]
    assert first.list().status_code == 429 and second.list().status_code == 429
    # ...and swapping one of them for a fresh credential buys nothing: the member spent 2 × 2
    _revoke(second, world.viewer)
    third = make_agent(world.viewer, scopes=("memory:read",))
    refused = third.list()
    assert refused.status_code == 429 and refused["RateLimit-Remaining"] == "0"


@override_settings(MEMORY_READS_PER_HOUR=2, MEMORY_EMBEDDER="hashing")
def test_one_members_cycling_leaves_other_members_alone(world):
    admitted, _ = _cycle(world.viewer, lambda agent, i: agent.list(), scopes=("memory:read",))
    assert admitted == 2
    other = make_agent(world.editor)
    assert other.list()["RateLimit-Remaining"] == "1"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not on_postgres(), reason="backend: row locks and real concurrency need PostgreSQL")
def test_the_member_bound_is_exact_under_concurrency(world, settings):
    """A revoked credential spent 2 of 3; two fresh ones race 12 threads each: the member's bound
    (3 × 2 live credentials = 6) admits exactly 4 more, none over 3 on either credential."""
    from django.db import connection

    from memoryapp.ratelimit import take_slot

    settings.MEMORY_READS_PER_HOUR = 3
    spent, _ = actions.create_credential(world.viewer, name="spent", scopes=["memory:read"])
    assert all(take_slot(spent, 3, bucket="read").allowed for _ in range(2))
    actions.revoke_credential(spent, actor=world.viewer.user)
    fresh = [actions.create_credential(world.viewer, name=f"fresh {i}", scopes=["memory:read"])[0] for i in range(2)]
    barrier = threading.Barrier(24, timeout=60)
    admitted: list[int] = []

    def read(credential) -> None:
        try:
            barrier.wait()
            if take_slot(credential, 3, bucket="read").allowed:
                admitted.append(credential.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=read, args=(fresh[i % 2],)) for i in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(admitted) == 4
    assert max(admitted.count(c.pk) for c in fresh) <= 3
