"""The rate limit (SPEC §4.7, §2 row 11): a sliding window per credential and budget, driven directly with a small
limit;
the window is aged by moving the stored admissions into the past (table rows, or the Redis scores on Redis' own
clock), never by waiting."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core import backends
from memoryapp import ratelimit
from memoryapp.models import RateLimitSlot
from memoryapp.ratelimit import RedisRateLimiter, get_limiter
from tests.limits.support import _age_redis_window, _credential_id, _use_up_the_hour, redis_url
from tests.support import error_code, make_agent

pytestmark = pytest.mark.django_db


def test_the_limit_admits_exactly_limit_per_window_and_counts_down(window, credential_id):
    slots = [window.limiter.acquire(credential_id, 3) for _ in range(4)]
    assert [s.allowed for s in slots] == [True, True, True, False]
    assert [s.remaining for s in slots] == [2, 1, 0, 0]
    assert all(s.limit == 3 for s in slots)
    assert window.stored(credential_id) == 3  # a refusal takes no slot


def test_headers_carry_limit_remaining_reset_and_retry_after_only_when_refused(window, credential_id):
    admitted = window.limiter.acquire(credential_id, 2)
    headers = admitted.headers()
    assert headers["RateLimit-Limit"] == "2" and headers["RateLimit-Remaining"] == "1"
    assert 3599 <= int(headers["RateLimit-Reset"]) <= 3600
    assert "Retry-After" not in headers
    window.limiter.acquire(credential_id, 2)
    window.age(credential_id, 1000)
    refused = window.limiter.acquire(credential_id, 2)
    assert not refused.allowed
    headers = refused.headers()
    assert 2599 <= int(headers["RateLimit-Reset"]) <= 2600  # when the oldest admission leaves
    assert headers["Retry-After"] == headers["RateLimit-Reset"]


def test_retry_after_is_at_least_one_second():
    assert ratelimit.Slot(False, 1, 0, 0).headers()["Retry-After"] == "1"
    assert ratelimit.Slot(False, 1, 0, 7).headers()["Retry-After"] == "7"
    assert ratelimit.Slot(True, 1, 0, 0).headers()["RateLimit-Reset"] == "0"


def test_the_window_rolls_over_after_an_hour_and_only_the_aged_admissions_leave(window, credential_id):
    for _ in range(3):
        assert window.limiter.acquire(credential_id, 3).allowed
    window.age(credential_id, 3599, count=1)  # still inside the hour
    assert not window.limiter.acquire(credential_id, 3).allowed
    window.age(credential_id, 2, count=1)  # now 3601 s old: out
    slot = window.limiter.acquire(credential_id, 3)
    assert slot.allowed and slot.remaining == 0
    # the aged admission counts for nothing: trimmed (Redis) or left to the cascade sweep (database limiter)
    assert window.counted(credential_id) == 3 and window.aged(credential_id) in (0, 1)
    assert not window.limiter.acquire(credential_id, 3).allowed


def test_a_refund_hands_back_only_the_slot_it_names(window, credential_id):
    first = window.limiter.acquire(credential_id, 2)
    second = window.limiter.acquire(credential_id, 2)
    window.limiter.refund(second)
    assert window.stored(credential_id) == 1
    again = window.limiter.acquire(credential_id, 2)
    assert again.allowed and again.remaining == 0
    window.limiter.refund(first)
    assert window.stored(credential_id) == 1


def test_a_refused_slot_refunds_nothing(window, credential_id):
    window.limiter.acquire(credential_id, 1)
    refused = window.limiter.acquire(credential_id, 1)
    window.limiter.refund(refused)
    assert window.stored(credential_id) == 1


def test_reset_clears_the_remember_budget_of_one_credential_only(window, credential_id):
    other = credential_id + 2
    window.limiter.reset(other)
    window.limiter.acquire(credential_id, 5)
    window.limiter.acquire(other, 5)
    window.limiter.reset(credential_id)  # the default budget is the remembers'
    assert window.stored(credential_id) == 0 and window.stored(other) == 1
    window.limiter.reset(other)


def test_a_turn_slot_is_refunded_to_the_turn_budget(window, credential_id):
    window.limiter.acquire(credential_id, 5)
    turn = window.limiter.acquire(credential_id, 5, "turn")
    window.limiter.refund(turn)
    assert window.stored(credential_id, "turn") == 0 and window.stored(credential_id) == 1


def test_budgets_and_credentials_count_apart(window, credential_id):
    other = credential_id + 1
    window.limiter.reset(other)
    assert window.limiter.acquire(credential_id, 1).allowed
    assert window.limiter.acquire(credential_id, 1, "turn").allowed  # turns never use up remembers
    assert window.limiter.acquire(other, 1).allowed  # per credential
    assert not window.limiter.acquire(credential_id, 1).allowed
    assert not window.limiter.acquire(credential_id, 1, "turn").allowed
    window.limiter.reset(credential_id, "turn")
    assert window.stored(credential_id, "turn") == 0 and window.stored(credential_id) == 1
    window.limiter.reset(other)


def test_the_limiter_follows_the_configured_backend(settings):
    backends.forget("RATE_LIMIT_BACKEND")
    try:
        settings.RATE_LIMIT_BACKEND = "database"
        assert isinstance(ratelimit.get_limiter(), ratelimit.DatabaseRateLimiter)
        url = redis_url()
        if url:
            settings.RATE_LIMIT_BACKEND, settings.REDIS_URL = "redis", url
            assert isinstance(ratelimit.get_limiter(), ratelimit.RedisRateLimiter)
    finally:
        backends.forget("RATE_LIMIT_BACKEND")


def test_an_unreachable_redis_refuses_instead_of_admitting():
    limiter = ratelimit.RedisRateLimiter("redis://127.0.0.1:1/0")
    with pytest.raises(ratelimit.ApiError) as refused:
        limiter.acquire(1, 120)
    assert refused.value.status == 503 and refused.value.code == "RATE_LIMIT_UNAVAILABLE"
    assert isinstance(refused.value.message, str) and refused.value.message.strip()
    assert refused.value.headers == {"Retry-After": "5"}
    limiter.refund(ratelimit.Slot(True, 1, 0, 1, "h", 1))  # a lost refund is not an error


def test_rate_limit_reset_says_when_the_oldest_admission_leaves_the_window(agent, time_machine):
    first = agent.remember(namespace="n", text="first")
    assert 3599 <= int(first["RateLimit-Reset"]) <= 3600
    assert first["RateLimit-Limit"] == "120" and first["RateLimit-Remaining"] == "119"
    if isinstance(get_limiter(), RedisRateLimiter):
        _age_redis_window(_credential_id(agent), 600)
    else:
        time_machine.move_to(timezone.now() + timedelta(minutes=10))
    later = agent.remember(namespace="n", text="ten minutes later")
    assert 2999 <= int(later["RateLimit-Reset"]) <= 3001
    assert later["RateLimit-Remaining"] == "118"


@pytest.mark.redis
def test_the_redis_window_rolls_over_exactly(world, settings):
    if not isinstance(get_limiter(), RedisRateLimiter):
        pytest.skip("backend: the Redis limiter runs on the PostgreSQL + Redis suite")
    agent = make_agent(world.editor)
    credential_id = _credential_id(agent)
    _use_up_the_hour(agent)
    assert error_code(agent.remember(namespace="n", text="refused")) == "AGENT_MEMORY_RATE_LIMITED"
    _age_redis_window(credential_id, 3601, count=10)  # the ten oldest leave the window
    for i in range(10):
        assert agent.remember(namespace="n", text=f"after roll {i}").status_code == 201, i
    refused = agent.remember(namespace="n", text="the eleventh")
    assert error_code(refused) == "AGENT_MEMORY_RATE_LIMITED"
    assert 1 <= int(refused["Retry-After"]) <= 3600
    limiter = get_limiter()
    assert limiter._client.zcard(limiter._key(credential_id)) == 120  # trimmed, not grown


@pytest.mark.parametrize("window_seconds", [60, 3600, 7200, 86400])
def test_the_cascade_sweep_purges_only_admissions_the_window_has_left(settings, window_seconds):
    """The sweep drops the embedded limiter's rows once the configured window has let them go, never
    earlier: a row still inside a longer window (RATE_LIMIT_WINDOW_SECONDS up to a day) keeps counting,
    else the database limiter would admit more than its budget after every sweep."""
    from retention.lifecycle import cascade_sweep

    settings.RATE_LIMIT_WINDOW_SECONDS = window_seconds
    now = timezone.now()
    inside = RateLimitSlot.objects.create(credential_id=1, member_id=1, at=now - timedelta(seconds=window_seconds - 1))
    left = RateLimitSlot.objects.create(credential_id=1, member_id=1, at=now - timedelta(seconds=window_seconds + 1))
    assert cascade_sweep(now=now)["rateLimitCountersPurged"] == 1
    assert list(RateLimitSlot.objects.values_list("pk", flat=True)) == [inside.pk]
    assert not RateLimitSlot.objects.filter(pk=left.pk).exists()
