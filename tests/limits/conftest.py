"""The limiter driven directly, on both backends (the Redis one when REDIS_URL or
MUTATION_REDIS_URL names a server): `window` wraps a limiter with the means to age its stored
admissions (moving them into the past, never waiting) and to count them, per credential or per
member."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from memoryapp import ratelimit
from memoryapp.models import RateLimitSlot


def redis_url() -> str | None:
    return django_settings.REDIS_URL or os.environ.get("MUTATION_REDIS_URL")


class DatabaseWindow:
    def __init__(self):
        self.limiter = ratelimit.DatabaseRateLimiter()

    @staticmethod
    def _rows(credential_id: int | None, bucket: str, member_id: int | None = None):
        rows = RateLimitSlot.objects.filter(bucket=bucket)
        return rows.filter(member_id=member_id) if member_id is not None else rows.filter(credential_id=credential_id)

    def age(self, credential_id: int | None, seconds: float, count: int | None = None, bucket: str = "remember", *, member_id: int | None = None) -> None:
        hits = list(self._rows(credential_id, bucket, member_id).order_by("at", "pk"))
        for hit in hits if count is None else hits[:count]:
            hit.at -= timedelta(seconds=seconds)
            hit.save(update_fields=["at"])

    def stored(self, credential_id: int | None, bucket: str = "remember", *, member_id: int | None = None) -> int:
        return self._rows(credential_id, bucket, member_id).count()

    def counted(self, credential_id: int | None, bucket: str = "remember", *, member_id: int | None = None) -> int:
        """The admissions inside the window. The database limiter admits in one statement and
        leaves the aged rows to the cascade sweep (`ratelimit.expired_slots`), so they stay stored
        until it runs: this counts the others."""
        return self._rows(credential_id, bucket, member_id).exclude(pk__in=ratelimit.expired_slots(timezone.now()).values("pk")).count()

    def aged(self, credential_id: int | None, bucket: str = "remember", *, member_id: int | None = None) -> int:
        return ratelimit.expired_slots(timezone.now()).filter(pk__in=self._rows(credential_id, bucket, member_id).values("pk")).count()

    def forget_member(self, member_id: int, bucket: str = "remember") -> None:
        RateLimitSlot.objects.filter(member_id=member_id, bucket=bucket).delete()


class RedisWindow:
    def __init__(self, url: str):
        self.limiter = ratelimit.RedisRateLimiter(url)
        self.limiter._client.ping()

    def _key(self, credential_id: int | None, bucket: str, member_id: int | None = None) -> str:
        return self.limiter._member_key(member_id, bucket) if member_id is not None else self.limiter._key(credential_id, bucket)

    def age(self, credential_id: int | None, seconds: float, count: int | None = None, bucket: str = "remember", *, member_id: int | None = None) -> None:
        key = self._key(credential_id, bucket, member_id)
        entries = self.limiter._client.zrange(key, 0, -1 if count is None else count - 1, withscores=True)
        self.limiter._client.zadd(key, {member: score - seconds * 1_000_000 for member, score in entries})

    def stored(self, credential_id: int | None, bucket: str = "remember", *, member_id: int | None = None) -> int:
        return self.limiter._client.zcard(self._key(credential_id, bucket, member_id))

    def counted(self, credential_id: int | None, bucket: str = "remember", *, member_id: int | None = None) -> int:
        return self.stored(credential_id, bucket, member_id=member_id)  # the script trims as it admits

    def aged(self, credential_id: int | None, bucket: str = "remember", *, member_id: int | None = None) -> int:
        return 0

    def forget_member(self, member_id: int, bucket: str = "remember") -> None:
        self.limiter._client.delete(self.limiter._member_key(member_id, bucket))


_next_credential = iter(range(900_000_000, 901_000_000))


@pytest.fixture(params=["database", pytest.param("redis", marks=pytest.mark.redis)])
def window(request, db):
    if request.param == "database":
        return DatabaseWindow()
    url = redis_url()
    if not url:
        pytest.skip("backend: no Redis configured (REDIS_URL or MUTATION_REDIS_URL)")
    return RedisWindow(url)


@pytest.fixture
def credential_id(window):
    cid = next(_next_credential) + os.getpid() % 1000 * 1000
    _reset(window, cid)
    yield cid
    _reset(window, cid)


@pytest.fixture
def other_id(window, credential_id):
    """A second credential of the same member (the limiter only counts by its id), emptied
    before and after the test like `credential_id`."""
    oid = credential_id + 1
    _reset(window, oid)
    yield oid
    _reset(window, oid)


def _reset(window, cid: int) -> None:
    for bucket in ("remember", "turn"):
        window.limiter.reset(cid, bucket)


@pytest.fixture
def member_id(window, credential_id):
    """A member id no real member has (the limiter only counts by it): its spending is emptied
    before and after the test."""
    mid = credential_id + 500_000_000
    for bucket in ("remember", "turn"):
        window.forget_member(mid, bucket)
    yield mid
    for bucket in ("remember", "turn"):
        window.forget_member(mid, bucket)
